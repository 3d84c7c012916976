import { RequestError, TimeoutError, type NatsConnection } from '@nats-io/transport-node';
import { GatewayError } from '../errors.js';
import type { ClusterMetrics } from './metrics.js';
import { parseMessage } from './wire-message.js';
import { callSubject, ForwardedReply, type ForwardedCall } from './wire.js';

/** Beyond the call's own timeout, how long the forwarding side waits for the owner's DEVICE_TIMEOUT answer. */
const FORWARD_MARGIN_MS = 2_000;
/**
 * While calls wait on an instance, how often NATS is asked whether it still listens on its subject: a killed
 * process loses its subscription at once (its socket closes), long before 3 missed heartbeats.
 */
const PROBE_MS = 500;
export const PING = JSON.stringify({ op: 'ping' });

export interface ForwarderDeps {
  nc: NatsConnection;
  metrics: ClusterMetrics;
  maxMessageBytes: number;
  /** Presence is told at once when NATS says nobody listens for an instance any more. */
  dead(owner: string): void;
}

/**
 * Calls for devices another instance holds: sent over NATS request/reply, and failed at once (DEVICE_OFFLINE)
 * when the owner is found gone, or this instance loses NATS, rather than when the call's timeout runs out.
 */
export class Forwarder {
  /** False while the NATS connection is down: a request cannot reach anyone, an answer cannot come back. */
  private connected = true;
  /** Forwarded calls waiting for an instance's answer, so they fail at once when it is found gone. */
  private readonly waiting = new Map<string, Set<(e: GatewayError) => void>>();
  private readonly probes = new Map<string, NodeJS.Timeout>();

  constructor(private readonly d: ForwarderDeps) {}

  /** Every call waiting on `owner` fails now with DEVICE_OFFLINE: the answer can no longer come. */
  lost(owner: string, why: string): void {
    const set = this.waiting.get(owner);
    this.waiting.delete(owner);
    for (const fail of set ?? []) fail(new GatewayError('DEVICE_OFFLINE', why));
  }

  disconnected(): void {
    this.connected = false;
    for (const owner of [...this.waiting.keys()])
      this.lost(owner, `the gateway instance holding the device (${owner}) cannot be reached: this instance lost its NATS connection`);
  }

  reconnected(): void {
    this.connected = true;
  }

  async forward(owner: string, call: Exclude<ForwardedCall, { op: 'ping' }>, timeoutMs: number): Promise<unknown> {
    const { metrics } = this.d;
    if (!this.connected) {
      metrics.forwarded.inc({ outcome: 'DEVICE_OFFLINE' });
      throw new GatewayError('DEVICE_OFFLINE', `device ${call.deviceId} cannot be reached: this gateway instance lost its NATS connection`);
    }
    let fail!: (e: GatewayError) => void;
    const gone = new Promise<never>((_, reject) => (fail = reject));
    let set = this.waiting.get(owner);
    if (!set) this.waiting.set(owner, (set = new Set()));
    set.add(fail);
    this.probe(owner);
    try {
      const msg = await Promise.race([this.d.nc.request(callSubject(owner), JSON.stringify(call), { timeout: timeoutMs + FORWARD_MARGIN_MS }), gone]);
      const reply = parseMessage(msg, ForwardedReply, this.d.maxMessageBytes);
      if (!reply) throw new GatewayError('DEVICE_ERROR', 'the instance holding the device sent a malformed answer');
      if (!reply.ok) throw new GatewayError(reply.code, reply.message, reply.extra);
      metrics.forwarded.inc({ outcome: 'ok' });
      return reply.result;
    } catch (e) {
      const err = forwardError(e, call.deviceId, owner);
      // Nobody subscribes to the owner's subject: it is gone (no need to wait for its missed heartbeats).
      if (e instanceof RequestError && e.isNoResponders()) this.d.dead(owner);
      metrics.forwarded.inc({ outcome: err.code });
      throw err;
    } finally {
      set.delete(fail);
      if (set.size === 0 && this.waiting.get(owner) === set) this.waiting.delete(owner);
    }
  }

  close(): void {
    for (const t of this.probes.values()) clearInterval(t);
    this.probes.clear();
  }

  /** While calls wait on `owner`: nobody left listening on its subject means it is gone (presence hears too). */
  private probe(owner: string): void {
    if (this.probes.has(owner)) return;
    const timer = setInterval(() => {
      if (!this.waiting.has(owner)) {
        clearInterval(timer);
        this.probes.delete(owner);
        return;
      }
      this.d.nc.request(callSubject(owner), PING, { timeout: PROBE_MS }).catch((e: unknown) => {
        if (!(e instanceof RequestError && e.isNoResponders())) return; // slow or busy: the call's own timeout decides
        this.lost(owner, `the gateway instance holding the device (${owner}) is gone`);
        this.d.dead(owner);
      });
    }, PROBE_MS);
    timer.unref();
    this.probes.set(owner, timer);
  }
}

/** NATS failures in the caller's terms: nobody listening for the owner means the device is offline. */
function forwardError(e: unknown, deviceId: string, owner: string): GatewayError {
  if (e instanceof GatewayError) return e;
  if (e instanceof RequestError && e.isNoResponders())
    return new GatewayError('DEVICE_OFFLINE', `device ${deviceId} is offline (its gateway instance ${owner} is gone)`);
  if (e instanceof TimeoutError || (e instanceof RequestError && e.cause instanceof TimeoutError))
    return new GatewayError('DEVICE_TIMEOUT', `device ${deviceId} did not answer in time (through gateway instance ${owner})`);
  return new GatewayError('DEVICE_OFFLINE', `device ${deviceId} could not be reached through gateway instance ${owner}`);
}
