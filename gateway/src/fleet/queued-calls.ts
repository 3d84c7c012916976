import type { Logger } from 'pino';
import { insertSorted, removeSorted, upperBound } from '../devices/sorted-ids.js';
import { GatewayError } from '../errors.js';
import type { EventBus } from '../events/bus.js';
import type { Store } from '../store/store.js';
import { CallTally, type BytesBound } from './call-tally.js';
import type { FleetConfig } from './config.js';
import { ownerFields } from './key-grants.js';
import type { SendClaims } from './send-claims.js';
import { StoreWriter } from './store-writer.js';
import { isFinished, isStale, NEXT_CALL_STATE, newId, QueuedCallSchema, type CallError, type CallResult, type CallState, type QueuedCall } from './types.js';

/** The store collection of queued calls, one document per call (key = call id). */
export const CALLS_COLLECTION = 'calls';

/** The error a `sent` call gets when nobody can know whether the device ran it (see `interruptSent`). */
export const CALL_INTERRUPTED = 'CALL_INTERRUPTED';

export type QueuedCallsSettings = Pick<
  FleetConfig,
  'maxQueuedPerDevice' | 'maxQueuedTotal' | 'defaultTtlMs' | 'maxTtlMs' | 'keepFinished' | 'keepFinishedMs' | 'maxArgumentsBytes' | 'maxResultBytes'
> &
  Partial<Pick<FleetConfig, 'maxQueuedBytes' | 'maxQueuedBytesPerTenant' | 'keepFinishedBytes'>> & {
    /** A call `sent` this long ago whose result never came was lost with its sender: failed CALL_INTERRUPTED. */
    sentStaleMs: number;
    /** Unfinished calls queued by one tenant's keys (absent: only the total bounds them). */
    maxQueuedPerTenant?: number | undefined;
  };

export interface QueuedCallsDeps {
  store: Store;
  bus: Pick<EventBus, 'publish'>;
  log: Logger;
  settings: QueuedCallsSettings;
  now?: () => number;
  /** The cluster's send claims (send-claims.ts): cancelling or expiring a call takes it; a forgotten call's claim goes with it. */
  claims?: Pick<SendClaims, 'forget' | 'claim'> | undefined;
  /** Counts what the byte bounds did: a call refused (queued_total, queued_tenant), a finished call forgotten (finished). */
  onBytesBound?: ((bound: BytesBound) => void) | undefined;
}

export interface NewCall {
  deviceId: string;
  tool: string;
  arguments: Record<string, unknown>;
  ttlMs?: number | undefined;
  jobId?: string | undefined;
  /** The tenant of the key that queues it: delivered only while the device is still that tenant's. */
  tenant?: string | undefined;
  /** The principal of the key that queues it: delivered only while that key is configured, with that tenant (key-grants.ts). */
  principal?: string | undefined;
}

/** A change of one call: `previous` is undefined for a new call. `local`: made by this instance. */
export type CallListener = (call: QueuedCall, previous: CallState | undefined, local: boolean) => void;

/**
 * Every queued call, held in memory (bounded: the unfinished ones by `maxQueuedTotal`, the finished ones by
 * `keepFinished`/`keepFinishedMs`) and written through to the store, so they outlive a restart. With a
 * shared store (the cluster's KV bucket) the other instances' writes are followed, so each instance knows
 * every call and delivers those of the devices connected to it.
 *
 * A change is applied in memory first (the state checks and the change in one synchronous step, so a
 * cancel and a delivery cannot both win), then written; its `call.state` event follows the write.
 */
export class QueuedCalls {
  private readonly calls = new Map<string, QueuedCall>();
  /** Per device: ids of its calls, every one retained, sorted (= creation order). */
  private readonly byDevice = new Map<string, string[]>();
  /** Per device: ids of its unfinished calls (queued or sent), sorted: the head is the next to deliver. */
  private readonly pending = new Map<string, string[]>();
  /** What the calls hold, in calls and bytes, in all and per tenant (call-tally.ts), and the 429s of their bounds. */
  private readonly tally: CallTally;
  private readonly listeners = new Set<CallListener>();
  private offStore: (() => void) | undefined;
  private readonly now: () => number;
  private readonly writer: StoreWriter;
  /** Finished calls the retention must keep whatever their age (a running job's: its counts read them). */
  private retains: (c: QueuedCall) => boolean = () => false;

