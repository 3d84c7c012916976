import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestGateway, TEST_API_KEY, type TestGateway } from '../../../test/support/gateway-harness.js';
import { startNatsServer, type NatsServer } from '../../../test/support/nats-server.js';
import { ReferenceDevice } from '../../../test/support/reference-device.js';
import { until } from '../../../test/support/wait.js';

/**
 * A tenant's listing read from its tenancy's index (devices/tenants.ts devicesOf) answers in a cluster as the filtered
 * fleet did: its devices online on another instance are listed online, and a tenant set on another instance (the shared
 * store's change) moves the device into and out of the listing here.
 */
const KEY_A = 'key-tenant-acme-0123456789';
const KEY_B = 'key-tenant-globex-0123456789';
const keys = { apiKeys: [TEST_API_KEY, KEY_A, KEY_B], apiKeyTenants: { [KEY_A]: 'acme', [KEY_B]: 'globex' } };
const HEARTBEAT_MS = 1000;

interface Listed {
  devices: Array<{ id: string; online: boolean; tenant: string | null }>;
  nextCursor?: string;
}

describe("a tenant's device listing in a cluster", () => {
  let nats: NatsServer;
  const gws: TestGateway[] = [];
  const devices: ReferenceDevice[] = [];

  beforeAll(async () => {
    nats = await startNatsServer();
    for (const name of ['a', 'b'])
      gws.push(
        await startTestGateway({ ...keys, cluster: { enabled: true, instanceId: `gw-tl-${name}`, nats: { servers: [nats.url] }, heartbeatMs: HEARTBEAT_MS } }),
      );
  }, 120_000);

  afterAll(async () => {
    for (const d of devices) d.terminate();
    for (const g of gws) await g.close();
    await nats?.stop();
  }, 60_000);

  const ids = (g: TestGateway, apiKey: string, query = '') =>
    g.api<Listed>('GET', `/v1/devices?limit=1${query}`, undefined, { apiKey }).then(async (first) => {
      const out = [...first.body.devices];
      let cursor = first.body.nextCursor;
      while (cursor !== undefined) {
        const next = await g.api<Listed>('GET', `/v1/devices?limit=1${query}&cursor=${encodeURIComponent(cursor)}`, undefined, { apiKey });
        out.push(...next.body.devices);
        cursor = next.body.nextCursor;
      }
      return out.map((d) => `${d.id}${d.online ? ' online' : ''}`);
    });

  it('lists its devices online on another instance, and follows a tenant set on another instance', { timeout: 120_000 }, async () => {
    const [a, b] = gws as [TestGateway, TestGateway];
    const mine = ['02:00:00:00:7c:01', '02:00:00:00:7c:03'];
    const theirs = '02:00:00:00:7c:02';
    for (const id of [...mine, theirs]) {
      const d = new ReferenceDevice({ deviceId: id });
      devices.push(d);
      const ready = b.nextEvent('device.ready', id, 30_000);
      await d.connectWebSocket(b.wsUrl);
      await ready;
    }
    for (const id of mine) expect((await b.api('PATCH', `/v1/devices/${id}`, { tenant: 'acme' })).status).toBe(200);
    expect((await b.api('PATCH', `/v1/devices/${theirs}`, { tenant: 'globex' })).status).toBe(200);
    // On instance a, which holds none of them: acme's devices, online (held by b), page by page.
    const expected = mine.map((id) => `${id} online`);
    await until(async () => JSON.stringify(await ids(a, KEY_A)) === JSON.stringify(expected), "acme's devices listed on a");
    expect(await ids(a, KEY_A, '&online=true')).toEqual(expected);
    expect(await ids(a, KEY_A, '&online=false')).toEqual([]);
    expect(await ids(a, KEY_B)).toEqual([`${theirs} online`]);
    // Moved to globex on b: a's listings follow the shared store.
    expect((await b.api('PATCH', `/v1/devices/${mine[1]}`, { tenant: 'globex' })).status).toBe(200);
    await until(async () => JSON.stringify(await ids(a, KEY_A)) === JSON.stringify([`${mine[0]} online`]), 'the move seen on a');
    expect(await ids(a, KEY_B)).toEqual([`${theirs} online`, `${mine[1]} online`].sort());
    // Offline: still listed (a known device), offline.
    const gone = b.nextEvent('device.offline', mine[0], 30_000);
    devices[0]!.terminate();
    await gone;
    await until(async () => JSON.stringify(await ids(a, KEY_A)) === JSON.stringify([mine[0]]), 'listed offline on a');
  });
});
