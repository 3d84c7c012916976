import type { NatsConnection } from '@nats-io/transport-node';
import type { DeviceRegistry } from '../devices/registry.js';
import type { EventBus, GatewayEvent } from '../events/bus.js';
import type { ClusterMetrics } from './metrics.js';
import type { ClusterPresence } from './presence.js';
import { parseMessage } from './wire-message.js';
import { eventSubject, EVENTS_WILDCARD, RelayedEvent } from './wire.js';

export interface EventRelayDeps {
  nc: NatsConnection;
  instanceId: string;
  bus: EventBus;
  registry: DeviceRegistry;
  presence: ClusterPresence;
  metrics: ClusterMetrics;
  maxMessageBytes: number;
  refused(obj: Record<string, unknown>, msg: string): void;
}

/**
 * Events both ways between this instance's bus and NATS, and the presence of the devices this instance
 * holds (written as their events pass). Events relayed from NATS are not sent back.
 */
export function relayEvents(d: EventRelayDeps): { close(): void } {
  const { nc, instanceId, presence } = d;
  let relaying = false;
  const offBus = d.bus.subscribe((e) => {
    if (relaying) return;
    writePresence(d, e);
    // The tenant it was published under (null: none) goes with it: the other instances, and the stream (the cluster's
    // history), keep it, so a tenant reads only what happened under it (api/device-scope.ts eventVisibility).
    const body = JSON.stringify({ origin: instanceId, type: e.type, deviceId: e.deviceId, data: e.data, id: e.id, at: e.at, tenant: e.tenant ?? null });
    if (Buffer.byteLength(body) > d.maxMessageBytes) return void d.metrics.eventsRefused.inc();
    nc.publish(eventSubject(e.deviceId, e.type), body);
  });
  const eventsSub = nc.subscribe(EVENTS_WILDCARD, {
    callback: (err, msg) => {
      if (err) return;
      const e = parseMessage(msg, RelayedEvent, d.maxMessageBytes);
      if (!e) {
        d.metrics.eventsRefused.inc();
        return d.refused({ subject: msg.subject.slice(0, 200), bytes: msg.data.length }, 'malformed event from NATS refused (one line per minute)');
      }
      if (e.origin === instanceId || staleOffline(e.type, e.deviceId, e.origin)) return;
      relaying = true;
      try {
        // An instance from before the tenant was relayed sends none (undefined): the device's tenant here is taken.
        const origin = e.id !== undefined && e.at !== undefined ? { id: e.id, at: e.at } : {};
        d.bus.publish(e.type, e.deviceId, e.data, { ...origin, tenant: e.tenant });
      } finally {
        relaying = false;
      }
    },
  });

  /** The old instance's "offline" after a takeover: the device is online elsewhere (here, or at another instance). */
  function staleOffline(type: string, deviceId: string, origin: string): boolean {
    if (type !== 'device.offline') return false;
    if (d.registry.find(deviceId)) return true;
    const p = presence.remote(deviceId);
    return p !== undefined && p.entry.instance !== origin && p.entry.state !== 'offline';
  }

  return {
    close: () => {
      offBus();
      eventsSub.unsubscribe();
    },
  };
}

function writePresence(d: EventRelayDeps, e: GatewayEvent): void {
  if (e.type !== 'device.online' && e.type !== 'device.ready' && e.type !== 'device.offline' && e.type !== 'device.tools_changed') return;
  const summary = d.registry.get(e.deviceId);
  if (!summary) return;
  const s = d.registry.find(e.deviceId);
  const base = {
    instance: d.instanceId,
    transport: summary.transport,
    clientId: summary.clientId,
    connectedAt: summary.connectedAt,
    toolCount: summary.toolCount,
  };
  if (e.type === 'device.online') void d.presence.write(e.deviceId, { ...base, state: 'online' }, true);
  else if (e.type === 'device.offline')
    void d.presence.write(e.deviceId, { ...base, state: 'offline', ...(summary.toolsHash ? { catalogHash: summary.toolsHash } : {}) }, false);
  else if (s?.catalog)
    void d.presence.write(
      e.deviceId,
      { ...base, state: 'ready', catalogHash: s.catalog.hash, toolCount: s.catalog.size, ...(summary.server ? { server: summary.server } : {}) },
      false,
      s.catalog,
    );
}
