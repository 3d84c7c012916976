import { describe, expect, it } from 'vitest';
import { startTestGateway, TEST_API_KEY, type TestGateway } from '../../../test/support/gateway-harness.js';
import { ReferenceDevice } from '../../../test/support/reference-device.js';
import { openSse, type SseStream } from '../../../test/support/sse.js';

const bearer = (key: string) => ({ authorization: `Bearer ${key}` });

async function readyDevice(t: TestGateway, deviceId: string): Promise<ReferenceDevice> {
  const d = new ReferenceDevice({ deviceId });
  const ready = t.nextEvent('device.ready', deviceId);
  await d.connectWebSocket(t.wsUrl);
  await ready;
  return d;
}

describe('SSE fan-out under a chatty device (issue 8, defect 6)', () => {
  // The stream caps, serialization once per event and the slow-reader bound are the route's own (test/api/events.test.ts).
  it('drops a device over its event rate, and keeps answering calls and streaming', async () => {
    // One token per 100 s after a burst of 5: within this test the chatty device gets 5 (at most 6) events through.
    const t = await startTestGateway({ events: { maxStreamsPerKey: 1, devicePerSecond: 0.01, deviceBurst: 5 } });
    const streams: SseStream[] = [];
    try {
      streams.push(await openSse(`${t.baseUrl}/v1/events`, bearer(TEST_API_KEY)));
      expect(streams[0]!.status).toBe(200);
      // The configured cap reaches the route.
      const overKey = await t.api<{ code: string }>('GET', '/v1/events');
      expect([overKey.status, overKey.body.code]).toEqual([429, 'TOO_MANY_STREAMS']);

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
});
