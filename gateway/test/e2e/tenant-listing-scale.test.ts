import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { DeviceFilter, DevicePage, DeviceSummary, PageRequest } from '../../src/devices/directory.js';
import { DEVICE_FACTS_COLLECTION, DEVICE_META_COLLECTION } from '../../src/devices/record-shapes.js';
import { DEVICE_TENANT_COLLECTION } from '../../src/devices/tenants.js';
import { SqliteStore } from '../../src/store/sqlite-store.js';
import { startTestGateway, TEST_API_KEY, type TestGateway } from '../../../test/support/gateway-harness.js';
import { ReferenceDevice } from '../../../test/support/reference-device.js';

/**
 * A tenant's key listing its few devices in a large fleet reads its own devices, not the fleet: before, every
 * `GET /v1/devices` of a tenant's key asked the directory for every known device, page after page, and kept its own
 * (~125 ms of the one event loop per call at 50 000 known devices). A real gateway over a store holding thousands of
 * recorded devices; what the directory summarizes is counted, no time is measured.
 */
const KEY_A = 'key-tenant-acme-0123456789';
const KEY_B = 'key-tenant-globex-0123456789';
const keys = { apiKeys: [TEST_API_KEY, KEY_A, KEY_B], apiKeyTenants: { [KEY_A]: 'acme', [KEY_B]: 'globex' } };

const FLEET = 4000;
const idOf = (i: number) => `02:00:00:00:${(i >> 8).toString(16).padStart(2, '0')}:${(i & 0xff).toString(16).padStart(2, '0')}`;
/** acme's devices, spread over the fleet; ONLINE dials in, the others stay offline. */
const ACME = [17, 900, 1801, 2600, 3000, 3333, 3999].map(idOf);
const ONLINE = idOf(3000);
const GLOBEX = [18, 901, 1802, 2601, 3334].map(idOf);
const DEN = [idOf(900), idOf(2600), idOf(3000), idOf(901)];
/** The cursor the API gives out for a page ending at this id (api/devices.ts encodeCursor: the format is kept). */
const cursorAfter = (id: string) => encodeURIComponent(Buffer.from(`d1:${id}`).toString('base64url'));

/** The fleet written through the real store before the gateway starts: what a gateway restarted over its data dir reads. */
async function seed(dir: string): Promise<void> {
  const store = new SqliteStore(join(dir, 'voxgate.db'));
  try {
    const at = Date.now() - 60_000;
    const facts = Array.from({ length: FLEET }, (_, i) => ({
      key: idOf(i),
      value: {
        clientId: `client-${i}`,
        transport: 'websocket',
        board: null,
        firmware: null,
        firstSeen: at,
        lastSeen: at + i,
        connectedAt: at,
        catalogHash: null,
        toolCount: 0,
        server: null,
      },
    }));
    await store.putMany(DEVICE_FACTS_COLLECTION, facts);
    for (const id of DEN) await store.put(DEVICE_META_COLLECTION, id, { name: null, room: 'Den', tags: [], tenant: null });
    for (const id of ACME) await store.put(DEVICE_TENANT_COLLECTION, id, { tenant: 'acme' });
    for (const id of GLOBEX) await store.put(DEVICE_TENANT_COLLECTION, id, { tenant: 'globex' });
  } finally {
    await store.close();
  }
}

