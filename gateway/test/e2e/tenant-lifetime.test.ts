import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { DEVICE_TENANT_COLLECTION } from '../../src/devices/tenants.js';
import { SqliteStore } from '../../src/store/sqlite-store.js';
import { startTestGateway, TEST_API_KEY, type TestGateway } from '../../../test/support/gateway-harness.js';
import { ReferenceDevice } from '../../../test/support/reference-device.js';

/**
 * What a device's tenant (collection `device-tenant`) lives as long as, across restarts of a real gateway over one data
 * dir (red team 9): a forgotten device's tenant goes with its record, and an OTA check naming an id nobody connects with
 * leaves no tenant row behind.
 */
const KEY_A = 'key-tenant-acme-0123456789';
const KEY_B = 'key-tenant-globex-0123456789';
const keys = { apiKeys: [TEST_API_KEY, KEY_A, KEY_B], apiKeyTenants: { [KEY_A]: 'acme', [KEY_B]: 'globex' } };

describe("a device's tenant lives as long as its record (red team 9)", () => {
  const gateways: TestGateway[] = [];
  const devices: ReferenceDevice[] = [];
  const dirs: string[] = [];
  afterEach(async () => {
    for (const d of devices.splice(0)) d.terminate();
    for (const g of gateways.splice(0)) await g.close();
    for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
  });
  const dataDir = () => {
    const d = mkdtempSync(join(tmpdir(), 'voxgate-tenant-life-'));
    dirs.push(d);
    return d;
  };
  const start = async (dir: string, overrides: Parameters<typeof startTestGateway>[0] = {}) => {
    const g = await startTestGateway({ ...keys, ...overrides }, {}, { dataDir: dir });
    gateways.push(g);
    return g;
  };
  const stop = async (g: TestGateway) => {
    gateways.splice(gateways.indexOf(g), 1);
    await g.close();
  };
  const dial = async (g: TestGateway, id: string, clientId?: string) => {
    const d = new ReferenceDevice({ deviceId: id, ...(clientId ? { clientId } : {}) });
    devices.push(d);
    const ready = g.nextEvent('device.ready', id);
    await d.connectWebSocket(g.wsUrl);
    await ready;
    return d;
  };
  const otaCheck = (g: TestGateway, id: string, clientId: string) =>
    fetch(`${g.baseUrl}/xiaozhi/ota/`, {
      method: 'POST',
      headers: { 'device-id': id, 'client-id': clientId, 'content-type': 'application/json' },
      body: JSON.stringify({ application: { version: '1.7.6' }, board: { type: 'sim-board' } }),
    });
  /** The device-tenant rows of a stopped gateway's store, read from the file. */
  const tenantRows = async (dir: string) => {
    const store = new SqliteStore(join(dir, 'voxgate.db'));
    try {
      return (await store.list(DEVICE_TENANT_COLLECTION)).map((r) => r.key);
    } finally {
      await store.close();
    }
  };

  it("DELETE forgets the tenant too: after a restart, a device dialling in with that id is nobody's until an operator says so", async () => {
    const dir = dataDir();
    const ID = '02:00:00:00:9a:01';
    let g = await start(dir);
    const first = await dial(g, ID);
    expect((await g.api('PATCH', `/v1/devices/${ID}`, { tenant: 'acme' })).status).toBe(200);
    expect((await g.api('GET', `/v1/devices/${ID}`, undefined, { apiKey: KEY_A })).status).toBe(200);
    // The device changed hands: the operator forgets it (its record, its credentials, its connection).
    const offline = g.nextEvent('device.offline', ID);
    expect((await g.api('DELETE', `/v1/devices/${ID}`)).status).toBe(204);
    await offline;
    first.terminate();
    await stop(g);

    g = await start(dir);
    await dial(g, ID);
    // Recorded as new, as the record says: no tenant. Before, it was still acme's: acme's key read it, its events and tools.
    expect((await g.api<{ tenant: string | null }>('GET', `/v1/devices/${ID}`)).body.tenant).toBeNull();
    expect((await g.api('GET', `/v1/devices/${ID}`, undefined, { apiKey: KEY_A })).status).toBe(404);
    await stop(g);
    expect(await tenantRows(dir)).toEqual([]);
  }, 120_000);

  it('DELETE of an id approved with a tenant that never connected (nothing recorded) revokes its credentials and forgets that tenant too', async () => {
    const dir = dataDir();
    const ID = '02:00:00:00:9a:0f';
    const g = await start(dir, { deviceAuth: 'hmac', deviceSecret: 'tenant-lifetime-device-secret-0123' });
    const checked = (await (await otaCheck(g, ID, 'c0ffee00-0000-4000-8000-00000000000f')).json()) as { activation?: { code: string } };
    expect((await g.api('POST', `/v1/enrollments/${checked.activation!.code}/approve`, { tenant: 'acme' })).status).toBe(200);
    expect(g.gw.deviceTenants.tenantOf(ID)).toBe('acme');
    expect((await g.api('DELETE', `/v1/devices/${ID}`)).status).toBe(204);
    expect(g.gw.enrollment!.binding(ID)).toBeUndefined();
    expect(g.gw.deviceTenants.tenantOf(ID)).toBeUndefined();
    await stop(g);
    // Before, the row stayed: the credentials were revoked, the tenant kept for ever.
    expect(await tenantRows(dir)).toEqual([]);
  });

  it("a device forgotten past devices.maxKnown loses its voice mode with its record, one an operator gave a tenant is kept; a tenant's key sets no mode for an id never connected", async () => {
    const dir = dataDir();
    const KEEP = '02:00:00:00:9a:21';
    const OLD = '02:00:00:7e:00:11';
    const NEW = '02:00:00:7e:00:12';
    const rules = { devices: { maxKnown: 2 }, enrollment: { tenantRules: [{ tenant: 'acme', macPrefix: '02:00:00:7e' }] } };
    let g = await start(dir, rules);
    // An operator gives KEEP a tenant: a person named it, so it is never forgotten past the bound (as the docs said).
    const keep = await dial(g, KEEP);
    expect((await g.api('PATCH', `/v1/devices/${KEEP}`, { tenant: 'globex' })).status).toBe(200);
    const keepOffline = g.nextEvent('device.offline', KEEP);
    keep.terminate();
    await keepOffline;
    const old = await dial(g, OLD);
    expect((await g.api('PATCH', `/v1/devices/${OLD}`, { voiceMode: 'off' })).status).toBe(200);
    const offline = g.nextEvent('device.offline', OLD);
    old.terminate();
    await offline;
    // A third device past maxKnown 2: an offline one not named is forgotten (record, and now its mode and its rule's
    // tenant). Before, KEEP (seen longest ago) went instead: a tenant did not count as a name.
    await dial(g, NEW);
    expect((await g.api('GET', `/v1/devices/${OLD}`)).status).toBe(404);
    expect((await g.api<{ tenant: string | null }>('GET', `/v1/devices/${KEEP}`)).body.tenant).toBe('globex');
    // An id a rule gives acme at a check, never connected: acme's key may not store a mode for it (one row per made-up id).
    const MADE_UP = '02:00:00:7e:00:99';
    expect((await otaCheck(g, MADE_UP, 'made-up')).status).toBe(200);
    expect((await g.api<{ code: string }>('PATCH', `/v1/devices/${MADE_UP}`, { voiceMode: 'off' }, { apiKey: KEY_A })).body.code).toBe('DEVICE_NOT_FOUND');
    await stop(g);

    g = await start(dir, rules);
    // The forgotten id dials in again: a new device, with no mode of its own. Before, its old mode ("off") came back.
    await dial(g, OLD);
    expect((await g.api<{ voiceMode: string | null }>('PATCH', `/v1/devices/${OLD}`, {})).body.voiceMode).toBeNull();
  }, 120_000);

  it('OTA checks naming made-up ids under a tenant rule store nothing; a device that connects keeps its tenant across a restart', async () => {
    const dir = dataDir();
    const rules = { enrollment: { tenantRules: [{ tenant: 'acme', macPrefix: '02:00:00:7e' }] } };
    let g = await start(dir, rules);
    // Anyone may send OTA checks (the endpoint takes no credentials); each named id matched acme's rule.
    for (let n = 0; n < 40; n++) {
      const res = await otaCheck(g, `02:00:00:7e:01:${n.toString(16).padStart(2, '0')}`, `made-up-${n}`);
      expect(res.status).toBe(200);
    }
    const REAL = '02:00:00:7e:00:01';
    expect((await otaCheck(g, REAL, 'real-client')).status).toBe(200);
    await dial(g, REAL, 'real-client');
    expect((await g.api<{ tenant: string | null }>('GET', `/v1/devices/${REAL}`, undefined, { apiKey: KEY_A })).body.tenant).toBe('acme');
    await stop(g);
    // Before: 41 rows, one per made-up id, kept for ever and read whole at every start.
    expect(await tenantRows(dir)).toEqual([REAL]);

    g = await start(dir, rules);
    expect((await g.api<{ tenant: string | null }>('GET', `/v1/devices/${REAL}`, undefined, { apiKey: KEY_A })).body.tenant).toBe('acme');
    expect((await g.api('GET', `/v1/devices/${REAL}`, undefined, { apiKey: KEY_B })).status).toBe(404);
  }, 120_000);
});
