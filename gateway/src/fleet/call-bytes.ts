import type { Logger } from 'pino';
import { GatewayError } from '../errors.js';
import { ThrottledLog } from '../throttle/throttled-log.js';
import { isFinished, type QueuedCall } from './types.js';

export type BytesBound = 'queued_total' | 'queued_tenant' | 'finished';

export interface CallBytesLimits {
  /** Arguments the unfinished calls hold in all (fleet.maxQueuedBytes); absent: unbounded. */
  maxQueuedBytes?: number | undefined;
  /** … those queued by one tenant's keys (default: a quarter of maxQueuedBytes). */
  maxQueuedBytesPerTenant?: number | undefined;
  /** Arguments and results the finished calls kept hold in all (fleet.keepFinishedBytes). */
  keepFinishedBytes?: number | undefined;
}

/**
 * The bytes the queued calls hold (red team 9): the count bounds alone let one tenant's keys keep 25 000 calls of 16 KiB
 * of arguments, every one in memory and read whole at every start, and churned calls (expired, cancelled) kept theirs
 * for a week. Counted per call from its JSON arguments and result, as queued-calls.ts indexes it (from the store at start).
 */
export class CallBytes {
  /** Per call held: what it counts for. */
  private readonly sizes = new Map<string, number>();
  private unfinished = 0;
  private readonly unfinishedOf = new Map<string, number>();
  private finished = 0;
  private readonly lines: ThrottledLog;

  constructor(
    private readonly limits: CallBytesLimits,
    log: Logger,
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
    const size = CallBytes.sizeOf(c);
    this.sizes.set(c.id, size);
    this.count(c, size, 1);
  }

  /** A call changed (its state, its result). */
  replace(old: QueuedCall, c: QueuedCall): void {
    const before = this.sizes.get(c.id) ?? 0;
    const size = old.result === c.result && old.arguments === c.arguments ? before : CallBytes.sizeOf(c);
    this.count(old, before, -1);
    this.sizes.set(c.id, size);
    this.count(c, size, 1);
  }

  /** A call no longer held. */
  remove(c: QueuedCall): void {
    this.count(c, this.sizes.get(c.id) ?? 0, -1);
    this.sizes.delete(c.id);
  }

  get held(): { unfinished: number; finished: number } {
    return { unfinished: this.unfinished, finished: this.finished };
  }

  /** Whether the finished calls kept hold more than keepFinishedBytes. */
  get finishedOver(): boolean {
    return this.finished > (this.limits.keepFinishedBytes ?? Infinity);
  }

  /** Room for `bytes` more arguments in all, or the 429 that says why not (counted, one line a minute). */
  checkTotal(bytes: number): void {
    const max = this.limits.maxQueuedBytes ?? Infinity;
    if (this.unfinished + bytes <= max) return;
    this.onBound?.('queued_total');
    this.lines.write({ maxQueuedBytes: max, bytes: this.unfinished }, 'queued call refused: fleet.maxQueuedBytes reached (one line a minute)', 'total');
    throw new GatewayError('QUEUE_FULL', `the queued calls hold ${this.unfinished} bytes of arguments in all (at most ${max}); wait for some to finish`, {
      retryAfterSeconds: 10,
    });
  }

  /** Room for `bytes` more arguments of the tenant's keys, or the 429 that says why not (counted, one line a minute per tenant). */
  checkTenant(tenant: string, bytes: number): void {
    const held = this.unfinishedOf.get(tenant) ?? 0;
    const max = this.limits.maxQueuedBytesPerTenant ?? (this.limits.maxQueuedBytes ?? Infinity) / 4;
    if (held + bytes <= max) return;
    this.onBound?.('queued_tenant');
    const msg = 'queued call refused: fleet.maxQueuedBytesPerTenant reached (one line a minute per tenant)';
    this.lines.write({ tenant, maxQueuedBytesPerTenant: max, bytes: held }, msg, `tenant:${tenant}`);
    throw new GatewayError(
      'QUEUE_FULL',
      `the calls your tenant queued hold ${held} bytes of arguments (at most ${max}); wait for some to finish or cancel some`,
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
      this.finished += by * size;
      return;
    }
    this.unfinished += by * size;
    if (c.tenant === undefined) return;
    const n = (this.unfinishedOf.get(c.tenant) ?? 0) + by * size;
    if (n > 0) this.unfinishedOf.set(c.tenant, n);
    else this.unfinishedOf.delete(c.tenant);
  }
}
