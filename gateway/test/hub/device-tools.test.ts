import { describe, expect, it } from 'vitest';
import { matchesFilter, type DeviceFilter, type DeviceSummary } from '../../src/devices/directory.js';
import { DeviceTools } from '../../src/hub/device-tools.js';
import { deviceLabel } from '../../src/hub/namespace.js';
import type { HubDevices } from '../../src/hub/types.js';

const device = (id: string, name: string | null, room: string | null, tags: string[] = []): DeviceSummary => ({
  ...{ id, clientId: id, transport: 'websocket', online: true, state: 'ready', connectedAt: '', lastSeenAt: '', server: null, protocolVersion: null },
  ...{ toolCount: 0, toolsHash: null, pendingCalls: 0, name, room, tags, tenant: null, board: null, firmware: null, firstSeenAt: '' },
});

describe('device tools name what people call a device (issue 23)', () => {
  const fleet = [device('02:00:00:00:23:71', 'Speaker', 'Living room', ['audio']), device('02:00:00:00:23:72', null, 'Kitchen')];
  const registry: HubDevices = {
    ready: () => [],
    onChange: () => () => undefined,
    page: (filter: DeviceFilter) => ({ devices: fleet.filter((d) => matchesFilter(d, filter)), next: undefined }),
    get: (id) => fleet.find((d) => d.id === id),
    device: () => {
      throw new Error('not in this test');
    },
    find: () => undefined,
  };
  // Tenant "acme" sees the kitchen device only; an operator (no tenant) sees both.
  const tools = new DeviceTools({
    registry,
    deviceCallTimeoutMs: 1000,
    devicesListMax: 10,
    sees: (caller, id) => caller.tenant === undefined || id.endsWith(':72'),
  });
  const operator = {};

  it('devices_list gives each device its name, room and tags, and filters by room', () => {
    const all = tools.list({}, operator).structuredContent as { devices: Array<Record<string, unknown>> };
    expect(all.devices.map((d) => [d['device_id'], d['name'], d['room'], d['tags']])).toEqual([
      ['02:00:00:00:23:71', 'Speaker', 'Living room', ['audio']],
      ['02:00:00:00:23:72', null, 'Kitchen', []],
    ]);
    const living = tools.list({ room: 'living ROOM' }, operator).structuredContent as { devices: Array<Record<string, unknown>> };
    expect(living.devices.map((d) => d['device_id'])).toEqual(['02:00:00:00:23:71']);
    const acme = tools.list({}, { tenant: 'acme' }).structuredContent as { devices: Array<Record<string, unknown>> };
    expect(acme.devices.map((d) => d['device_id'])).toEqual(['02:00:00:00:23:72']);
  });

  it("devices_list for a tenant reads its own devices (the tenancy's index), never the fleet's pages", () => {
    const asked: string[] = [];
    const own = new DeviceTools({
      registry: {
        ...registry,
        page: () => {
          throw new Error("a tenant's list walked the fleet");
        },
        get: (id) => (asked.push(id), registry.get(id)),
      },
      deviceCallTimeoutMs: 1000,
      devicesListMax: 10,
      sees: (caller, id) => caller.tenant === undefined || id.endsWith(':72'),
      devicesOf: (tenant) => (tenant === 'acme' ? ['02:00:00:00:23:72'] : []),
    });
    const acme = own.list({}, { tenant: 'acme' }).structuredContent as { devices: Array<Record<string, unknown>> };
    expect(acme.devices.map((d) => d['device_id'])).toEqual(['02:00:00:00:23:72']);
    expect((own.list({ room: 'living room' }, { tenant: 'acme' }).structuredContent as { devices: unknown[] }).devices).toEqual([]);
    expect((own.list({}, { tenant: 'globex' }).structuredContent as { devices: unknown[] }).devices).toEqual([]);
    expect(asked).toEqual(['02:00:00:00:23:72', '02:00:00:00:23:72']);
  });

  it("a device tool's description names the device's name and room, without brackets from people's words", () => {
    expect(deviceLabel('02:00:00:00:23:71', { name: 'Speaker [big]', room: 'Living "room"', tags: ['audio'] })).toBe(
      'device 02:00:00:00:23:71 "Speaker big" in Living room tags audio',
    );
    expect(deviceLabel('02:00:00:00:23:72', undefined)).toBe('device 02:00:00:00:23:72');
  });
});
