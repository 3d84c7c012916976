import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MAX_HELD_FRAMES } from '../../src/devices/read-budget.js';
import { startTestGateway, type TestGateway } from '../../../test/support/gateway-harness.js';
import { joinDevice } from '../../../test/support/join-device.js';
import { ReferenceDevice } from '../../../test/support/reference-device.js';

/**
 * One device floods unsolicited frames (requests the gateway answers "Method not found", one per frame) over a real
 * socket, while another is called the whole time. Past its budget the flooder's link stops reading: its frames wait in
 * its own socket, none is dropped, every one is answered in the order sent, and the other device's calls all succeed.
 * More frames are sent than the session would ever hold (MAX_HELD_FRAMES), so a link that went on reading would have
 * dropped some (`over_rate`): reading really paused.
 */
const RATE = 2000;
const FRAMES = MAX_HELD_FRAMES + 2000;

describe('a device past its unsolicited-frame budget', () => {
  let t: TestGateway;
  const devices: ReferenceDevice[] = [];
  let mac = 0;

  const join = (how: 'websocket' | 'mqtt'): Promise<ReferenceDevice> => {
    const d = new ReferenceDevice({ deviceId: `02:00:00:00:0b:${(mac++).toString(16).padStart(2, '0')}` });
    devices.push(d);
    return joinDevice(t, d, how, 'rb');
  };

  beforeAll(async () => {
    t = await startTestGateway({ frames: { devicePerSecond: RATE, deviceBurst: 20 } });
  });
  afterAll(async () => {
    for (const d of devices) d.terminate();
    await t.close();
  });

  for (const transport of ['websocket', 'mqtt'] as const) {
    it(`${transport}: is paused, not dropped: every frame answered in order, the other device served throughout`, async () => {
      const flooder = await join(transport);
      const honest = await join(transport);
      const pausedBefore = await t.metric('voxgate_device_reads_paused_total', { transport });

      let flooding = true;
      const honestCalls = { ok: 0, failed: [] as string[] };
      const callLoop = (async () => {
        for (let v = 0; flooding; v = (v + 1) % 100) {
          const r = await t.api('POST', `/v1/devices/${honest.deviceId}/tools/self.audio_speaker.set_volume/call`, { arguments: { volume: v } });
          if (r.status === 200 && honest.volume === v) honestCalls.ok++;
          else honestCalls.failed.push(`${r.status} ${JSON.stringify(r.body)}`);
        }
      })();

      const prefix = `${transport}-flood-`;
      for (let i = 0; i < FRAMES; i++) flooder.sendMcp({ jsonrpc: '2.0', id: `${prefix}${i}`, method: 'flood/x' });
      await flooder.waitForMcp((p) => p['id'] === `${prefix}${FRAMES - 1}`, 120_000);
      flooding = false;
      await callLoop;

      const answered = flooder.mcpReceived.map((p) => p['id']).filter((id): id is string => typeof id === 'string' && id.startsWith(prefix));
      expect(answered).toEqual(Array.from({ length: FRAMES }, (_, i) => `${prefix}${i}`));
      expect(await t.metric('voxgate_device_reads_paused_total', { transport })).toBeGreaterThan(pausedBefore);
      expect(await t.metric('voxgate_frames_rejected_total', { reason: 'over_rate' })).toBe(0);
      expect(t.logs.some((l) => l['reason'] === 'frame_rate' && l['deviceId'] === flooder.deviceId)).toBe(true);
      expect(honestCalls.failed).toEqual([]);
      expect(honestCalls.ok).toBeGreaterThan(0);

      // The flooder is still connected, and its own calls (replies: never budgeted) are answered.
      expect(flooder.connected).toBe(true);
      const r = await t.api('POST', `/v1/devices/${flooder.deviceId}/tools/self.get_device_status/call`, { arguments: {} });
      expect(r.status).toBe(200);
    }, 180_000);
  }

  it('websocket: audio with no voice session counts too; every frame is still read, in order', async () => {
    const flooder = await join('websocket');
    const pausedBefore = await t.metric('voxgate_device_reads_paused_total', { transport: 'websocket' });
    const bytesBefore = await t.metric('voxgate_audio_bytes_received_total');
    const audio = Buffer.alloc(200, 7);
    for (let i = 0; i < FRAMES; i++) flooder.sendRaw(audio, { binary: true });
    // Sent after all the audio: answered once every frame before it was read.
    flooder.sendMcp({ jsonrpc: '2.0', id: 'after-audio', method: 'flood/x' });
    await flooder.waitForMcp((p) => p['id'] === 'after-audio', 120_000);
    expect(await t.metric('voxgate_audio_bytes_received_total')).toBe(bytesBefore + FRAMES * audio.length);
    expect(await t.metric('voxgate_device_reads_paused_total', { transport: 'websocket' })).toBeGreaterThan(pausedBefore);
    expect(await t.metric('voxgate_frames_rejected_total', { reason: 'over_rate' })).toBe(0);
  }, 180_000);
});
