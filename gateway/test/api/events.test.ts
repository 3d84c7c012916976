import { once } from 'node:events';
import { connect } from 'node:net';
import type { FastifyInstance } from 'fastify';
import { afterEach, describe, expect, it } from 'vitest';
import { eventRoutes, type EventRouteOptions } from '../../src/api/events.js';
import { EventBus } from '../../src/events/bus.js';
import { createMetrics, type Metrics } from '../../src/metrics.js';
import { apiPart, bearer, listenLocal, PART_API_KEY } from '../../../test/support/api-parts.js';
import { metricValue } from '../../../test/support/device-parts.js';
import { openSse, type SseStream } from '../../../test/support/sse.js';

const SECOND_KEY = 'second-api-key-0123456789';
const auth = bearer();

/** GET /v1/events alone, over a bus of its own, on a real socket (streams cannot be injected). */
async function eventsPart(o: Partial<EventRouteOptions> & { bus?: EventBus; keys?: string[] } = {}) {
  const metrics: Metrics = o.metrics ?? createMetrics();
  const bus = o.bus ?? new EventBus({ bufferSize: 100, metrics });
  const app = await apiPart(
    (scope) =>
      scope.register(eventRoutes, { bus, metrics, maxStreams: 100, maxStreamsPerKey: 50, maxBufferedBytes: 1024 * 1024, writeTimeoutMs: 30_000, ...o }),
    o.keys ? { keys: o.keys } : {},
  );
  apps.push(app);
  const base = await listenLocal(app);
  return { app, bus, metrics, base, url: `${base}/v1/events` };
}

const apps: FastifyInstance[] = [];
const streams: SseStream[] = [];
afterEach(async () => {
  for (const s of streams.splice(0)) s.close();
  for (const a of apps.splice(0)) await a.close();
});
const open = async (url: string, headers: Record<string, string> = auth) => {
  const s = await openSse(url, headers);
  streams.push(s);
  return s;
};

describe('GET /v1/events (SSE)', () => {
  it('streams filtered events and replays what was missed after Last-Event-ID', async () => {
    const { bus, url } = await eventsPart();
    const a = '02:00:00:00:02:01';
    const b = '02:00:00:00:02:02';
    const stream = await open(`${url}?device=02_00_00_00_02_01&type=device.online,device.ready,device.notification`);
    expect(stream.status).toBe(200);
    expect(stream.contentType).toContain('text/event-stream');

    bus.publish('device.online', b, { transport: 'websocket' }); // filtered out: another device
    bus.publish('device.ready', b);
    bus.publish('device.online', a, { transport: 'websocket' });
    bus.publish('device.ready', a);
    const online = await stream.events.next();
    const ready = await stream.events.next();
    expect([online.event, ready.event]).toEqual(['device.online', 'device.ready']);
    const onlineBody = JSON.parse(online.data) as Record<string, unknown>;
    expect(onlineBody).toMatchObject({ id: online.id, type: 'device.online', deviceId: a, data: { transport: 'websocket' } });
    expect(Date.parse(onlineBody['at'] as string)).toBeGreaterThan(0);
    stream.close();

    // While nobody listens, the device sends two notifications.
    bus.publish('device.notification', a, { method: 'notifications/state_changed', params: { n: 1 } });
    bus.publish('device.notification', a, { method: 'notifications/state_changed', params: { n: 2 } });

    const resumed = await open(`${url}?device=${a}&type=device.notification`, { ...auth, 'last-event-id': ready.id! });
    const n1 = JSON.parse((await resumed.events.next()).data) as { data: { params: { n: number } } };
    const n2 = JSON.parse((await resumed.events.next()).data) as { data: { params: { n: number } } };
    expect([n1.data.params.n, n2.data.params.n]).toEqual([1, 2]);
    // Live events follow the replay on the same stream.
    bus.publish('device.notification', a, { method: 'notifications/state_changed', params: { n: 3 } });
    const n3 = JSON.parse((await resumed.events.next()).data) as { data: { params: { n: number } } };
    expect(n3.data.params.n).toBe(3);
  });

  it('refuses unknown filters and missing keys', async () => {
    const { app } = await eventsPart();
    const bad = await app.inject({ method: 'GET', url: '/v1/events?type=device.exploded', headers: auth });
    expect([bad.statusCode, bad.json<{ code: string }>().code]).toEqual([400, 'INVALID_REQUEST']);
    expect(bad.json<{ detail: string }>().detail).toContain('device.online');
    const badDevice = await app.inject({ method: 'GET', url: '/v1/events?device=not-a-mac', headers: auth });
    expect([badDevice.statusCode, badDevice.json<{ code: string }>().code]).toEqual([400, 'INVALID_REQUEST']);
    const noKey = await app.inject({ method: 'GET', url: '/v1/events' });
    expect(noKey.statusCode).toBe(401);
  });
});

