import { describe, expect, it } from 'vitest';
import { FleetDirectory, type DeviceSummary, type LocalDevices, type RemoteDevices } from '../../src/devices/directory.js';
import type { DeviceHandle } from '../../src/devices/device-handle.js';
import { lowerBound, upperBound } from '../../src/devices/sorted-ids.js';
import { GatewayError } from '../../src/errors.js';

const summary = (id: string, online: boolean, transport: 'websocket' | 'mqtt' = 'websocket'): DeviceSummary => ({
  id,
  clientId: `c-${id}`,
  transport,
  online,
  state: online ? 'ready' : 'offline',
  connectedAt: '2026-01-01T00:00:00.000Z',
  lastSeenAt: '2026-01-01T00:00:00.000Z',
  server: null,
  protocolVersion: null,
  toolCount: 0,
  toolsHash: null,
  pendingCalls: 0,
  // What a device record adds (devices/records.ts): none here.
  ...{ name: null, room: null, tags: [], tenant: null, board: null, firmware: null, firstSeenAt: '2026-01-01T00:00:00.000Z' },
});
const handle = (deviceId: string): DeviceHandle => ({
  deviceId,
  state: 'ready',
  findTool: () => undefined,
  call: () => Promise.reject(new Error('not in this test')),
  rpc: () => Promise.reject(new Error('not in this test')),
  notify: () => undefined,
});

/** A registry stand-in: `online` devices are live here, `known` ones were seen. */
function local(known: DeviceSummary[]): LocalDevices {
  const byId = new Map(known.map((s) => [s.id, s]));
  const ids = [...byId.keys()].sort();
  return {
    find: (id) => (byId.get(id)?.online ? handle(id) : undefined),
    device: (id) => {
      const s = byId.get(id);
      if (!s) throw new GatewayError('DEVICE_NOT_FOUND', `no device ${id} has ever connected`);
      if (!s.online) throw new GatewayError('DEVICE_OFFLINE', `device ${id} is offline`);
      return handle(id);
    },
    get: (id) => byId.get(id),
    page: (_f, opts) => {
      const after = ids.filter((id) => opts.after === undefined || id > opts.after);
      return { devices: after.slice(0, opts.limit).map((id) => byId.get(id)!), next: undefined };
    },
    ready: () => ids.filter((id) => byId.get(id)!.online).map((deviceId) => ({ deviceId })),
    ids: () => ids,
    onChange: () => () => undefined,
  };
}

function remote(known: DeviceSummary[]): RemoteDevices & { change(): void } {
  const byId = new Map(known.map((s) => [s.id, s]));
  const listeners = new Set<() => void>();
  return {
    find: (id) => (byId.get(id)?.online ? handle(id) : undefined),
    knows: (id) => byId.has(id),
    summary: (id) => byId.get(id),
    ready: () => [...byId.values()].filter((s) => s.online).map((s) => ({ deviceId: s.id })),
    ids: () => [...byId.keys()].sort(),
    onChange: (fn) => (listeners.add(fn), () => listeners.delete(fn)),
    change: () => listeners.forEach((fn) => fn()),
  };
}

describe('FleetDirectory: the local registry and (cluster) the other instances', () => {
  it('without a remote part, is the local registry', () => {
    const dir = new FleetDirectory(local([summary('a', true), summary('b', false)]));
    expect(dir.find('a')?.deviceId).toBe('a');
    expect(dir.find('b')).toBeUndefined();
    expect(dir.find('zz')).toBeUndefined();
    expect(() => dir.device('b')).toThrow(/device b is offline/);
    expect(() => dir.device('zz')).toThrow(/no device zz has ever connected/);
  });

  it('finds a device held elsewhere; one the cluster knows offline is offline, not unknown', () => {
    const dir = new FleetDirectory(local([summary('a', true)]));
    dir.attach(remote([summary('r1', true), summary('r2', false)]));
    expect(dir.find('r1')?.deviceId).toBe('r1');
    expect(dir.find('r2')).toBeUndefined();
    expect(() => dir.device('r2')).toThrow(expect.objectContaining({ code: 'DEVICE_OFFLINE' }));
    expect(() => dir.device('zz')).toThrow(expect.objectContaining({ code: 'DEVICE_NOT_FOUND' }));
    expect(dir.ready().map((r) => r.deviceId)).toEqual(['a', 'r1']);
  });

  it('a device online here wins over what the cluster says of it', () => {
    const dir = new FleetDirectory(local([summary('a', true), summary('b', false)]));
    dir.attach(remote([summary('a', false), summary('b', true)]));
    expect(dir.get('a')?.online).toBe(true);
    expect(dir.get('b')?.online).toBe(true); // offline here, online on another instance
  });

  it('pages through the local and remote ids in order, filtered, without repeats', () => {
    const dir = new FleetDirectory(local([summary('a', true), summary('c', false), summary('e', true, 'mqtt')]));
    dir.attach(remote([summary('b', true), summary('c', false), summary('d', true, 'mqtt')]));
    const first = dir.page({}, { limit: 3 });
    expect(first.devices.map((d) => d.id)).toEqual(['a', 'b', 'c']);
    expect(first.next).toBe('c');
    expect(dir.page({}, { limit: 3, after: first.next }).devices.map((d) => d.id)).toEqual(['d', 'e']);
    expect(dir.page({ online: true, transport: 'mqtt' }, { limit: 10 }).devices.map((d) => d.id)).toEqual(['d', 'e']);
  });

  it('tells its listeners when the devices held elsewhere change', () => {
    const dir = new FleetDirectory(local([]));
    const r = remote([]);
    dir.attach(r);
    let changes = 0;
    const off = dir.onChange(() => changes++);
    r.change();
    off();
    r.change();
    expect(changes).toBe(1);
  });

  it('binary searches sorted ids', () => {
    const ids = ['a', 'c', 'c', 'e'];
    expect([lowerBound(ids, 'c'), upperBound(ids, 'c')]).toEqual([1, 3]);
    expect([lowerBound(ids, 'b'), upperBound(ids, 'b')]).toEqual([1, 1]);
    expect([lowerBound(ids, 'z'), upperBound(ids, '0')]).toEqual([4, 0]);
  });
});
