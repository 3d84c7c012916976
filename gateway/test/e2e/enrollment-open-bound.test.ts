import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { OtaResponseSchema, type OtaResponse } from '@voxgate/protocol';
import { afterEach, describe, expect, it } from 'vitest';
import { SqliteStore } from '../../src/store/sqlite-store.js';
import { startTestGateway, type TestGateway } from '../../../test/support/gateway-harness.js';
import { ReferenceDevice } from '../../../test/support/reference-device.js';

/**
 * `enrollment.policy: open` (trust on first use, hmac device auth): every OTA check naming a new device id enrolls it,
 * and the OTA endpoint takes no credentials. Red team 9: those enrollments were kept for ever and read whole at every
 * start, however many ids anyone made up; now the ones of ids that never connected are bounded
 * (`enrollment.maxUnconnected`), oldest out, while a device that connected keeps its credentials across a restart.
 */
const SECRET = 'open-bound-device-secret-0123456789';
const REAL = '02:00:00:00:9b:01';

describe('open enrollment of ids that never connect is bounded (red team 9)', () => {
  const gateways: TestGateway[] = [];
  const devices: ReferenceDevice[] = [];
  let dir = '';
  afterEach(async () => {
    for (const d of devices.splice(0)) d.terminate();
    for (const g of gateways.splice(0)) await g.close();
    rmSync(dir, { recursive: true, force: true });
  });
  const start = async () => {
    const g = await startTestGateway(
      { deviceAuth: 'hmac', deviceSecret: SECRET, enrollment: { policy: 'open', maxUnconnected: 5, rateLimit: { burst: 100, perSecond: 50 } } },
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
  const enrolledIds = async () => {
    const store = new SqliteStore(join(dir, 'voxgate.db'));
    try {
      return (await store.list('enrollments')).map((r) => r.key);
    } finally {
      await store.close();
    }
  };

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
});