describe('event ids across restarts and Last-Event-ID resync (issue 8, defect 10c)', () => {
  it('gives a second start ids of its own, and tells a client with an id from the first start to resync', async () => {
    const deviceId = '02:00:00:00:10:01';
    // Two starts are two buses: each its own boot epoch.
    const first = new EventBus({ bufferSize: 100 });
    const idsBefore = [first.publish('device.online', deviceId)!.id, first.publish('device.ready', deviceId)!.id];
    const { bus: second, url } = await eventsPart();
    second.publish('device.online', deviceId);
    const readyEvent = second.publish('device.ready', deviceId)!;
    // The same sequence of events after a restart: none of its ids is one the first start gave out.
    const idsAfter = second.since(`${second.boot}-0`);
    expect('events' in idsAfter && idsAfter.events.map((e) => e.id)).toEqual([expect.any(String), readyEvent.id]);
    for (const id of idsBefore) expect('events' in idsAfter && idsAfter.events.map((e) => e.id)).not.toContain(id);

    expect(second.lastId).toBe(readyEvent.id);
    for (const stale of [idsBefore[1]!, '34', 'garbage']) {
      const current = second.lastId;
      const resumed = await open(url, { ...auth, 'last-event-id': stale });
      const resync = await resumed.events.next();
      expect(resync.event).toBe('resync');
      expect(JSON.parse(resync.data)).toEqual({ reason: 'unknown_id', lastId: current });
      // The resync carries the current id, so the client's next reconnect resumes from here.
      expect(resync.id).toBe(current);
      second.publish('device.notification', deviceId, { params: { stale } });
      const live = await resumed.events.next();
      expect(JSON.parse(live.data)).toMatchObject({ type: 'device.notification', data: { params: { stale } } });
      resumed.close();
    }
  });

  it('tells a client whose id fell out of the buffer to resync, and replays for one still in it', async () => {
    const { bus, url } = await eventsPart({ bus: new EventBus({ bufferSize: 2 }) });
    const ids = Array.from({ length: 5 }, (_, i) => bus.publish('device.online', '02:00:00:00:10:02', { i })!.id);
    const expired = await open(url, { ...auth, 'last-event-id': ids[0]! });
    const resync = await expired.events.next();
    expect([resync.event, JSON.parse(resync.data)]).toEqual(['resync', { reason: 'expired', lastId: ids[4] }]);

    const kept = await open(url, { ...auth, 'last-event-id': ids[3]! });
    const replayed = await kept.events.next();
    expect([replayed.event, replayed.id]).toEqual(['device.online', ids[4]]);
  });
});

