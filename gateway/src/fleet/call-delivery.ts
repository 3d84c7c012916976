import type { Logger } from 'pino';
import { GatewayError } from '../errors.js';
import type { EventBus } from '../events/bus.js';
import type { CallPort } from './ports.js';
import { CALL_INTERRUPTED, type QueuedCalls } from './queued-calls.js';
import { KEY_REVOKED, type KeyGrants } from './key-grants.js';
import type { SendClaims } from './send-claims.js';
import type { CallError, CallResult, QueuedCall } from './types.js';

/** Whether a job's call may go out now (rollout: concurrency, rate); when it refuses, it kicks the device later. */
export interface DeliveryGate {
  admit(call: QueuedCall): boolean;
  /** An admitted call did not go out after all (cancelled meanwhile): its place is given back. */
  unadmit(call: QueuedCall): void;
}

/** Errors that mean the call never reached the device: it goes back to `queued` and is tried again later. */
const NOT_SENT = new Set(['DEVICE_BUSY', 'DEVICE_NOT_READY']);
const INTERRUPTED = 'its send was claimed by an instance that stopped before saying so: the device may or may not have run it';
/** How soon a call put back (the device's own queue was full) is tried again. */
const RETRY_MS = 1_000;

export interface CallDeliveryDeps {
  calls: QueuedCalls;
  port: CallPort;
  bus: Pick<EventBus, 'subscribe'>;
  log: Logger;
  gate?: DeliveryGate | undefined;
  /** With a shared store: who may send each call (send-claims.ts); without, this process is the only sender. */
  claims?: SendClaims | undefined;
  /** The API keys configured now: a call whose key is gone is not sent (key-grants.ts). */
  grants?: KeyGrants | undefined;
}

/**
 * Sends each device's queued calls, one at a time and in order, when the device is connected here and
 * ready: at once when a call is queued for a ready device, and on every `device.ready`. A device
 * connected to another instance is delivered to by that instance (which hears of the call through the
 * shared store).
 */
export class CallDelivery {
  private readonly draining = new Map<string, Promise<void>>();
  private readonly retries = new Map<string, NodeJS.Timeout>();
  /** Devices kicked while their delivery was running: it looks once more before it ends. */
  private readonly again = new Set<string>();
  private offBus: (() => boolean) | undefined;
  private offCalls: (() => void) | undefined;
  private closed = false;

  constructor(private readonly d: CallDeliveryDeps) {}

  start(): void {
    this.offBus = this.d.bus.subscribe((e) => {
      if (e.type === 'device.ready') this.kick(e.deviceId);
    });
    // A call newly queued (or put back), or one cancelled or expired before it went out (the head moved on).
    this.offCalls = this.d.calls.onChange((c, previous) => {
      if (c.state !== previous && (c.state === 'queued' || previous === 'queued')) this.kick(c.deviceId);
    });
    for (const id of this.d.calls.devicesWithPending()) this.kick(id);
  }

  /** Deliver the device's queued calls now, if it is ready here and not being delivered to already. */
  kick(deviceId: string): void {
    if (this.closed) return;
    if (this.draining.has(deviceId)) {
      this.again.add(deviceId);
      return;
    }
    if (!this.d.port.readyHere(deviceId) || !this.d.calls.head(deviceId)) return;
    const run = this.drain(deviceId)
      .catch((err: unknown) => this.d.log.error({ err, deviceId }, 'queued-call delivery failed'))
      .finally(() => {
        this.draining.delete(deviceId);
        if (this.again.delete(deviceId)) this.kick(deviceId);
      });
    this.draining.set(deviceId, run);
  }

  /** Stop delivering; resolves once the calls in flight have their outcome written. */
  async close(): Promise<void> {
    this.closed = true;
    this.offBus?.();
    this.offCalls?.();
    for (const t of this.retries.values()) clearTimeout(t);
    await Promise.allSettled([...this.draining.values()]);
  }

