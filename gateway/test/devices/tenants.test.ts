import { describe, expect, it } from 'vitest';
import type { DeviceFilter, DevicePage, DeviceSummary, PageRequest } from '../../src/devices/directory.js';
import { ownPage, visiblePage } from '../../src/devices/scoped-directory.js';
import { DEVICE_TENANT_COLLECTION, DeviceTenants, tenantByRules, type TenantDocuments } from '../../src/devices/tenants.js';
import { EnrollmentSlice } from '../../src/enrollment/config.js';
import { canSee, mayUseServer } from '../../src/principal.js';
import { until } from '../../../test/support/wait.js';

/** A store shared by "instances": each watcher hears the writes made through the others (as NATS KV does). */
function sharedStore() {
  const docs = new Map<string, unknown>();
  const watchers = new Set<{ owner: object; fn: (c: { key: string; value: unknown }) => void }>();
  return (owner: object = {}): TenantDocuments & { docs: Map<string, unknown> } => ({
    docs,
    async put(_c, key, value) {
      docs.set(key, value);
      for (const w of watchers) if (w.owner !== owner) w.fn({ key, value });
    },
    async delete(_c, key) {
      const had = docs.delete(key);
      for (const w of watchers) if (w.owner !== owner) w.fn({ key, value: undefined });
      return had;
    },
    async list(c) {
      expect(c).toBe(DEVICE_TENANT_COLLECTION);
      return [...docs].map(([key, value]) => ({ key, value }));
    },
    onChange(_c, fn) {
      const w = { owner, fn };
      watchers.add(w);
      return () => watchers.delete(w);
    },
  });
}

describe('the tenant rule (principal.ts)', () => {
  it('operators (no tenant) see everything; a tenant sees its own only, never what has no tenant', () => {
    expect(canSee({}, undefined)).toBe(true);
    expect(canSee({}, 'acme')).toBe(true);
    expect(canSee({ tenant: 'acme' }, 'acme')).toBe(true);
    expect(canSee({ tenant: 'acme' }, 'globex')).toBe(false);
    expect(canSee({ tenant: 'acme' }, undefined)).toBe(false);
  });

  it('hosted servers keep their own rule: open servers serve all, limited ones only their tenants (not operators)', () => {
    expect(mayUseServer({}, undefined)).toBe(true);
    expect(mayUseServer({ tenant: 'acme' }, undefined)).toBe(true);
    expect(mayUseServer({ tenant: 'acme' }, ['acme'])).toBe(true);
    expect(mayUseServer({ tenant: 'globex' }, ['acme'])).toBe(false);
    expect(mayUseServer({}, ['acme'])).toBe(false);
  });
});

