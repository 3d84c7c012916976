import { spawnSync } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestGateway, TEST_API_KEY, type TestGateway } from '../../../test/support/gateway-harness.js';
import { startNatsServer, type NatsServer } from '../../../test/support/nats-server.js';
import { openSse, type SseStream } from '../../../test/support/sse.js';
import { until } from '../../../test/support/wait.js';

/**
 * tenant-moved-device.test.ts with the cluster on: the history is the JetStream event stream every instance writes,
 * and events reach the other instances over NATS. Each event travels with the tenant it was published under, so on
 * any instance a device's new tenant reads none of what its old tenant's time left in the stream (pages, and a
 * `Last-Event-ID` replay looked up in the stream), and a relayed event of the old tenant (a call of its, cancelled
 * after the move) streams to nobody of the new one. Before, the stream kept no tenant: the device's current one decided.
 */
const hasNats = spawnSync('nats-server', ['--version']).status === 0;
const ACME_KEY = 'acme-key-moved-cluster-0123456789';
const GLOBEX_KEY = 'globex-key-moved-cluster-0123456789';
const D = '02:00:00:00:6e:c1';

interface Event {
  id: string;
  type: string;
  deviceId: string;
  data: Record<string, unknown>;
}

describe.skipIf(!hasNats)('a device moved to another tenant, in a cluster', { timeout: 180_000 }, () => {
  let nats: NatsServer;
  const gws: TestGateway[] = [];
  const streams: SseStream[] = [];
  const join = (name: string) =>
    startTestGateway({
      apiKeys: [TEST_API_KEY, ACME_KEY, GLOBEX_KEY],
      apiKeyTenants: { [ACME_KEY]: 'acme', [GLOBEX_KEY]: 'globex' },
      cluster: { enabled: true, instanceId: `gw-${name}`, nats: { servers: [nats.url] }, heartbeatMs: 1000 },
    });
  beforeAll(async () => {
    nats = await startNatsServer();
    gws.push(await join('a'), await join('b'));
  }, 120_000);
  afterAll(async () => {
    for (const s of streams) s.close();
    await Promise.all(gws.map((g) => g.close()));
    await nats?.stop();
  });

  const ids = async (g: TestGateway, key: string, query = '') =>
    (await g.api<{ events: Event[] }>('GET', `/v1/events/history?limit=1000${query}`, undefined, { apiKey: key })).body.events
      .filter((e) => e.deviceId === D)
      .map((e) => e.id);
  const stream = async (g: TestGateway, key: string, lastId?: string) => {
    const s = await openSse(`${g.baseUrl}/v1/events?device=${D}`, { authorization: `Bearer ${key}`, ...(lastId ? { 'last-event-id': lastId } : {}) });
    streams.push(s);
    expect(s.status).toBe(200);
    return async () => JSON.parse((await s.events.next()).data) as Event;
  };
  const moveTo = async (tenant: string) => {
    const [a, b] = gws as [TestGateway, TestGateway];
    expect((await a.api('PATCH', `/v1/devices/${D}`, { tenant })).status).toBe(200);
    await until(() => b.gw.deviceTenants.tenantOf(D) === tenant, `b to see the device as ${tenant}'s`);
  };

  it("the new tenant reads none of the old one's events on another instance: pages, replay, live", async () => {
    const [a, b] = gws as [TestGateway, TestGateway];
    const marker = a.gw.bus.publish('device.notification', D, { method: 'before any tenant' })!;
    await moveTo('acme');
    const acmeSaid = a.gw.bus.publish('voice.transcript', D, { session: 's-acme', text: 'the code of the safe is 4711' })!;
    await moveTo('globex');
    const globexSaid = a.gw.bus.publish('voice.transcript', D, { session: 's-globex', text: 'hello from globex' })!;
    // The stream takes the events asynchronously: read on b until the last is there.
    await until(async () => (await ids(b, TEST_API_KEY)).includes(globexSaid.id), 'the last event in the history read on b', 60_000);
    expect(await ids(b, TEST_API_KEY)).toEqual([marker.id, acmeSaid.id, globexSaid.id]);
    for (const query of ['', `&device=${D}`, '&type=voice.transcript', '&order=newest']) expect(await ids(b, GLOBEX_KEY, query)).toEqual([globexSaid.id]);
    expect(await ids(b, ACME_KEY)).toEqual([]);

    // Resumed on b after a's event (another start's id): looked up in the stream.
    expect((await (await stream(b, GLOBEX_KEY, marker.id))()).id).toBe(globexSaid.id);
    expect((await (await stream(b, TEST_API_KEY, marker.id))()).id).toBe(acmeSaid.id);

    // Live, relayed from a: acme's call's event (published after the move, under acme) is not globex's.
    const live = await stream(b, GLOBEX_KEY);
    const relayed = b.nextEvent('device.notification', D, 30_000);
    a.gw.bus.publish('call.state', D, { callId: 'call_0acme', state: 'cancelled' }, { tenant: 'acme' });
    const own = a.gw.bus.publish('device.notification', D, { method: 'globex, live' })!;
    await relayed;
    expect((await live()).id).toBe(own.id);
  });
});
