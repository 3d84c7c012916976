import { spawnSync } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestGateway, type TestGateway } from '../../../test/support/gateway-harness.js';
import { startNatsServer, type NatsServer } from '../../../test/support/nats-server.js';
import { ReferenceDevice } from '../../../test/support/reference-device.js';
import { until } from '../../../test/support/wait.js';

const hasNats = spawnSync('nats-server', ['--version']).status === 0;
const HEARTBEAT_MS = 1000;
const DEVICE = '02:00:00:00:23:c1';

interface Page {
  events: Array<{ id: string; type: string; deviceId: string }>;
  next?: string;
}

/** With the cluster on, the history is the JetStream event stream: every instance reads every instance's events, across restarts. */
describe.skipIf(!hasNats)('event history in a cluster (issue 23: History)', { timeout: 180_000 }, () => {
  let nats: NatsServer;
  const gws: TestGateway[] = [];
  const join = (name: string) =>
    startTestGateway({ cluster: { enabled: true, instanceId: `gw-${name}`, nats: { servers: [nats.url] }, heartbeatMs: HEARTBEAT_MS } });

  beforeAll(async () => {
    nats = await startNatsServer();
    gws.push(await join('a'), await join('b'));
  }, 120_000);
  afterAll(async () => {
    await Promise.all(gws.map((g) => g.close()));
    await nats?.stop();
  });

  it("answers on any instance with another instance's events, and after that instance restarts", async () => {
    const [a, b] = gws as [TestGateway, TestGateway];
    const d = new ReferenceDevice({ deviceId: DEVICE });
    const ready = a.nextEvent('device.ready', DEVICE, 60_000);
    await d.connectWebSocket(a.wsUrl);
    const readyEvent = await ready;
    const offline = a.nextEvent('device.offline', DEVICE, 60_000);
    d.terminate();
    await offline;
    const types = async (g: TestGateway, query: string) => (await g.api<Page>('GET', `/v1/events/history?${query}`)).body.events.map((e) => e.type);
    // The stream takes the events asynchronously: read until the offline is there.
    await until(async () => (await types(b, `device=${DEVICE}`)).includes('device.offline'), 'the offline in the history read on b', 60_000);
    expect(await types(b, `device=${DEVICE}`)).toEqual(['device.online', 'device.ready', 'device.offline']);
    expect((await b.api<Page>('GET', `/v1/events/history?device=${DEVICE}&type=device.ready`)).body.events.map((e) => e.id)).toEqual([readyEvent.id]);
    expect(await types(a, `device=${DEVICE}&order=newest&limit=1`)).toEqual(['device.offline']);

    // a goes away and comes back (a new start, a new boot): the stream, and so the history, is still there.
    await a.close();
    gws[0] = await join('a2');
    expect(await types(gws[0], `device=${DEVICE}`)).toEqual(['device.online', 'device.ready', 'device.offline']);
    const p1 = (await gws[0].api<Page>('GET', `/v1/events/history?device=${DEVICE}&limit=2`)).body;
    const p2 = (await gws[0].api<Page>('GET', `/v1/events/history?device=${DEVICE}&limit=2&cursor=${p1.next}`)).body;
    expect([...p1.events, ...p2.events].map((e) => e.type)).toEqual(['device.online', 'device.ready', 'device.offline']);
    expect(p2.next).toBeUndefined();
  });
});