  constructor(private readonly d: QueuedCallsDeps) {
    this.now = d.now ?? Date.now;
    this.writer = new StoreWriter(d.store, CALLS_COLLECTION);
    this.tally = new CallTally(d.settings, d.log, d.onBytesBound);
  }

  keepWhile(retains: (c: QueuedCall) => boolean): void {
    this.retains = retains;
  }

  /**
   * Read every call from the store. `interruptSent`: calls left `sent` are failed with CALL_INTERRUPTED
   * at once (the embedded store: this process was their only sender, and it is new). In a cluster, another
   * instance may still be waiting for their result: the sweep judges them by age instead.
   */
  async load(opts: { interruptSent: boolean }): Promise<void> {
    let skipped = 0;
    for (const { key, value } of await this.d.store.list(CALLS_COLLECTION)) {
      const parsed = QueuedCallSchema.safeParse(value);
      if (!parsed.success || parsed.data.id !== key) {
        skipped++;
        continue;
      }
      this.index(parsed.data);
    }
    if (skipped) this.d.log.warn({ skipped }, 'unreadable queued calls in the store were skipped');
    this.offStore = this.d.store.onChange?.(CALLS_COLLECTION, (c) => this.applyRemote(c.key, c.value));
    if (opts.interruptSent) {
      const sent = [...this.calls.values()].filter((c) => c.state === 'sent');
      for (const c of sent)
        await this.interrupt(c, 'the gateway restarted while the call was sent: the device may or may not have run it; it is not sent again');
      if (sent.length) this.d.log.warn({ calls: sent.length }, 'calls in flight at the last stop were marked failed (CALL_INTERRUPTED), not sent again');
    }
  }

  /** Stop following the store; resolves once every write made is stored. */
  async close(): Promise<void> {
    this.offStore?.();
    await this.writer.flushed();
  }

  onChange(fn: CallListener): () => void {
    this.listeners.add(fn);
    return () => this.listeners.delete(fn);
  }

  get(id: string): QueuedCall | undefined {
    return this.calls.get(id);
  }

  /** Every call held (unfinished, and finished within retention). */
  all(): IterableIterator<QueuedCall> {
    return this.calls.values();
  }

  /** Unfinished calls in total (what `maxQueuedTotal` bounds). */
  get unfinishedCount(): number {
    return this.tally.unfinished;
  }

  /** Room for `n` more unfinished calls in total, holding `bytes` of arguments, or the 429 that says why not. */
  checkRoom(n: number, bytes = 0): void {
    this.tally.checkTotal(n, bytes);
  }

  /** Bytes of arguments the unfinished calls hold, and of arguments and results the finished ones kept hold. */
  get bytesHeld(): { unfinished: number; finished: number } {
    return this.tally.held;
  }

  /** The first unfinished call of the device (the next to deliver, or the one being delivered). */
  head(deviceId: string): QueuedCall | undefined {
    const id = this.pending.get(deviceId)?.[0];
    return id === undefined ? undefined : this.calls.get(id);
  }

  /** Devices with unfinished calls. */
  devicesWithPending(): string[] {
    return [...this.pending.keys()];
  }

  /**
   * One page of a device's calls, oldest first, after the call id `after`; with `tenant`, only the calls that tenant's
   * keys queued. `next` only when a call that matches follows: a page says nothing of the calls the filters leave out
   * (another tenant's, before the device moved).
   */
  forDevice(
    deviceId: string,
    o: { state?: CallState | undefined; limit: number; after?: string | undefined; tenant?: string | undefined },
  ): { calls: QueuedCall[]; next: string | undefined } {
    const ids = this.byDevice.get(deviceId) ?? [];
    const out: QueuedCall[] = [];
    const wanted = (c: QueuedCall | undefined): c is QueuedCall =>
      c !== undefined && (o.state === undefined || c.state === o.state) && (o.tenant === undefined || c.tenant === o.tenant);
    let i = o.after === undefined ? 0 : upperBound(ids, o.after);
    for (; i < ids.length && out.length < o.limit; i++) {
      const c = this.calls.get(ids[i]!);
      if (wanted(c)) out.push(c);
    }
    let more = false;
    for (; i < ids.length && out.length === o.limit && !more; i++) more = wanted(this.calls.get(ids[i]!));
    return { calls: out, next: more ? out[out.length - 1]!.id : undefined };
  }