describe("a tenant's device listing reads its own devices, not the fleet", () => {
  const gateways: TestGateway[] = [];
  const devices: ReferenceDevice[] = [];
  const dirs: string[] = [];
  afterEach(async () => {
    for (const d of devices.splice(0)) d.terminate();
    for (const g of gateways.splice(0)) await g.close();
    for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
  });

  const start = async () => {
    const dir = mkdtempSync(join(tmpdir(), 'voxgate-tenant-listing-'));
    dirs.push(dir);
    await seed(dir);
    const g = await startTestGateway(keys, {}, { dataDir: dir });
    gateways.push(g);
    const d = new ReferenceDevice({ deviceId: ONLINE });
    devices.push(d);
    const ready = g.nextEvent('device.ready', ONLINE, 30_000);
    await d.connectWebSocket(g.wsUrl);
    await ready;
    return g;
  };

  /** Every page of the listing for this key and query, following nextCursor; the ids in order. */
  const listAll = async (g: TestGateway, apiKey: string, query: string, limit: number) => {
    const ids: string[] = [];
    let cursor: string | undefined;
    for (let n = 0; n < 100; n++) {
      const q = `${query}${query ? '&' : ''}limit=${limit}${cursor === undefined ? '' : `&cursor=${encodeURIComponent(cursor)}`}`;
      const res = await g.api<{ devices: Array<{ id: string; tenant: string | null; online: boolean }>; nextCursor?: string }>(
        'GET',
        `/v1/devices?${q}`,
        undefined,
        { apiKey },
      );
      expect(res.status).toBe(200);
      expect(res.body.devices.length).toBeLessThanOrEqual(limit);
      ids.push(...res.body.devices.map((d) => d.id));
      cursor = res.body.nextCursor;
      if (cursor === undefined) return ids;
      expect(res.body.devices.length).toBe(limit);
    }
    throw new Error('the listing did not end');
  };

  /** Counts every device summary the directory hands out (a page's devices, a get's device) while `fn` runs. */
  const counted = async (g: TestGateway, fn: () => Promise<unknown>) => {
    const dir = g.gw.directory;
    const { get, page } = dir;
    let summaries = 0;
    dir.get = (id: string): DeviceSummary | undefined => {
      const s = get.call(dir, id);
      if (s) summaries++;
      return s;
    };
    dir.page = (filter: DeviceFilter, opts: PageRequest): DevicePage => {
      const p = page.call(dir, filter, opts);
      summaries += p.devices.length;
      return p;
    };
    try {
      await fn();
    } finally {
      dir.get = get;
      dir.page = page;
    }
    return summaries;
  };

  it(
    "pages, filters and cursors as before, never listing another tenant's device; the directory summarizes the tenant's devices only",
    { timeout: 120_000 },
    async () => {
      const g = await start();
      const sorted = (a: string[]) => [...a].sort();
      // Every page size, in id order, ending without a cursor.
      for (const limit of [1, 2, 3, 7, 100]) expect(await listAll(g, KEY_A, '', limit)).toEqual(sorted(ACME));
      expect(await listAll(g, KEY_B, '', 2)).toEqual(sorted(GLOBEX));
      // Filters combine with the tenant, as before (room ignoring case; online).
      expect(await listAll(g, KEY_A, 'room=den', 1)).toEqual(sorted([idOf(900), idOf(2600), idOf(3000)]));
      expect(await listAll(g, KEY_A, 'online=true', 2)).toEqual([ONLINE]);
      expect(await listAll(g, KEY_A, 'online=false&room=DEN', 1)).toEqual(sorted([idOf(900), idOf(2600)]));
      expect(await listAll(g, KEY_B, 'online=true', 2)).toEqual([]);
      // A cursor naming another tenant's device (or any id) continues after that id, within the caller's devices.
      const after = await g.api<{ devices: Array<{ id: string; tenant: string | null }> }>(
        'GET',
        `/v1/devices?limit=100&cursor=${cursorAfter(idOf(1802))}`,
        undefined,
        { apiKey: KEY_A },
      );
      expect(after.status).toBe(200);
      expect(after.body.devices.map((d) => d.id)).toEqual(sorted(ACME).filter((id) => id > idOf(1802)));
      expect(after.body.devices.every((d) => d.tenant === 'acme')).toBe(true);
      // The operator's listing is the fleet, as before.
      const first = await g.api<{ devices: Array<{ id: string }>; nextCursor?: string }>('GET', '/v1/devices?limit=1000');
      expect(first.body.devices.length).toBe(1000);
      expect(first.body.nextCursor).toBeDefined();

      // One page of two: the directory summarizes at most acme's 7 devices (before: pages of 256 through all 4000).
      const one = await counted(g, async () => {
        const res = await g.api<{ devices: Array<{ id: string }>; nextCursor?: string }>('GET', '/v1/devices?limit=2', undefined, { apiKey: KEY_A });
        expect(res.body.devices.map((d) => d.id)).toEqual(sorted(ACME).slice(0, 2));
      });
      expect(one).toBeGreaterThan(0);
      expect(one).toBeLessThanOrEqual(ACME.length);
      // A filter that matches nothing of acme's: still acme's devices only, not a walk of the fleet.
      const none = await counted(g, async () => expect(await listAll(g, KEY_A, 'room=attic', 50)).toEqual([]));
      expect(none).toBeLessThanOrEqual(ACME.length);
      // A page after a cursor reads from the cursor on.
      const tail = await counted(g, async () => {
        const res = await g.api<{ devices: Array<{ id: string }>; nextCursor?: string }>(
          'GET',
          `/v1/devices?limit=1&cursor=${cursorAfter(sorted(ACME)[5]!)}`,
          undefined,
          { apiKey: KEY_A },
        );
        expect(res.status).toBe(200);
        expect(res.body.devices.map((d) => d.id)).toEqual([sorted(ACME)[6]]);
        expect(res.body.nextCursor).toBeUndefined();
      });
      expect(tail).toBeLessThanOrEqual(2);
    },
  );

  it(
    'a tenant change (PATCH tenant, another tenant, clearing it, DELETE) moves the device in and out of the listing at once',
    { timeout: 120_000 },
    async () => {
      const g = await start();
      const sorted = (a: string[]) => [...a].sort();
      const lone = idOf(2222);
      expect((await g.api('PATCH', `/v1/devices/${lone}`, { tenant: 'acme' })).status).toBe(200);
      expect(await listAll(g, KEY_A, '', 3)).toEqual(sorted([...ACME, lone]));
      expect(await listAll(g, KEY_B, '', 3)).toEqual(sorted(GLOBEX));
      expect((await g.api('PATCH', `/v1/devices/${lone}`, { tenant: 'globex' })).status).toBe(200);
      expect(await listAll(g, KEY_A, '', 3)).toEqual(sorted(ACME));
      expect(await listAll(g, KEY_B, '', 3)).toEqual(sorted([...GLOBEX, lone]));
      expect((await g.api('PATCH', `/v1/devices/${lone}`, { tenant: null })).status).toBe(200);
      expect(await listAll(g, KEY_B, '', 3)).toEqual(sorted(GLOBEX));
      // Forgotten: gone from its tenant's listing with its record (and its tenant).
      const gone = idOf(1801);
      expect((await g.api('DELETE', `/v1/devices/${gone}`)).status).toBe(204);
      expect(await listAll(g, KEY_A, '', 2)).toEqual(sorted(ACME.filter((id) => id !== gone)));
      expect(g.gw.deviceTenants.devicesOf('acme')).toEqual(sorted(ACME.filter((id) => id !== gone)));
      expect(g.gw.deviceTenants.devicesOf('globex')).toEqual(sorted(GLOBEX));
    },
  );
});