describe('DeviceTenants', () => {
  it('loads what the store holds (ignoring malformed tenants), writes through, and follows another instance', async () => {
    const store = sharedStore();
    const a = store({});
    a.docs.set('02:00:00:00:00:01', { tenant: 'acme' });
    a.docs.set('02:00:00:00:00:02', { tenant: 'not a tenant!' });
    a.docs.set('02:00:00:00:00:03', 'garbage');
    const one = new DeviceTenants();
    await one.attach(a);
    expect(one.tenantOf('02:00:00:00:00:01')).toBe('acme');
    expect(one.tenantOf('02:00:00:00:00:02')).toBeUndefined();
    expect(one.tenantOf('02:00:00:00:00:03')).toBeUndefined();

    const two = new DeviceTenants();
    await two.attach(store({}));
    let heard = 0;
    two.onChange(() => heard++);
    await one.set('02:00:00:00:00:04', 'globex');
    expect(a.docs.get('02:00:00:00:00:04')).toEqual({ tenant: 'globex' });
    expect(two.tenantOf('02:00:00:00:00:04')).toBe('globex');
    await one.set('02:00:00:00:00:01', null);
    expect(two.tenantOf('02:00:00:00:00:01')).toBeUndefined();
    expect(heard).toBe(2);
  });

  it('rules: the first that matches on every matcher given; a device with a tenant keeps it', async () => {
    const rules = EnrollmentSlice.parse({
      tenantRules: [
        { tenant: 'acme', macPrefix: 'AA-BB-CC', board: 'kit-1' },
        { tenant: 'globex', clientIdPrefix: 'globex-' },
        { tenant: 'initech', macPrefix: 'aa:bb' },
      ],
    }).tenantRules!;
    expect(tenantByRules(rules, { deviceId: 'aa:bb:cc:00:00:01', board: 'kit-1' })).toBe('acme');
    expect(tenantByRules(rules, { deviceId: 'aa:bb:cc:00:00:01', board: 'kit-2' })).toBe('initech');
    expect(tenantByRules(rules, { deviceId: '02:00:00:00:00:01', clientId: 'globex-7' })).toBe('globex');
    expect(tenantByRules(rules, { deviceId: '02:00:00:00:00:01' })).toBeUndefined();

    const t = new DeviceTenants(rules);
    await t.attach(sharedStore()());
    expect(await t.assignByRules({ deviceId: 'aa:bb:01:00:00:01' })).toBe('initech');
    await t.set('aa:bb:cc:00:00:09', 'globex');
    expect(await t.assignByRules({ deviceId: 'aa:bb:cc:00:00:09', board: 'kit-1' })).toBe('globex');
    expect(await t.assignByRules({ deviceId: '02:00:00:00:00:09' })).toBeUndefined();
    expect(t.tenantOf('02:00:00:00:00:09')).toBeUndefined();
  });

  it("a rule's tenant for an id not recorded is held in memory (bounded, least recently checked out), stored once the device is recorded, and goes when its record is forgotten", async () => {
    const a = sharedStore()({});
    const recorded = new Set<string>();
    const onRecorded = new Set<(id: string) => void>();
    const onForgotten = new Set<(id: string) => void>();
    let named: (id: string) => boolean = () => false;
    const records = {
      has: (id: string) => recorded.has(id),
      countAsNamed: (fn: (id: string) => boolean) => void (named = fn),
      onRecorded: (fn: (id: string) => void) => (onRecorded.add(fn), () => onRecorded.delete(fn)),
      onForgotten: (fn: (id: string) => void) => (onForgotten.add(fn), () => onForgotten.delete(fn)),
    };
    let dropped = 0;
    const t = new DeviceTenants([{ tenant: 'acme', macPrefix: '02:00:00:7e' }], undefined, {
      maxUnrecorded: 3,
      metrics: { deviceTenantsDropped: { inc: () => void dropped++ } } as never,
    });
    await t.attach(a);
    t.followRecords(records);
    const id = (n: number) => `02:00:00:7e:00:0${n}`;
    // OTA checks naming ids nobody connected with: nothing is stored, at most 3 are held.
    for (let n = 1; n <= 5; n++) expect(await t.assignByRules({ deviceId: id(n) })).toBe('acme');
    expect(a.docs.size).toBe(0);
    expect(t.unrecordedSize).toBe(3);
    expect(dropped).toBe(2);
    expect([1, 2, 3, 4, 5].map((n) => t.tenantOf(id(n)))).toEqual([undefined, undefined, 'acme', 'acme', 'acme']);
    // Checked again, 3 is the most recent: a new id pushes out 4.
    await t.assignByRules({ deviceId: id(3) });
    await t.assignByRules({ deviceId: id(6) });
    expect(t.tenantOf(id(4))).toBeUndefined();
    expect(t.tenantOf(id(3))).toBe('acme');
    // 3 connects: recorded, its tenant is stored.
    recorded.add(id(3));
    for (const fn of onRecorded) fn(id(3));
    await until(() => a.docs.has(id(3)), 'the tenant stored');
    // Stored as a rule's: it does not count as a person naming the device (which would keep it past devices.maxKnown).
    expect(a.docs.get(id(3))).toEqual({ tenant: 'acme', rule: true });
    expect(named(id(3))).toBe(false);
    expect(t.unrecordedSize).toBe(2);
    // A recorded device's rule is stored at once, as before.
    recorded.add(id(7));
    await t.assignByRules({ deviceId: id(7) });
    expect(a.docs.get(id(7))).toEqual({ tenant: 'acme', rule: true });
    // An operator's tenant is a person's naming: such a device is never forgotten past devices.maxKnown.
    await t.set(id(8), 'acme');
    expect(named(id(8))).toBe(true);
    await t.set(id(8), null);
    // Forgotten (DELETE, or past devices.maxKnown): its tenant goes with its record, stored and held alike.
    recorded.delete(id(3));
    for (const fn of onForgotten) fn(id(3));
    for (const fn of onForgotten) fn(id(6));
    await until(() => !a.docs.has(id(3)), 'the tenant cleared');
    expect(t.tenantOf(id(3))).toBeUndefined();
    expect(t.tenantOf(id(6))).toBeUndefined();
    expect([...a.docs.keys()]).toEqual([id(7)]);
  });

  it("each tenant's index (devicesOf, sorted) follows every change: the store's rows at start, PATCH, clearing, another instance's change, a rule's held tenant, its drop past the bound, its promotion, forgetting", async () => {
    const store = sharedStore();
    const a = store({});
    const id = (n: number) => `02:00:00:7e:00:${n.toString(16).padStart(2, '0')}`;
    a.docs.set(id(9), { tenant: 'acme' });
    a.docs.set(id(2), { tenant: 'acme', rule: true });
    a.docs.set(id(5), { tenant: 'globex' });
    a.docs.set(id(7), { tenant: 'not a tenant!' });
    const recorded = new Set<string>([id(2), id(5), id(9)]);
    const onRecorded = new Set<(id: string) => void>();
    const onForgotten = new Set<(id: string) => void>();
    const records = {
      has: (x: string) => recorded.has(x),
      countAsNamed: () => undefined,
      onRecorded: (fn: (id: string) => void) => (onRecorded.add(fn), () => onRecorded.delete(fn)),
      onForgotten: (fn: (id: string) => void) => (onForgotten.add(fn), () => onForgotten.delete(fn)),
    };
    const t = new DeviceTenants([{ tenant: 'initech', macPrefix: '02:00:00:7e' }], undefined, { maxUnrecorded: 2 });
    await t.attach(a, records);
    const other = new DeviceTenants();
    await other.attach(store({}));
    const all = Array.from({ length: 32 }, (_, n) => id(n));
    // The index is exactly what tenantOf says, for every tenant, in id order.
    const agrees = () => {
      for (const tenant of ['acme', 'globex', 'initech']) expect(t.devicesOf(tenant)).toEqual(all.filter((x) => t.tenantOf(x) === tenant));
    };
    expect(t.devicesOf('acme')).toEqual([id(2), id(9)]);
    expect(t.devicesOf('globex')).toEqual([id(5)]);
    agrees();
    // An operator's PATCH: moved from acme to globex, then cleared.
    await t.set(id(1), 'acme');
    await t.set(id(9), 'globex');
    expect(t.devicesOf('acme')).toEqual([id(1), id(2)]);
    expect(t.devicesOf('globex')).toEqual([id(5), id(9)]);
    await t.set(id(1), null);
    expect(t.devicesOf('acme')).toEqual([id(2)]);
    agrees();
    // Another instance's change, through the shared store.
    await other.set(id(3), 'acme');
    await other.set(id(2), 'globex');
    expect(t.devicesOf('acme')).toEqual([id(3)]);
    expect(t.devicesOf('globex')).toEqual([id(2), id(5), id(9)]);
    agrees();
    // A rule's tenant for ids not recorded: held (and listed in the index) until dropped past the bound of 2.
    for (const n of [20, 21, 22]) await t.assignByRules({ deviceId: id(n) });
    expect(t.devicesOf('initech')).toEqual([id(21), id(22)]);
    agrees();
    // Recorded: stored, still initech's once.
    recorded.add(id(21));
    for (const fn of onRecorded) fn(id(21));
    await until(() => a.docs.has(id(21)), 'the tenant stored');
    expect(t.devicesOf('initech')).toEqual([id(21), id(22)]);
    agrees();
    // Forgotten (DELETE, past devices.maxKnown, or on another instance): out of the index, stored or held.
    for (const fn of onForgotten) fn(id(21));
    for (const fn of onForgotten) fn(id(22));
    for (const fn of onForgotten) fn(id(5));
    await until(() => !a.docs.has(id(21)) && !a.docs.has(id(5)), 'the tenants cleared');
    expect(t.devicesOf('initech')).toEqual([]);
    expect(t.devicesOf('globex')).toEqual([id(2), id(9)]);
    agrees();
  });

  it('the config refuses a rule without a matcher, an unknown key, or a bad tenant; no rules leaves the defaults as they were', () => {
    expect(EnrollmentSlice.safeParse({ tenantRules: [{ tenant: 'acme' }] }).success).toBe(false);
    expect(EnrollmentSlice.safeParse({ tenantRules: [{ tenant: 'acme', macPrefix: 'aa:bb', mac: 'x' }] }).success).toBe(false);
    expect(EnrollmentSlice.safeParse({ tenantRules: [{ tenant: 'a b', macPrefix: 'aa:bb' }] }).success).toBe(false);
    expect(EnrollmentSlice.safeParse({ tenantRules: [{ tenant: 'acme', macPrefix: 'aa:bb:c' }] }).success).toBe(false);
    expect('tenantRules' in EnrollmentSlice.parse({})).toBe(false);
  });
});

