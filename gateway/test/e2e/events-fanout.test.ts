import { describe, expect, it } from 'vitest';
import { startTestGateway, TEST_API_KEY, type TestGateway } from '../../../test/support/gateway-harness.js';
import { ReferenceDevice } from '../../../test/support/reference-device.js';
import { openSse, type SseStream } from '../../../test/support/sse.js';

const SECOND_KEY = 'second-api-key-0123456789';
const bearer = (key: string) => ({ authorization: `Bearer ${key}` });

async function readyDevice(t: TestGateway, deviceId: string): Promise<ReferenceDevice> {
  const d = new ReferenceDevice({ deviceId });
  const ready = t.nextEvent('device.ready', deviceId);
  await d.connectWebSocket(t.wsUrl);
  await ready;
  return d;
}

describe('SSE fan-out under a chatty device (issue 8, defect 6)', () => {
  it('caps streams per key and in total, drops a device over its event rate, and keeps answering calls', async () => {
    // One token per 100 s after a burst of 5: within this test the chatty device gets 5 (at most 6) events through.
    const t = await startTestGateway({
      apiKeys: [TEST_API_KEY, SECOND_KEY],
      events: { maxStreamsPerKey: 20, maxStreams: 30, devicePerSecond: 0.01, deviceBurst: 5 },
    });
    const streams: SseStream[] = [];
    try {
      for (let i = 0; i < 20; i++) streams.push(await openSse(`${t.baseUrl}/v1/events`, bearer(TEST_API_KEY)));
      expect(streams.every((s) => s.status === 200)).toBe(true);
      const overKey = await t.api<{ code: string }>('GET', '/v1/events');
      expect([overKey.status, overKey.body.code]).toEqual([429, 'TOO_MANY_STREAMS']);
      expect(overKey.headers.get('content-type')).toContain('application/problem+json');
      expect(overKey.headers.get('retry-after')).toEqual(expect.any(String));
      // The same key spelled differently is still the same key.
      const respelled = await fetch(`${t.baseUrl}/v1/events`, { headers: { authorization: `bearer   ${TEST_API_KEY} ` } });
      expect(respelled.status).toBe(429);
      await respelled.body?.cancel();
      // Another key still gets streams, up to the total.
      for (let i = 0; i < 10; i++) streams.push(await openSse(`${t.baseUrl}/v1/events`, bearer(SECOND_KEY)));
      expect(streams.every((s) => s.status === 200)).toBe(true);
      const overTotal = await t.api<{ code: string }>('GET', '/v1/events', undefined, { apiKey: SECOND_KEY });
      expect([overTotal.status, overTotal.body.code]).toEqual([429, 'TOO_MANY_STREAMS']);
      expect(await t.metric('voxgate_sse_streams_dropped_total', { reason: 'key_cap' })).toBe(2);
      expect(await t.metric('voxgate_sse_streams_dropped_total', { reason: 'total_cap' })).toBe(1);
      expect(await t.metric('voxgate_sse_clients')).toBe(30);

      const healthy = await readyDevice(t, '02:00:00:00:0f:01');
      const chatty = await readyDevice(t, '02:00:00:00:0f:02');
      let delivered = 0;
      const off = t.gw.bus.subscribe((e) => {
        if (e.deviceId === chatty.deviceId && e.type === 'device.message') delivered++;
      });
      const flood = 300;
      for (let i = 0; i < flood; i++)
        chatty.sendRaw(JSON.stringify({ session_id: chatty.sessionId, type: 'listen', state: 'detect', text: 'x'.repeat(4000), i }));

      // The healthy device answers while the flood is on its way.
      const call = await t.api<{ isError: boolean }>('POST', `/v1/devices/${healthy.deviceId}/tools/self.audio_speaker.set_volume/call`, {
        arguments: { volume: 40 },
      });
      expect([call.status, call.body.isError]).toEqual([200, false]);

      const dropped = () => t.metric('voxgate_events_dropped_total', { reason: 'device_rate' });
      await expect.poll(async () => delivered + (await dropped()), { timeout: 20_000 }).toBe(flood);
      off();
      expect(delivered).toBeGreaterThanOrEqual(5);
      expect(delivered).toBeLessThanOrEqual(6);
      expect(await dropped()).toBe(flood - delivered);
      // One warning for the whole flood, naming the device.
      const warnings = t.logs.filter((l) => l['deviceId'] === chatty.deviceId && String(l['msg']).includes('per-device rate'));
      expect(warnings.length).toBe(1);

      // Every reader got the chatty device's admitted events, and the healthy device's online/ready.
      const first = streams[0]!;
      const seen: string[] = [];
      while (seen.filter((x) => x === `${chatty.deviceId} device.message`).length < delivered) {
        const e = await first.events.next(10_000);
        seen.push(`${(JSON.parse(e.data) as { deviceId: string }).deviceId} ${e.event}`);
      }
      expect(seen).toContain(`${healthy.deviceId} device.ready`);
      healthy.terminate();
      chatty.terminate();
    } finally {
      for (const s of streams) s.close();
      await t.close();
    }
  });

  it('serializes each event once, however many readers it has', async () => {
    const t = await startTestGateway();
    const streams: SseStream[] = [];
    try {
      for (let i = 0; i < 5; i++) streams.push(await openSse(`${t.baseUrl}/v1/events`, bearer(TEST_API_KEY)));
      await expect.poll(() => t.metric('voxgate_sse_clients')).toBe(5);
      let serialized = 0;
      // JSON.stringify reads the getter once per serialization.
      const data = {
        get probe() {
          serialized++;
          return 'p';
        },
      };
      t.gw.bus.publish('device.notification', '02:00:00:00:0f:05', data);
      for (const s of streams) expect(JSON.parse((await s.events.next()).data)).toMatchObject({ data: { probe: 'p' } });
      expect(serialized).toBe(1);
    } finally {
      for (const s of streams) s.close();
      await t.close();
    }
  });

  it('drops a reader whose unsent bytes pass the bound, and counts it', async () => {
    const t = await startTestGateway({ events: { maxBufferedBytes: 64 * 1024 } });
    try {
      const slow = await openSse(`${t.baseUrl}/v1/events`, bearer(TEST_API_KEY));
      const healthy = await openSse(`${t.baseUrl}/v1/events?type=device.online`, bearer(TEST_API_KEY));
      await expect.poll(() => t.metric('voxgate_sse_clients')).toBe(2);
      // Published in one synchronous burst: the reader (this process) cannot drain its socket meanwhile, so the
      // kernel buffers fill and the rest queues in the gateway, past the bound.
      const blob = 'b'.repeat(100_000);
      for (let i = 0; i < 200; i++) t.gw.bus.publish('device.notification', '02:00:00:00:0f:03', { method: 'n', params: { blob, i } });
      expect(await t.metric('voxgate_sse_streams_dropped_total', { reason: 'slow' })).toBe(1);
      await expect.poll(() => t.metric('voxgate_sse_clients')).toBe(1);
      // The filtered stream buffered nothing and stays.
      t.gw.bus.publish('device.online', '02:00:00:00:0f:04', {});
      expect(JSON.parse((await healthy.events.next()).data)).toMatchObject({ deviceId: '02:00:00:00:0f:04' });
      slow.close();
      healthy.close();
    } finally {
      await t.close();
    }
  });
});
