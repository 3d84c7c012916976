import type { Logger } from 'pino';
import type { EventBus } from '../events/bus.js';
import type { Store } from '../store/store.js';
import { CallDelivery } from './call-delivery.js';
import type { FleetConfig } from './config.js';
import { Jobs } from './jobs.js';
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
}

export interface Fleet {
  calls: QueuedCalls;
  jobs: Jobs;
  delivery: CallDelivery;
  /** Stop delivering; resolves once the calls in flight have their outcome written (call before the store closes). */
  close(): Promise<void>;
}

/** Queued calls, their delivery and fleet jobs, read back from the store and started. */
export async function startFleet(d: FleetDeps, config: FleetConfig): Promise<Fleet> {
  const log = d.log.child({ component: 'fleet' });
  const now = d.now ?? Date.now;
  const sentStaleMs = d.maxCallMs + 60_000;
  const claims = sendClaims(d.store, { shared: !d.soleSender, log, staleMs: sentStaleMs, now });
  const calls = new QueuedCalls({ store: d.store, bus: d.bus, log, settings: { ...config, sentStaleMs }, now, claims });
  const jobs = new Jobs({ store: d.store, bus: d.bus, log, calls, selector: d.selector, settings: config, now, shared: !d.soleSender });
  const delivery = new CallDelivery({ calls, port: d.port, bus: d.bus, log, gate: jobs, claims });
  calls.keepWhile((c) => jobs.retains(c));
  jobs.useDelivery((id) => delivery.kick(id));
  await calls.load({ interruptSent: d.soleSender });
  await jobs.load();
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
    close: async () => {
      clearInterval(sweep);
      await delivery.close();
      jobs.close();
      await calls.close();
    },
  };
}
