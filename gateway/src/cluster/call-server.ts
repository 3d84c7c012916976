import type { Msg, NatsConnection, Subscription } from '@nats-io/transport-node';
import type { Logger } from 'pino';
import type { DeviceRegistry } from '../devices/registry.js';
import { GatewayError } from '../errors.js';
import { PING } from './forwarder.js';
import type { ClusterMetrics } from './metrics.js';
import { messageText, parseMessage } from './wire-message.js';
import { callSubject, ForwardedCall, type ForwardedReply } from './wire.js';

export interface CallServerDeps {
  nc: NatsConnection;
  instanceId: string;
  registry: DeviceRegistry;
  metrics: ClusterMetrics;
  maxMessageBytes: number;
  log: Logger;
  /** Junk from whatever can publish on the NATS account: throttled by the caller. */
  refused(obj: Record<string, unknown>, msg: string): void;
}

/** Calls other instances forward here: only a live local session answers (never forwarded again). */
export function serveForwardedCalls(d: CallServerDeps): Subscription {
  return d.nc.subscribe(callSubject(d.instanceId), {
    callback: (err, msg) => {
      if (err) return;
      // Another instance checking this one is alive (see Forwarder.probe): answered, not counted as a call.
      if (msg.data.length === PING.length && messageText(msg) === PING) return void respond(d, msg, JSON.stringify({ ok: true, result: null }));
      void serve(d, msg).then((reply) => {
        d.metrics.served.inc({ outcome: reply.ok ? 'ok' : reply.code });
        let body = JSON.stringify(reply);
        if (Buffer.byteLength(body) > d.maxMessageBytes)
          body = JSON.stringify({ ok: false, code: 'DEVICE_ERROR', message: 'the result is too large to forward between instances', extra: {} });
        respond(d, msg, body);
      });
    },
  });
}

function respond(d: CallServerDeps, msg: Msg, body: string): void {
  try {
    msg.respond(body);
  } catch (err) {
    d.log.warn({ err }, 'could not answer a forwarded call (NATS connection closing)');
  }
}

async function serve(d: CallServerDeps, msg: Msg): Promise<ForwardedReply> {
  try {
    const c = parseMessage(msg, ForwardedCall, d.maxMessageBytes);
    if (!c) {
      d.refused({ subject: msg.subject, bytes: msg.data.length }, 'malformed forwarded call refused (one line per minute)');
      throw new GatewayError('INVALID_REQUEST', 'malformed forwarded call');
    }
    if (c.op === 'ping') return { ok: true, result: null };
    const s = d.registry.find(c.deviceId);
    // Presence said this instance holds it, but it does not (any more): offline, as seen from the caller.
    if (!s) throw new GatewayError('DEVICE_OFFLINE', `device ${c.deviceId} is offline (no longer connected to gateway instance ${d.instanceId})`);
    if (c.op === 'call') return { ok: true, result: await s.call(c.name, c.args, c.timeoutMs === undefined ? {} : { timeoutMs: c.timeoutMs }) };
    if (c.op === 'rpc') return { ok: true, result: await s.rpc(c.name, c.args, c.timeoutMs === undefined ? {} : { timeoutMs: c.timeoutMs }) };
    s.notify(c.name, c.args);
    return { ok: true, result: null };
  } catch (e) {
    if (e instanceof GatewayError) return { ok: false, code: e.code, message: e.message, extra: e.extra };
    d.log.error({ err: e }, 'forwarded call failed');
    return { ok: false, code: 'INTERNAL', message: 'internal error on the instance holding the device', extra: {} };
  }
}