  /** Queue a call (202 at once; delivery follows). 429 QUEUE_FULL past the per-device or total bound. */
  async enqueue(n: NewCall): Promise<QueuedCall> {
    const c = this.prepare(n);
    const size = CallTally.sizeOf(c);
    this.checkRoom(1, size);
    if (n.tenant !== undefined) this.tally.checkTenant(n.tenant, size);
    this.index(c);
    try {
      await this.writer.put(c.id, c);
    } catch (e) {
      this.unindex(c);
      throw e;
    }
    this.announce(c, undefined);
    return c;
  }

  /** Validate and bound a new call, without queueing it. */
  prepare(n: NewCall): QueuedCall {
    const full = this.queueFull(n.deviceId);
    if (full) throw full;
    return this.draft(n);
  }

  /** The 429 a new call for this device gets, when its queue is full. */
  queueFull(deviceId: string): GatewayError | undefined {
    const waiting = this.pending.get(deviceId)?.length ?? 0;
    const max = this.d.settings.maxQueuedPerDevice;
    if (waiting < max) return undefined;
    return new GatewayError('QUEUE_FULL', `device ${deviceId} has ${waiting} queued calls (at most ${max}); wait for some to finish or cancel some`, {
      retryAfterSeconds: 10,
    });
  }

  /** A new call's document, its arguments bounded (PAYLOAD_TOO_LARGE); the queue's bounds are not checked here. */
  draft(n: NewCall): QueuedCall {
    const s = this.d.settings;
    this.checkArguments(n.arguments);
    const now = this.now();
    const at = new Date(now).toISOString();
    const ttl = Math.min(n.ttlMs ?? s.defaultTtlMs, s.maxTtlMs);
    return {
      id: newId('call', now),
      deviceId: n.deviceId,
      tool: n.tool,
      arguments: n.arguments,
      state: 'queued',
      createdAt: at,
      updatedAt: at,
      expiresAt: new Date(now + ttl).toISOString(),
      ...(n.jobId !== undefined ? { jobId: n.jobId } : {}),
      ...ownerFields(n),
    };
  }

  /** The arguments' JSON bytes, or PAYLOAD_TOO_LARGE past maxArgumentsBytes (a job's too, even one that selects no device). */
  checkArguments(args: Record<string, unknown>): number {
    const bytes = Buffer.byteLength(JSON.stringify(args));
    const max = this.d.settings.maxArgumentsBytes;
    if (bytes > max) throw new GatewayError('PAYLOAD_TOO_LARGE', `arguments are ${bytes} bytes of JSON; a queued call takes at most ${max}`);
    return bytes;
  }

  /** Queue calls already drafted (a job's), written as one batch; bounds were checked by the caller. */
  async enqueueMany(calls: QueuedCall[]): Promise<void> {
    for (const c of calls) this.index(c);
    try {
      await Promise.all(calls.map((c) => this.writer.put(c.id, c)));
    } catch (e) {
      for (const c of calls) this.unindex(c);
      throw e;
    }
    for (const c of calls) this.announce(c, undefined);
  }

