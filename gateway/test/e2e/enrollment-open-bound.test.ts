import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { OtaResponseSchema, type OtaResponse } from '@voxgate/protocol';
import { afterEach, describe, expect, it } from 'vitest';
import { SqliteStore } from '../../src/store/sqlite-store.js';
import { startTestGateway, TEST_API_KEY, type TestGateway } from '../../../test/support/gateway-harness.js';
import { ReferenceDevice } from '../../../test/support/reference-device.js';

/**
 * `enrollment.policy: open` (trust on first use, hmac device auth): every OTA check naming a new device id enrolls it,
 * and the OTA endpoint takes no credentials. Red team 9: those enrollments were kept for ever and read whole at every
 * start, however many ids anyone made up; now the ones of ids that never connected are bounded
 * (`enrollment.maxUnconnected`), oldest out, while a device that connected keeps its credentials across a restart.
 */
const SECRET = 'open-bound-device-secret-0123456789';
const REAL = '02:00:00:00:9b:01';
const KEY_A = 'key-tenant-acme-enroll-0123456789';

describe('open enrollment of ids that never connect is bounded (red team 9)', () => {
  const gateways: TestGateway[] = [];
  const devices: ReferenceDevice[] = [];
  let dir = '';
  afterEach(async () => {
    for (const d of devices.splice(0)) d.terminate();
    for (const g of gateways.splice(0)) await g.close();
    rmSync(dir, { recursive: true, force: true });
  });
  const start = async (policy: 'open' | 'approve' = 'open') => {
    const g = await startTestGateway(
      {
        deviceAuth: 'hmac',
        deviceSecret: SECRET,
        apiKeys: [TEST_API_KEY, KEY_A],
        apiKeyTenants: { [KEY_A]: 'acme' },
        enrollment: { policy, maxUnconnected: 5, rateLimit: { burst: 100, perSecond: 50 }, tenantRules: [{ tenant: 'acme', macPrefix: '02:00:00:7f' }] },
      },
      {},
      { dataDir: dir },
    );
    gateways.push(g);
    return g;
  };
  const ota = async (g: TestGateway, id: string, clientId: string): Promise<OtaResponse> => {
    const res = await fetch(`${g.baseUrl}/xiaozhi/ota/`, {
      method: 'POST',
      headers: { 'device-id': id, 'client-id': clientId, 'content-type': 'application/json' },
      body: JSON.stringify({ application: { version: '1.7.6' }, board: { type: 'sim-board' } }),
    });
    expect(res.status).toBe(200);
    return OtaResponseSchema.parse(await res.json());
  };
  const dial = async (g: TestGateway, token: string) => {
    const d = new ReferenceDevice({ deviceId: REAL, clientId: 'real-client' });
    devices.push(d);
    const ready = g.nextEvent('device.ready', REAL);
    await d.connectWebSocket(g.wsUrl, { token });
    await ready;
    return d;
  };
  const idsIn = async (collection: string) => {
    const store = new SqliteStore(join(dir, 'voxgate.db'));
    try {
      return (await store.list(collection)).map((r) => r.key);
    } finally {
      await store.close();
    }
  };
  const enrolledIds = () => idsIn('enrollments');

  it('keeps at most maxUnconnected of them, the oldest out; a device that connected keeps its enrollment through a restart', async () => {
    dir = mkdtempSync(join(tmpdir(), 'voxgate-open-bound-'));
    let g = await start();
    const token = (await ota(g, REAL, 'real-client')).websocket!.token!;
    const real = await dial(g, token);
    // Made-up ids, each enrolled by its first check (each answer carries credentials).
    const madeUp = Array.from({ length: 20 }, (_, n) => `02:00:00:7f:00:${n.toString(16).padStart(2, '0')}`);
    for (const [n, id] of madeUp.entries()) expect((await ota(g, id, `made-up-${n}`)).websocket?.token).toBeTruthy();
    expect(await g.metric('voxgate_enrollment_decisions_total', { outcome: 'dropped_unconnected' })).toBe(15);
    real.terminate();
    gateways.splice(0);
    await g.close();
    // Before: all 21 enrollments, for ever.
    expect((await enrolledIds()).sort()).toEqual([REAL, ...madeUp.slice(-5)].sort());

    g = await start();
    // The real device's credentials still hold.
    await dial(g, token);
    expect((await g.api<{ state: string }>('GET', `/v1/devices/${REAL}`)).body.state).toBe('ready');
  }, 120_000);

  it("approve policy: a tenant's key approving its rule's claims for made-up ids, one after another, keeps at most maxUnconnected (and their tenants go with them)", async () => {
    dir = mkdtempSync(join(tmpdir(), 'voxgate-open-bound-'));
    const g = await start('approve');
    const madeUp = Array.from({ length: 8 }, (_, n) => `02:00:00:7f:01:${n.toString(16).padStart(2, '0')}`);
    for (const [n, id] of madeUp.entries()) {
      const code = (await ota(g, id, `made-up-${n}`)).activation?.code;
      expect(code).toBeTruthy();
      // The claim is acme's (its rule): acme's key may approve it, and it stays approved while the next one comes.
      const approved = await g.api<{ tenant: string }>('POST', `/v1/enrollments/${code}/approve`, undefined, { apiKey: KEY_A });
      expect([approved.status, approved.body.tenant]).toEqual([200, 'acme']);
    }
    expect(await g.metric('voxgate_enrollment_decisions_total', { outcome: 'dropped_unconnected' })).toBe(3);
    gateways.splice(0);
    await g.close();
    // Before: 8 enrollments and 8 tenant rows, one pair per made-up id, for ever.
    expect((await enrolledIds()).sort()).toEqual(madeUp.slice(-5).sort());
    expect((await idsIn('device-tenant')).sort()).toEqual(madeUp.slice(-5).sort());
  }, 120_000);
});
