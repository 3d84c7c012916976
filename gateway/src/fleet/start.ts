import type { Logger } from 'pino';
import type { EventBus } from '../events/bus.js';
import type { Store } from '../store/store.js';
import { CallDelivery } from './call-delivery.js';
import type { FleetConfig } from './config.js';
import { Jobs } from './jobs.js';
import { KEY_REVOKED, type KeyGrants } from './key-grants.js';
import type { CallPort, DeviceSelector } from './ports.js';
import { QueuedCalls } from './queued-calls.js';
import { sendClaims } from './send-claims.js';

export interface FleetDeps {
  store: Store;
  bus: Pick<EventBus, 'publish' | 'subscribe'>;
  log: Logger;
  port: CallPort;
  selector: DeviceSelector;
  /**
   * This process is the only one that could have sent a call left `sent` (the embedded store): such calls
   * are failed with CALL_INTERRUPTED at start. With a shared store they are judged by age instead.
   */
  soleSender: boolean;
  /** The longest a device call may take (calls.maxTimeoutMs): a `sent` call older than this plus a minute lost its sender. */
  maxCallMs: number;
  now?: () => number;
  /** The API keys configured now (key-grants.ts): work of a key no longer configured is settled, never run. */
  grants?: KeyGrants | undefined;
  /** Counts what the queued calls' byte bounds did (queued-calls.ts). */
  onBytesBound?: ((bound: 'queued_total' | 'queued_tenant' | 'finished') => void) | undefined;
}

export interface Fleet {
  calls: QueuedCalls;
  jobs: Jobs;
  delivery: CallDelivery;
  grants: KeyGrants | undefined;
  /** Stop delivering; resolves once the calls in flight have their outcome written (call before the store closes). */
  close(): Promise<void>;
}

/** Queued calls, their delivery and fleet jobs, read back from the store and started. */
export async function startFleet(d: FleetDeps, config: FleetConfig): Promise<Fleet> {
  const log = d.log.child({ component: 'fleet' });
  const now = d.now ?? Date.now;
  const sentStaleMs = d.maxCallMs + 60_000;
  const claims = sendClaims(d.store, { shared: !d.soleSender, log, staleMs: sentStaleMs, now });
  const calls = new QueuedCalls({ store: d.store, bus: d.bus, log, settings: { ...config, sentStaleMs }, now, claims, onBytesBound: d.onBytesBound });
  const { grants } = d;
  const jobs = new Jobs({ store: d.store, bus: d.bus, log, calls, selector: d.selector, settings: config, now, shared: !d.soleSender, grants });
  const delivery = new CallDelivery({ calls, port: d.port, bus: d.bus, log, gate: jobs, claims, grants });
  calls.keepWhile((c) => jobs.retains(c));
  jobs.useDelivery((id) => delivery.kick(id));
  await calls.load({ interruptSent: d.soleSender });
  await jobs.load();
  if (grants) await settleRevokedCalls(calls, grants, log);
  delivery.start();
  let sweeping = false;
  const sweep = setInterval(() => {
    if (sweeping) return;
    sweeping = true;
    calls
      .sweep()
      .then((r) => {
        if (r.expired || r.interrupted || r.forgotten) log.debug(r, 'queued calls swept');
      })
      .catch((err: unknown) => log.error({ err }, 'queued-call sweep failed'))
      .finally(() => (sweeping = false));
  }, config.sweepIntervalMs);
  sweep.unref();
  return {
    calls,
    jobs,
    delivery,
    grants,
    close: async () => {
      clearInterval(sweep);
      await delivery.close();
      jobs.close();
      await calls.close();
    },
  };
}

/**
 * Calls still queued by a key that is no longer configured (or has another tenant now) are cancelled at start with
 * KEY_REVOKED, each with its `call.state` event: not left queued until their TTL for a device that may never come.
 * Delivery checks again before each send (a cluster peer may share a store with a different key list).
 */
async function settleRevokedCalls(calls: QueuedCalls, grants: KeyGrants, log: Logger): Promise<void> {
  let settled = 0;
  for (const c of [...calls.all()]) {
    const message = c.state === 'queued' ? grants.revoked(c) : undefined;
    if (message === undefined || !(await calls.transition(c.id, 'cancelled', { error: { code: KEY_REVOKED, message } }))) continue;
    grants.note('call', c, { deviceId: c.deviceId, callId: c.id, tool: c.tool });
    settled++;
  }
  if (settled) log.warn({ calls: settled, code: KEY_REVOKED }, 'queued calls of removed or re-tenanted API keys were cancelled at start, not sent');
}
