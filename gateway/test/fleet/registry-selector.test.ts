import { describe, expect, it } from 'vitest';
import { matchesFilter, type DeviceFilter, type DevicePage, type DeviceSummary, type PageRequest } from '../../src/devices/directory.js';
import { RegistrySelector } from '../../src/fleet/registry-selector.js';

const device = (id: string, o: Partial<DeviceSummary> = {}): DeviceSummary => ({
  ...{ id, clientId: `c-${id}`, transport: 'websocket', online: false, state: 'offline', connectedAt: '', lastSeenAt: '' },
  ...{ server: null, protocolVersion: null, toolCount: 0, toolsHash: null, pendingCalls: 0 },
  ...{ name: null, room: null, tags: [], tenant: null, board: null, firmware: null, firstSeenAt: '' },
  ...o,
});

/** A directory stand-in that pages as the registry does, and counts the pages asked for. */
function directory(devices: DeviceSummary[]) {
  const sorted = [...devices].sort((a, b) => a.id.localeCompare(b.id));
  const asked: Array<{ filter: DeviceFilter; opts: PageRequest }> = [];
  return {
    asked,
    page(filter: DeviceFilter, opts: PageRequest): DevicePage {
      asked.push({ filter, opts });
      const after = sorted.filter((d) => opts.after === undefined || d.id > opts.after).filter((d) => matchesFilter(d, filter));
      const page = after.slice(0, opts.limit);
      return { devices: page, next: after.length > opts.limit ? page[page.length - 1]!.id : undefined };
    },
  };
}

const id = (n: number) => `02:00:00:00:${(n >> 8).toString(16).padStart(2, '0')}:${(n & 0xff).toString(16).padStart(2, '0')}`;

describe('RegistrySelector', () => {
  const fleet = [
    device(id(1), { tags: ['audio', 'floor:1'], room: 'Kitchen', board: 'esp-box' }),
    device(id(2), { tags: ['audio'], room: 'kitchen', board: 'bread-compact-wifi', server: { name: 'xiaozhi', version: '1.7.6' } }),
    device(id(3), { tags: ['floor:1'], room: 'Hall', firmware: '1.7.6' }),
  ];

  it('selects ids alone as given, known or not, without reading the directory', async () => {
    const dir = directory(fleet);
    const selected = await new RegistrySelector(dir).select({ ids: [id(9), id(1), id(9)] });
    expect(selected.sort()).toEqual([id(1), id(9)]);
    expect(dir.asked).toEqual([]);
  });

  it('selects by every tag, room ignoring case, board and firmware (initialize answer, else OTA report)', async () => {
    const s = new RegistrySelector(directory(fleet));
    expect(await s.select({ tags: ['audio'] })).toEqual([id(1), id(2)]);
    expect(await s.select({ tags: ['audio', 'floor:1'] })).toEqual([id(1)]);
    expect(await s.select({ room: 'KITCHEN' })).toEqual([id(1), id(2)]);
    expect(await s.select({ board: 'esp-box' })).toEqual([id(1)]);
    expect(await s.select({ firmware: '1.7.6' })).toEqual([id(2), id(3)]);
    expect(await s.select({ tags: ['nothing-has-this'] })).toEqual([]);
  });

  it('narrows a filter with ids, and never adds an id the filter does not select', async () => {
    const s = new RegistrySelector(directory(fleet));
    expect(await s.select({ tags: ['floor:1'], ids: [id(3), id(2), id(7)] })).toEqual([id(3)]);
  });

  it('pages through a fleet larger than one page, in id order, every device once', async () => {
    const many = Array.from({ length: 2500 }, (_, n) => device(id(n), { tags: n % 2 === 0 ? ['even'] : [] }));
    const dir = directory(many);
    const selected = await new RegistrySelector(dir).select({ tags: ['even'] });
    expect(selected.length).toBe(1250);
    expect(new Set(selected).size).toBe(1250);
    expect(selected).toEqual([...selected].sort());
    expect(dir.asked.length).toBe(2);
    expect(dir.asked.every((a) => a.opts.limit === 1000)).toBe(true);
  });
});