describe('SSE fan-out (issue 8, defect 6)', () => {
  it('caps streams per key and in total, and counts each refusal', async () => {
    const { app, url, metrics } = await eventsPart({ keys: [PART_API_KEY, SECOND_KEY], maxStreamsPerKey: 20, maxStreams: 30 });
    for (let i = 0; i < 20; i++) await open(url);
    expect(streams.every((s) => s.status === 200)).toBe(true);
    const overKey = await app.inject({ method: 'GET', url: '/v1/events', headers: auth });
    expect([overKey.statusCode, overKey.json<{ code: string }>().code]).toEqual([429, 'TOO_MANY_STREAMS']);
    expect(overKey.headers['content-type']).toContain('application/problem+json');
    expect(overKey.headers['retry-after']).toEqual(expect.any(String));
    // The same key spelled differently is still the same key.
    const respelled = await app.inject({ method: 'GET', url: '/v1/events', headers: { authorization: `bearer   ${PART_API_KEY} ` } });
    expect(respelled.statusCode).toBe(429);
    // Another key still gets streams, up to the total.
    for (let i = 0; i < 10; i++) await open(url, bearer(SECOND_KEY));
    expect(streams.every((s) => s.status === 200)).toBe(true);
    const overTotal = await app.inject({ method: 'GET', url: '/v1/events', headers: bearer(SECOND_KEY) });
    expect([overTotal.statusCode, overTotal.json<{ code: string }>().code]).toEqual([429, 'TOO_MANY_STREAMS']);
    expect(await metricValue(metrics, 'voxgate_sse_streams_dropped_total', { reason: 'key_cap' })).toBe(2);
    expect(await metricValue(metrics, 'voxgate_sse_streams_dropped_total', { reason: 'total_cap' })).toBe(1);
    expect(await metricValue(metrics, 'voxgate_sse_clients')).toBe(30);
    // A stream closed frees its place.
    streams.shift()!.close();
    await expect.poll(() => metricValue(metrics, 'voxgate_sse_clients')).toBe(29);
    expect((await open(url)).status).toBe(200);
  });

  it('serializes each event once, however many readers it has', async () => {
    const { bus, url, metrics } = await eventsPart();
    for (let i = 0; i < 5; i++) await open(url);
    await expect.poll(() => metricValue(metrics, 'voxgate_sse_clients')).toBe(5);
    let serialized = 0;
    // JSON.stringify reads the getter once per serialization.
    const data = {
      get probe() {
        serialized++;
        return 'p';
      },
    };
    bus.publish('device.notification', '02:00:00:00:0f:05', data);
    for (const s of streams) expect(JSON.parse((await s.events.next()).data)).toMatchObject({ data: { probe: 'p' } });
    expect(serialized).toBe(1);
  });

  it('drops a reader whose unsent bytes pass the bound, and counts it', async () => {
    const { bus, url, metrics } = await eventsPart({ maxBufferedBytes: 64 * 1024 });
    await open(url);
    const healthy = await open(`${url}?type=device.online`);
    await expect.poll(() => metricValue(metrics, 'voxgate_sse_clients')).toBe(2);
    // Published in one synchronous burst: the reader (this process) cannot drain its socket meanwhile, so the
    // kernel buffers fill and the rest queues in the route, past the bound.
    const blob = 'b'.repeat(100_000);
    for (let i = 0; i < 200; i++) bus.publish('device.notification', '02:00:00:00:0f:03', { method: 'n', params: { blob, i } });
    expect(await metricValue(metrics, 'voxgate_sse_streams_dropped_total', { reason: 'slow' })).toBe(1);
    await expect.poll(() => metricValue(metrics, 'voxgate_sse_clients')).toBe(1);
    // The filtered stream buffered nothing and stays.
    bus.publish('device.online', '02:00:00:00:0f:04', {});
    expect(JSON.parse((await healthy.events.next()).data)).toMatchObject({ deviceId: '02:00:00:00:0f:04' });
  });

  it('drops a reader whose socket takes nothing for events.writeTimeoutMs, below the unread bound, and counts it', async () => {
    const { bus, base, metrics } = await eventsPart({ maxBufferedBytes: 256 * 1024 * 1024, writeTimeoutMs: 500 });
    // A reader that sends its request and never reads a byte: its socket is paused from the start.
    const s = connect(Number(new URL(base).port), '127.0.0.1');
    s.pause();
    await once(s, 'connect');
    s.write(`GET /v1/events HTTP/1.1\r\nhost: 127.0.0.1\r\nauthorization: ${auth['authorization']}\r\n\r\n`);
    try {
      await expect.poll(() => metricValue(metrics, 'voxgate_sse_clients')).toBe(1);
      // 20 MB at once: far past what the kernel's buffers take, far below the unread bound.
      const blob = 'b'.repeat(100_000);
      for (let i = 0; i < 200; i++) bus.publish('device.notification', '02:00:00:00:0f:06', { method: 'n', params: { blob, i } });
      await expect.poll(() => metricValue(metrics, 'voxgate_sse_streams_dropped_total', { reason: 'write_timeout' }), { timeout: 10_000 }).toBe(1);
      await expect.poll(() => metricValue(metrics, 'voxgate_sse_clients')).toBe(0);
      expect(await metricValue(metrics, 'voxgate_sse_streams_dropped_total', { reason: 'slow' })).toBe(0);
    } finally {
      s.destroy();
    }
  });
});