  /**
   * Move a call to its next state (false when it is not in a state that allows it: someone else got there
   * first). The result is kept only up to `maxResultBytes`.
   */
  async transition(id: string, to: CallState, patch: { result?: CallResult; error?: CallError } = {}, claimed = false): Promise<boolean> {
    const c = this.calls.get(id);
    if (!c || !NEXT_CALL_STATE[c.state].includes(to)) return false;
    // Unsent → cancelled/expired takes the call's send claim, so another instance cannot be sending it meanwhile.
    if (this.d.claims && !claimed && c.state === 'queued' && (to === 'cancelled' || to === 'expired')) {
      if ((await this.d.claims.claim(id)) !== 'won' || this.calls.get(id)?.state !== 'queued') return false;
      return this.transition(id, to, patch, true);
    }
    const previous = c.state;
    const next: QueuedCall = { ...c, state: to, updatedAt: new Date(this.now()).toISOString() };
    if (to === 'sent') next.sentAt = next.updatedAt;
    if (to === 'queued') delete next.sentAt;
    if (patch.result) next.result = this.bounded(patch.result);
    if (patch.error) next.error = { code: patch.error.code.slice(0, 64), message: patch.error.message.slice(0, 4096) };
    this.replace(next);
    await this.write(next);
    this.announce(next, previous);
    return true;
  }

  /** DELETE /v1/calls/{id}: a queued call is cancelled; a sent or finished one cannot be (409). */
  async cancel(id: string): Promise<QueuedCall> {
    const c = this.calls.get(id);
    if (!c) throw new GatewayError('NOT_FOUND', `no queued call ${id.slice(0, 64)}`);
    if (c.state === 'sent')
      throw new GatewayError('CALL_FINISHED', `call ${id} was already sent to the device; it can no longer be cancelled`, { state: c.state });
    if (isFinished(c.state)) throw new GatewayError('CALL_FINISHED', `call ${id} is already ${c.state}`, { state: c.state });
    if (await this.transition(id, 'cancelled')) return this.calls.get(id)!;
    const now = this.calls.get(id);
    if (now?.state === 'cancelled') return now;
    throw new GatewayError('CALL_FINISHED', `call ${id} is being sent to the device by another instance; it can no longer be cancelled`, {
      state: now?.state ?? 'sent',
    });
  }

  /** Forget a device's calls (the device was deleted): the unfinished ones are cancelled first, so their waiters hear. */
  async forgetDevice(deviceId: string): Promise<void> {
    for (const id of [...(this.pending.get(deviceId) ?? [])]) await this.transition(id, 'cancelled');
    await this.writer.flushed();
    for (const id of [...(this.byDevice.get(deviceId) ?? [])]) {
      const c = this.calls.get(id);
      if (c && isFinished(c.state)) await this.forget(c);
    }
  }

  /**
   * Expire queued calls past their `expiresAt`, fail `sent` calls whose sender is gone (older than
   * `sentStaleMs`), and forget finished calls past the retention bounds (oldest first).
   */
  async sweep(): Promise<{ expired: number; interrupted: number; forgotten: number }> {
    const now = this.now();
    const s = this.d.settings;
    const expire: QueuedCall[] = [];
    const stale: QueuedCall[] = [];
    for (const c of this.calls.values()) {
      if (c.state === 'queued' && Date.parse(c.expiresAt) <= now) expire.push(c);
      else if (c.state === 'sent' && now - Date.parse(c.sentAt ?? c.updatedAt) > s.sentStaleMs) stale.push(c);
    }
    for (const c of expire)
      await this.transition(c.id, 'expired', { error: { code: 'CALL_EXPIRED', message: `the device was not ready before ${c.expiresAt}` } });
    for (const c of stale) await this.interrupt(c, 'no result came back in time and the instance that sent it is gone: the device may or may not have run it');
    const finished = [...this.calls.values()].filter((c) => isFinished(c.state) && !this.retains(c));
    // A finished call's last write must land before its delete.
    await this.writer.flushed();
    finished.sort((a, b) => (a.updatedAt < b.updatedAt ? -1 : a.updatedAt > b.updatedAt ? 1 : 0));
    const cutoff = new Date(now - s.keepFinishedMs).toISOString();
    const over = Math.max(0, finished.length - s.keepFinished);
    let forgotten = 0;
    let byBytes = 0;
    for (let i = 0; i < finished.length; i++) {
      const c = finished[i]!;
      if (i >= over && c.updatedAt >= cutoff) {
        // Past keepFinishedBytes too (a running job's calls are not in `finished`: theirs count until the job ends).
        if (!this.tally.finishedOver) break;
        byBytes++;
      }
      await this.forget(c);
      forgotten++;
    }
    this.tally.forgotFinished(byBytes);
    return { expired: expire.length, interrupted: stale.length, forgotten };
  }

