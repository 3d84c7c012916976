import { CallToolResultSchema } from '@voxgate/protocol';
import type { NatsConnection } from '@nats-io/transport-node';
import { clampTimeout } from '../devices/call-queue.js';
import type { CatalogTool } from '../devices/catalog.js';
import type { CallOutcome, DeviceHandle } from '../devices/device-handle.js';
import type { DevicePresence, RemoteDevices } from '../devices/directory.js';
import type { SessionState } from '../devices/settings.js';
import { GatewayError } from '../errors.js';
import type { Forwarder } from './forwarder.js';
import type { ClusterPresence, SeenPresence } from './presence.js';
import { callSubject } from './wire.js';

export interface RemoteDevicesDeps {
  nc: NatsConnection;
  presence: ClusterPresence;
  forwarder: Forwarder;
  calls: { defaultTimeoutMs: number; maxTimeoutMs: number };
  /** Called when presence says another instance's devices changed. */
  changeListeners: Set<() => void>;
}

/** The devices other live instances hold, as handles whose calls go through the forwarder. */
export function remoteDevices(d: RemoteDevicesDeps): RemoteDevices {
  const { presence } = d;
  /** A device online on another live instance. */
  const remote = (deviceId: string): SeenPresence | undefined => {
    const p = presence.remote(deviceId);
    return p && p.entry.state !== 'offline' && presence.alive(p.entry.instance) ? p : undefined;
  };
  return {
    find: (deviceId) => {
      const p = remote(deviceId);
      return p && remoteHandle(d, deviceId, p);
    },
    knows: (deviceId) => presence.remote(deviceId) !== undefined,
    ready: () => presence.readyRemote(),
    ids: () => presence.ids(),
    summary: (deviceId) => {
      const p = presence.remote(deviceId);
      return p && summarize(deviceId, p, remote(deviceId) !== undefined);
    },
    onChange: (fn) => {
      d.changeListeners.add(fn);
      return () => d.changeListeners.delete(fn);
    },
  };
}

function remoteHandle(d: RemoteDevicesDeps, deviceId: string, p: SeenPresence): DeviceHandle {
  const owner = p.entry.instance;
  const catalog = p.entry.state === 'ready' ? d.presence.catalog(p.entry.catalogHash) : undefined;
  const state: SessionState = catalog ? 'ready' : 'initializing';
  const clamp = (t: number | undefined) => clampTimeout(t, d.calls);
  const timeout = (opts: { timeoutMs?: number }) => (opts.timeoutMs === undefined ? {} : { timeoutMs: opts.timeoutMs });
  return {
    deviceId,
    state,
    catalog,
    setup: undefined,
    findTool: (name: string): CatalogTool | undefined => catalog?.get(name),
    call: async (name: string, args: Record<string, unknown>, opts: { timeoutMs?: number } = {}) => {
      const result = await d.forwarder.forward(owner, { op: 'call', deviceId, name, args, ...timeout(opts) }, clamp(opts.timeoutMs));
      const parsed = CallToolResultSchema.safeParse(result);
      if (!parsed.success) throw new GatewayError('DEVICE_ERROR', `the instance holding device ${deviceId} sent a malformed tools/call result`);
      const { durationMs } = result as { durationMs?: unknown };
      return { ...parsed.data, durationMs: typeof durationMs === 'number' ? durationMs : 0 } as CallOutcome;
    },
    rpc: (method: string, params: Record<string, unknown> | undefined, opts: { timeoutMs?: number } = {}) =>
      d.forwarder.forward(owner, { op: 'rpc', deviceId, name: method, ...(params ? { args: params } : {}), ...timeout(opts) }, clamp(opts.timeoutMs)),
    notify: (method: string, params: Record<string, unknown> | undefined) => {
      try {
        d.nc.publish(callSubject(owner), JSON.stringify({ op: 'notify', deviceId, name: method, ...(params ? { args: params } : {}) }));
      } catch {
        throw new GatewayError('DEVICE_OFFLINE', `device ${deviceId} could not be reached through gateway instance ${owner}`);
      }
    },
  };
}

function summarize(deviceId: string, p: SeenPresence, online: boolean): DevicePresence {
  const e = p.entry;
  return {
    id: deviceId,
    clientId: e.clientId,
    transport: e.transport,
    online,
    state: online ? (e.state === 'ready' ? 'ready' : 'initializing') : 'offline',
    connectedAt: e.connectedAt,
    lastSeenAt: e.connectedAt,
    server: e.server ?? null,
    protocolVersion: null,
    toolCount: e.toolCount,
    toolsHash: e.catalogHash ?? null,
    pendingCalls: 0,
  };
}
