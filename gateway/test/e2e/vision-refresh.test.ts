import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestGateway, type TestGateway } from '../../../test/support/gateway-harness.js';
import { connectMqttViaOta } from '../../../test/support/ota-mqtt.js';
import { ReferenceDevice } from '../../../test/support/reference-device.js';
import { until } from '../../../test/support/wait.js';

/**
 * The vision token expires (vision.tokenTtlSeconds); an MQTT camera stays connected for days. The gateway
 * re-sends initialize with a fresh token before expiry, through the call queue (the firmware runs one
 * thing at a time, and a repeated initialize simply replaces its explain URL and token).
 */
describe('vision token refresh', () => {
  let t: TestGateway;
  beforeAll(async () => {
    t = await startTestGateway({ ota: { transport: 'mqtt' }, vision: { url: 'http://127.0.0.1:9/vision/explain', tokenTtlSeconds: 60, refreshMs: 300 } });
  });
  afterAll(() => t.close());

  it('re-sends initialize with a fresh token, queued behind a call in flight', async () => {
    const d = new ReferenceDevice({ deviceId: '02:00:00:00:09:40' });
    try {
      const ready = t.nextEvent('device.ready', d.deviceId);
      await connectMqttViaOta(t, d);
      await ready;
      const first = d.vision?.token;
      expect(first).toBeTruthy();

      // A call in flight when the refresh comes due: the refresh waits for it.
      d.holdReplies();
      const call = t.api('POST', `/v1/devices/${d.deviceId}/tools/self.audio_speaker.set_volume/call`, { arguments: { volume: 33 } });
      await d.waitForMcp((p) => p['method'] === 'tools/call');
      await until(() => t.logs.some((l) => l['msg'] === 'vision token refresh queued' && l['deviceId'] === d.deviceId), 'the refresh to come due');
      expect(d.mcpReceived.filter((p) => p['method'] === 'initialize')).toHaveLength(1);
      d.releaseReplies();
      expect((await call).status).toBe(200);

      const again = await d.waitForMcp((p) => p['method'] === 'initialize' && p['id'] !== d.mcpReceived[0]!['id']);
      const callAt = d.mcpReceived.findIndex((p) => p['method'] === 'tools/call');
      expect(d.mcpReceived.indexOf(again)).toBeGreaterThan(callAt);
      expect(d.vision?.url).toBe('http://127.0.0.1:9/vision/explain');
      await until(() => d.vision?.token !== first, 'a fresh token on the device');
      // The device stays ready; calls keep working after the refresh.
      expect((await t.api<{ state: string }>('GET', `/v1/devices/${d.deviceId}`)).body.state).toBe('ready');
    } finally {
      d.terminate();
    }
  });
});