  private async interrupt(c: QueuedCall, message: string): Promise<void> {
    await this.transition(c.id, 'failed', { error: { code: CALL_INTERRUPTED, message } });
  }

  private async forget(c: QueuedCall): Promise<void> {
    this.unindex(c);
    await this.d.claims?.forget(c.id);
    await this.d.store
      .delete(CALLS_COLLECTION, c.id)
      .catch((err: unknown) => this.d.log.warn({ err, callId: c.id }, 'could not delete a finished call from the store'));
  }

  private bounded(r: CallResult): CallResult {
    const bytes = Buffer.byteLength(JSON.stringify(r));
    if (bytes <= this.d.settings.maxResultBytes) return r;
    const note = `the result was ${bytes} bytes; queued calls keep results of at most ${this.d.settings.maxResultBytes}`;
    return { content: [{ type: 'text', text: note }], isError: r.isError, durationMs: r.durationMs };
  }

  private async write(c: QueuedCall): Promise<void> {
    try {
      await this.writer.put(c.id, c);
    } catch (err) {
      // Memory stays the truth for this process; the store catches up with the call's next change.
      this.d.log.error({ err, callId: c.id, state: c.state }, 'could not write a queued call to the store');
    }
  }

  /** A change another instance wrote to the shared store. */
  private applyRemote(key: string, value: unknown): void {
    const old = this.calls.get(key);
    if (value === undefined) {
      if (old) this.unindex(old);
      return;
    }
    const parsed = QueuedCallSchema.safeParse(value);
    if (!parsed.success || parsed.data.id !== key) return;
    const c = parsed.data;
    // Writes of a call can arrive out of order (a late echo of this instance's own): never undo a later state.
    if (old && isStale(c, old)) return;
    if (old) this.replace(c);
    else this.index(c);
    this.notify(c, old?.state, false);
  }

  /**
   * Listeners first (a job's counts follow), then the event: who reads the job on hearing the event sees the change.
   * The event is the call's tenant's (none: an operator's, a job's), not its device's: a call of a device's former
   * tenant that expires or is cancelled after the device moved tells the new tenant nothing.
   */
  private announce(c: QueuedCall, previous: CallState | undefined): void {
    this.notify(c, previous, true);
    const data = { callId: c.id, state: c.state, ...(c.jobId !== undefined ? { jobId: c.jobId } : {}) };
    this.d.bus.publish('call.state', c.deviceId, data, { tenant: c.tenant ?? null });
  }

  private notify(c: QueuedCall, previous: CallState | undefined, local: boolean): void {
    for (const fn of this.listeners) {
      try {
        fn(c, previous, local);
      } catch (err) {
        this.d.log.error({ err }, 'queued-call listener failed');
      }
    }
  }

  private index(c: QueuedCall): void {
    const old = this.calls.get(c.id);
    if (old) return this.replace(c);
    this.calls.set(c.id, c);
    this.tally.add(c);
    insertSorted(this.byDevice, c.deviceId, c.id);
    if (!isFinished(c.state)) insertSorted(this.pending, c.deviceId, c.id);
  }

  private replace(c: QueuedCall): void {
    const old = this.calls.get(c.id);
    if (!old) return this.index(c);
    this.calls.set(c.id, c);
    this.tally.replace(old, c);
    if (!isFinished(old.state) && isFinished(c.state)) removeSorted(this.pending, c.deviceId, c.id);
  }

  private unindex(c: QueuedCall): void {
    const old = this.calls.get(c.id);
    if (!old) return;
    this.calls.delete(c.id);
    this.tally.remove(old);
    removeSorted(this.byDevice, old.deviceId, old.id);
    if (!isFinished(old.state)) removeSorted(this.pending, old.deviceId, old.id);
  }
}