describe('visiblePage: one page of the devices a caller may see', () => {
  const ids = Array.from({ length: 700 }, (_, i) => `02:00:00:00:${(i >> 8).toString(16).padStart(2, '0')}:${(i & 0xff).toString(16).padStart(2, '0')}`);
  const dir = {
    page(_f: DeviceFilter, o: PageRequest): DevicePage {
      const start = o.after === undefined ? 0 : ids.indexOf(o.after) + 1;
      const devices = ids.slice(start, start + o.limit).map((id) => ({ id }) as DeviceSummary);
      return { devices, next: start + o.limit < ids.length ? devices.at(-1)!.id : undefined };
    },
  };

  it('reads past hidden devices to fill the page, and ends when no visible device is left', () => {
    const mine = new Set([ids[3]!, ids[300]!, ids[301]!, ids[650]!]);
    const visible = (id: string) => mine.has(id);
    const first = visiblePage(dir, {}, { limit: 2 }, visible);
    expect(first.devices.map((d) => d.id)).toEqual([ids[3], ids[300]]);
    expect(first.next).toBe(ids[300]);
    const second = visiblePage(dir, {}, { limit: 2, after: first.next }, visible);
    expect(second.devices.map((d) => d.id)).toEqual([ids[301], ids[650]]);
    expect(second.next).toBeUndefined();
    expect(visiblePage(dir, {}, { limit: 5 }, () => false)).toEqual({ devices: [], next: undefined });
  });
});