  private async drain(deviceId: string): Promise<void> {
    for (;;) {
      if (this.closed) return;
      const handle = this.d.port.readyHere(deviceId);
      const c = this.d.calls.head(deviceId);
      // Sent: being delivered (here, or by an instance that held the device before), or lost with its sender.
      if (!handle || !c || c.state !== 'queued') return;
      if (Date.parse(c.expiresAt) <= Date.now()) {
        const outcome = await this.settleUnsent(c, 'expired', { code: 'CALL_EXPIRED', message: `the device was not ready before ${c.expiresAt}` });
        if (outcome === 'later') return this.retryLater(deviceId);
        continue;
      }
      const revoked = this.d.grants?.revoked(c);
      if (revoked !== undefined) {
        // Queued by a key the operator has since removed (or moved to another tenant): settled unsent, like a cancel.
        const outcome = await this.settleUnsent(c, 'cancelled', { code: KEY_REVOKED, message: revoked });
        if (outcome === 'later') return this.retryLater(deviceId);
        if (outcome === 'settled') this.d.grants!.note('call', c, { deviceId, callId: c.id, tool: c.tool });
        continue;
      }
      if (c.tenant !== undefined && this.d.port.tenantOf && this.d.port.tenantOf(deviceId) !== c.tenant) {
        // Queued by a tenant's key for its device, which has since moved to another tenant (or none): the caller no
        // longer has rights on it, and could no longer see or cancel the call.
        this.d.log.warn({ deviceId, callId: c.id, tool: c.tool }, 'queued call not sent: the device left the tenant whose key queued it');
        const message = 'the device no longer belongs to the tenant whose key queued this call; it was not sent';
        await this.d.calls.transition(c.id, 'failed', { error: { code: 'DEVICE_MOVED', message } });
        continue;
      }
      if (c.jobId !== undefined && this.d.gate && !this.d.gate.admit(c)) return;
      const claim = this.d.claims ? await this.d.claims.claim(c.id) : 'won';
      if (claim !== 'won') {
        if (c.jobId !== undefined) this.d.gate?.unadmit(c);
        if (claim === 'lost') return this.retryLater(deviceId);
        await this.d.calls.transition(c.id, 'failed', { error: { code: CALL_INTERRUPTED, message: INTERRUPTED } });
        continue;
      }
      if (!(await this.d.calls.transition(c.id, 'sent'))) {
        if (c.jobId !== undefined) this.d.gate?.unadmit(c);
        await this.d.claims?.release(c.id);
        continue;
      }
      if (this.closed) {
        // Stopped while the `sent` write was on its way: the call never left, it waits for the next start.
        await this.putBack(c);
        return;
      }
      const outcome = await send(handle, c);
      if ('putBack' in outcome) {
        await this.putBack(c);
        this.retryLater(deviceId);
        return;
      }
      await this.d.calls.transition(c.id, outcome.state, outcome.patch);
    }
  }

  /**
   * A queued call settled without being sent (expired, or its key revoked), under its send claim. `later`: another
   * instance holds the claim (it is sending the call): the device is looked at again later, not in a loop of claim
   * requests. A claim whose holder stopped before saying what became of the call fails it CALL_INTERRUPTED, as a
   * send would: the call may have run, and without this it stayed at the head of its device's queue for good.
   * `other`: the call had moved on meanwhile.
   */
  private async settleUnsent(c: QueuedCall, to: 'expired' | 'cancelled', error: CallError): Promise<'settled' | 'later' | 'other'> {
    const claim = this.d.claims ? await this.d.claims.claim(c.id) : 'won';
    if (claim === 'lost') return this.d.calls.get(c.id)?.state === 'queued' ? 'later' : 'other';
    if (claim === 'stale') {
      await this.d.calls.transition(c.id, 'failed', { error: { code: CALL_INTERRUPTED, message: INTERRUPTED } });
      return 'other';
    }
    return (await this.d.calls.transition(c.id, to, { error }, true)) ? 'settled' : 'other';
  }

  /** The call never reached the device: queued again, and its claim let go so whoever holds the device next may send it. */
  private async putBack(c: QueuedCall): Promise<void> {
    if (await this.d.calls.transition(c.id, 'queued')) await this.d.claims?.release(c.id);
  }

  private retryLater(deviceId: string): void {
    if (this.closed || this.retries.has(deviceId)) return;
    const t = setTimeout(() => {
      this.retries.delete(deviceId);
      this.kick(deviceId);
    }, RETRY_MS);
    t.unref();
    this.retries.set(deviceId, t);
  }
}

type Outcome = { putBack: true } | { state: 'succeeded' | 'failed'; patch: { result?: CallResult; error?: CallError } };

/**
 * One call, and what became of it. A result with `isError` is `failed` (the device refused), its result
 * kept. An error after the call may have reached the device (a timeout, the link dropped) is `failed` too:
 * a call is never sent twice.
 */
async function send(handle: NonNullable<ReturnType<CallPort['readyHere']>>, c: QueuedCall): Promise<Outcome> {
  try {
    const out = await handle.call(c.tool, c.arguments);
    const result: CallResult = { content: out.content as CallResult['content'], isError: out.isError ?? false, durationMs: out.durationMs };
    if (out.structuredContent !== undefined) result.structuredContent = out.structuredContent;
    if (!result.isError) return { state: 'succeeded', patch: { result } };
    return { state: 'failed', patch: { result, error: { code: 'TOOL_ERROR', message: firstText(result) ?? 'the tool reported an error' } } };
  } catch (e) {
    if (e instanceof GatewayError) {
      if (NOT_SENT.has(e.code)) return { putBack: true };
      return { state: 'failed', patch: { error: { code: e.code, message: e.message } } };
    }
    return { state: 'failed', patch: { error: { code: 'INTERNAL', message: e instanceof Error ? e.message : String(e) } } };
  }
}

function firstText(r: CallResult): string | undefined {
  const t = r.content.find((x) => x['type'] === 'text')?.['text'];
  return typeof t === 'string' ? t.slice(0, 1024) : undefined;
}
