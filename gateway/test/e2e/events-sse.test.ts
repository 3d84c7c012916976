import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestGateway, TEST_API_KEY, type TestGateway } from '../../../test/support/gateway-harness.js';
import { ReferenceDevice } from '../../../test/support/reference-device.js';
import { openSse } from '../../../test/support/sse.js';

describe('GET /v1/events (SSE)', () => {
  let t: TestGateway;
  beforeAll(async () => {
    t = await startTestGateway({ events: { bufferSize: 100 } });
  });
  afterAll(() => t.close());
  const auth = { authorization: `Bearer ${TEST_API_KEY}` };

  it('streams filtered events and replays what was missed after Last-Event-ID', async () => {
    const a = new ReferenceDevice({ deviceId: '02:00:00:00:02:01' });
    const b = new ReferenceDevice({ deviceId: '02:00:00:00:02:02' });
    const stream = await openSse(`${t.baseUrl}/v1/events?device=02_00_00_00_02_01&type=device.online,device.ready,device.notification`, auth);
    expect(stream.status).toBe(200);
    expect(stream.contentType).toContain('text/event-stream');

    await b.connectWebSocket(t.wsUrl); // filtered out: another device
    await a.connectWebSocket(t.wsUrl);
    const online = await stream.events.next();
    const ready = await stream.events.next();
    expect([online.event, ready.event]).toEqual(['device.online', 'device.ready']);
    const onlineBody = JSON.parse(online.data) as Record<string, unknown>;
    expect(onlineBody).toMatchObject({ id: online.id, type: 'device.online', deviceId: a.deviceId, data: { transport: 'websocket' } });
    expect(Date.parse(onlineBody['at'] as string)).toBeGreaterThan(0);
    stream.close();

    // While nobody listens, the device sends two notifications.
    const second = t.nextEvent('device.notification', a.deviceId);
    a.notify('notifications/state_changed', { n: 1 });
    await t.nextEvent('device.notification', a.deviceId);
    a.notify('notifications/state_changed', { n: 2 });
    await second.catch(() => undefined);
    const missed = () => {
      const r = t.gw.bus.since(ready.id!);
      return 'events' in r ? r.events.filter((e) => e.type === 'device.notification').length : -1;
    };
    await expect.poll(missed).toBe(2);

    const resumed = await openSse(`${t.baseUrl}/v1/events?device=${a.deviceId}&type=device.notification`, { ...auth, 'last-event-id': ready.id! });
    const n1 = JSON.parse((await resumed.events.next()).data) as { data: { params: { n: number } } };
    const n2 = JSON.parse((await resumed.events.next()).data) as { data: { params: { n: number } } };
    expect([n1.data.params.n, n2.data.params.n]).toEqual([1, 2]);
    // Live events follow the replay on the same stream.
    a.notify('notifications/state_changed', { n: 3 });
    const n3 = JSON.parse((await resumed.events.next()).data) as { data: { params: { n: number } } };
    expect(n3.data.params.n).toBe(3);
    resumed.close();
    a.terminate();
    b.terminate();
  });

  it('refuses unknown filters and missing keys', async () => {
    const bad = await t.api<{ code: string; detail: string }>('GET', '/v1/events?type=device.exploded');
    expect([bad.status, bad.body.code]).toEqual([400, 'INVALID_REQUEST']);
    expect(bad.body.detail).toContain('device.online');
    const noKey = await t.api<{ code: string }>('GET', '/v1/events', undefined, { apiKey: null });
    expect(noKey.status).toBe(401);
  });
});