describe("ownPage: a tenant's page read from its own ids gives the page visiblePage gives from the fleet's", () => {
  // A fleet with tenants and rooms spread over it; the directory summarizes every id it lists.
  const ids = Array.from({ length: 600 }, (_, i) => `02:00:00:00:${(i >> 8).toString(16).padStart(2, '0')}:${(i & 0xff).toString(16).padStart(2, '0')}`);
  const tenantOf = (id: string) => ['acme', 'globex', undefined, undefined, undefined, undefined, undefined][parseInt(id.slice(-2), 16) % 7] ?? undefined;
  const summary = (id: string) =>
    ({ id, online: parseInt(id.slice(-2), 16) % 3 === 0, room: parseInt(id.slice(-2), 16) % 2 === 0 ? 'den' : 'hall', tags: [] }) as unknown as DeviceSummary;
  let got = 0;
  const dir = {
    get(id: string): DeviceSummary | undefined {
      got++;
      return ids.includes(id) ? summary(id) : undefined;
    },
    page(f: DeviceFilter, o: PageRequest): DevicePage {
      const start = o.after === undefined ? 0 : ids.findIndex((x) => x > o.after!);
      const devices: DeviceSummary[] = [];
      let i = start < 0 ? ids.length : start;
      for (; i < ids.length && devices.length < o.limit; i++) {
        const d = summary(ids[i]!);
        if ((f.online === undefined || d.online === f.online) && (f.room === undefined || d.room === f.room)) devices.push(d);
      }
      return { devices, next: devices.length === o.limit && i < ids.length ? devices.at(-1)!.id : undefined };
    },
  };

  it('same devices, same order, same cursor, for every filter and page size; the directory asked only for the own ids', () => {
    // The index may hold ids the directory does not list (a rule's tenant for an id not recorded yet).
    const own = [...ids.filter((id) => tenantOf(id) === 'acme'), '02:00:00:00:ff:f0'].sort();
    const visible = (id: string) => tenantOf(id) === 'acme' || id === '02:00:00:00:ff:f0';
    for (const filter of [{}, { online: true }, { room: 'den' }, { online: false, room: 'hall' }] as DeviceFilter[])
      for (const limit of [1, 2, 7, 50, 500]) {
        let after: string | undefined;
        for (let n = 0; n < 1000; n++) {
          got = 0;
          const mine = ownPage(dir, own, filter, { limit, after }, visible);
          expect(got).toBeLessThanOrEqual(own.length);
          expect(mine).toEqual(visiblePage(dir, filter, { limit, after }, visible));
          if (mine.next === undefined) break;
          after = mine.next;
        }
      }
  });
});
