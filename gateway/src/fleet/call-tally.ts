import type { Logger } from 'pino';
import { GatewayError } from '../errors.js';
import { ThrottledLog } from '../throttle/throttled-log.js';
import { isFinished, type QueuedCall } from './types.js';

export type BytesBound = 'queued_total' | 'queued_tenant' | 'finished';

export interface CallTallyLimits {
  /** Unfinished calls in all (fleet.maxQueuedTotal). */
  maxQueuedTotal: number;
  /** … queued by one tenant's keys (absent: only the total bounds them). */
  maxQueuedPerTenant?: number | undefined;
  /** Arguments the unfinished calls hold in all (fleet.maxQueuedBytes); absent: unbounded. */
  maxQueuedBytes?: number | undefined;
  /** … those queued by one tenant's keys (default: a quarter of maxQueuedBytes). */
  maxQueuedBytesPerTenant?: number | undefined;
  /** Arguments and results the finished calls kept hold in all (fleet.keepFinishedBytes). */
  keepFinishedBytes?: number | undefined;
}

/** What one tenant's keys have queued and not finished. */
interface TenantShare {
  calls: number;
  bytes: number;
}

/**
 * What the queued calls hold, in calls and in bytes, in all and per tenant, and the 429s their bounds give. The bytes
 * came with red team 9: the count bounds alone let one tenant's keys keep 25 000 calls of 16 KiB of arguments, every
 * one in memory and read whole at every start, and churned calls (expired, cancelled) kept theirs for a week. A call
 * counts for the JSON bytes of its arguments and result, as queued-calls.ts indexes it (from the store at start).
 */
export class CallTally {
  /** Per call held: the bytes it counts for. */
  private readonly sizes = new Map<string, number>();
  private unfinishedCalls = 0;
  private unfinishedBytes = 0;
  private readonly unfinishedOf = new Map<string, TenantShare>();
  private finishedBytes = 0;
  private readonly lines: ThrottledLog;

  constructor(
    private readonly limits: CallTallyLimits,
    private readonly log: Logger,
    private readonly onBound?: ((bound: BytesBound) => void) | undefined,
  ) {
    this.lines = new ThrottledLog(log, 'warn', { linesPerWindow: 1, windowMs: 60_000, maxKeys: 10_000 });
  }

  /** What a call counts for: the JSON bytes of its arguments and of its result. */
  static sizeOf(c: Pick<QueuedCall, 'arguments' | 'result'>): number {
    return Buffer.byteLength(JSON.stringify(c.arguments)) + (c.result ? Buffer.byteLength(JSON.stringify(c.result)) : 0);
  }

  /** A call held from now (new, or read from the store). */
  add(c: QueuedCall): void {
    const size = CallTally.sizeOf(c);
    this.sizes.set(c.id, size);
    this.count(c, size, 1);
  }

  /** A call changed (its state, its result). */
  replace(old: QueuedCall, c: QueuedCall): void {
    const before = this.sizes.get(c.id) ?? 0;
    const size = old.result === c.result && old.arguments === c.arguments ? before : CallTally.sizeOf(c);
    this.count(old, before, -1);
    this.sizes.set(c.id, size);
    this.count(c, size, 1);
  }

  /** A call no longer held. */
  remove(c: QueuedCall): void {
    this.count(c, this.sizes.get(c.id) ?? 0, -1);
    this.sizes.delete(c.id);
  }

  /** Unfinished calls in all. */
  get unfinished(): number {
    return this.unfinishedCalls;
  }

  get held(): { unfinished: number; finished: number } {
    return { unfinished: this.unfinishedBytes, finished: this.finishedBytes };
  }

  /** Whether the finished calls kept hold more than keepFinishedBytes. */
  get finishedOver(): boolean {
    return this.finishedBytes > (this.limits.keepFinishedBytes ?? Infinity);
  }

  /** Room for `n` more unfinished calls holding `bytes` of arguments in all, or the 429 that says why not. */
  checkTotal(n: number, bytes: number): void {
    const maxCalls = this.limits.maxQueuedTotal;
    if (this.unfinishedCalls + n > maxCalls)
      throw new GatewayError('QUEUE_FULL', `${this.unfinishedCalls} calls are queued in total (at most ${maxCalls}); wait for some to finish`, {
        retryAfterSeconds: 10,
      });
    const max = this.limits.maxQueuedBytes ?? Infinity;
    if (this.unfinishedBytes + bytes <= max) return;
    this.onBound?.('queued_total');
    const held = this.unfinishedBytes;
    this.lines.write({ maxQueuedBytes: max, bytes: held }, 'queued call refused: fleet.maxQueuedBytes reached (one line a minute)', 'total');
    throw new GatewayError('QUEUE_FULL', `the queued calls hold ${held} bytes of arguments in all (at most ${max}); wait for some to finish`, {
      retryAfterSeconds: 10,
    });
  }

  /** Room for one more call of the tenant's keys, holding `bytes` of arguments, or the 429 that says why not. */
  checkTenant(tenant: string, bytes: number): void {
    const mine = this.unfinishedOf.get(tenant) ?? { calls: 0, bytes: 0 };
    const maxCalls = this.limits.maxQueuedPerTenant ?? Infinity;
    if (mine.calls + 1 > maxCalls) {
      this.log.warn({ tenant, max: maxCalls }, 'queued call refused: fleet.maxQueuedPerTenant reached');
      throw new GatewayError('QUEUE_FULL', `${mine.calls} calls of your tenant are queued (at most ${maxCalls}); wait for some to finish or cancel some`, {
        retryAfterSeconds: 10,
      });
    }
    const max = this.limits.maxQueuedBytesPerTenant ?? (this.limits.maxQueuedBytes ?? Infinity) / 4;
    if (mine.bytes + bytes <= max) return;
    this.onBound?.('queued_tenant');
    const msg = 'queued call refused: fleet.maxQueuedBytesPerTenant reached (one line a minute per tenant)';
    this.lines.write({ tenant, maxQueuedBytesPerTenant: max, bytes: mine.bytes }, msg, `tenant:${tenant}`);
    throw new GatewayError(
      'QUEUE_FULL',
      `the calls your tenant queued hold ${mine.bytes} bytes of arguments (at most ${max}); wait for some to finish or cancel some`,
      {
        retryAfterSeconds: 10,
      },
    );
  }

  /** Finished calls forgotten early, past keepFinishedBytes: counted, one line a minute. */
  forgotFinished(n: number): void {
    if (n <= 0) return;
    for (let i = 0; i < n; i++) this.onBound?.('finished');
    const msg = 'finished queued calls forgotten early: fleet.keepFinishedBytes reached (one line a minute)';
    this.lines.write({ forgotten: n, keepFinishedBytes: this.limits.keepFinishedBytes }, msg, 'finished');
  }

  private count(c: QueuedCall, size: number, by: 1 | -1): void {
    if (isFinished(c.state)) {
      this.finishedBytes += by * size;
      return;
    }
    this.unfinishedCalls += by;
    this.unfinishedBytes += by * size;
    if (c.tenant === undefined) return;
    const share = this.unfinishedOf.get(c.tenant) ?? { calls: 0, bytes: 0 };
    share.calls += by;
    share.bytes += by * size;
    if (share.calls > 0) this.unfinishedOf.set(c.tenant, share);
    else this.unfinishedOf.delete(c.tenant);
  }
}
