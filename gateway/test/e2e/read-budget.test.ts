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

/** Calls `d` (set_volume, each checked on the device) one after another until `stop`: how many succeeded, and what failed. */
function callUntilStopped(t: TestGateway, d: ReferenceDevice): { stop(): Promise<{ ok: number; failed: string[] }> } {
  let calling = true;
  const result = { ok: 0, failed: [] as string[] };
  const loop = (async () => {
    for (let v = 0; calling; v = (v + 1) % 100) {
      const r = await t.api('POST', `/v1/devices/${d.deviceId}/tools/self.audio_speaker.set_volume/call`, { arguments: { volume: v } });
      if (r.status === 200 && d.volume === v) result.ok++;
      else result.failed.push(`${r.status} ${JSON.stringify(r.body)}`);
    }
  })();
  return {
    stop: async () => {
      calling = false;
      await loop;
      return result;
    },
  };
}
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

      const honestCalls = callUntilStopped(t, honest);

      const prefix = `${transport}-flood-`;
      for (let i = 0; i < FRAMES; i++) flooder.sendMcp({ jsonrpc: '2.0', id: `${prefix}${i}`, method: 'flood/x' });
      await flooder.waitForMcp((p) => p['id'] === `${prefix}${FRAMES - 1}`, 120_000);
      const calls = await honestCalls.stop();

      const answered = flooder.mcpReceived.map((p) => p['id']).filter((id): id is string => typeof id === 'string' && id.startsWith(prefix));
      expect(answered).toEqual(Array.from({ length: FRAMES }, (_, i) => `${prefix}${i}`));
      expect(await t.metric('voxgate_device_reads_paused_total', { transport })).toBeGreaterThan(pausedBefore);
      expect(await t.metric('voxgate_frames_rejected_total', { reason: 'over_rate' })).toBe(0);
      expect(t.logs.some((l) => l['reason'] === 'frame_rate' && l['deviceId'] === flooder.deviceId)).toBe(true);
      expect(calls.failed).toEqual([]);
      expect(calls.ok).toBeGreaterThan(0);

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

/**
 * Many devices from one address, each far under its own budget, flood together (WebSocket and MQTT): past the
 * address's shared budget each of them pauses, none is dropped, every frame is answered in order. A device from
 * another address (127.0.0.2) has a budget of its own: its calls and its own requests are served meanwhile.
 */
describe('devices from one address past their shared budget', () => {
  const PER_FLOODER = 300;
  let t: TestGateway;
  const devices: ReferenceDevice[] = [];

  beforeAll(async () => {
    // Each device may send 1 000 at once; the address 100 at once and 400 a second.
    t = await startTestGateway({ frames: { devicePerSecond: 1000, deviceBurst: 1000, addressPerSecond: 400, addressBurst: 100 } });
  });
  afterAll(async () => {
    for (const d of devices) d.terminate();
    await t.close();
  });

  it('are paused together, not dropped; a device elsewhere is served throughout', async () => {
    const flooders: ReferenceDevice[] = [];
    for (const [i, how] of (['websocket', 'websocket', 'websocket', 'websocket', 'mqtt', 'mqtt'] as const).entries()) {
      const d = new ReferenceDevice({ deviceId: `02:00:00:00:0c:${i.toString(16).padStart(2, '0')}` });
      devices.push(d);
      flooders.push(await joinDevice(t, d, how, 'rb'));
    }
    const honest = new ReferenceDevice({ deviceId: '02:00:00:00:0c:ff' });
    devices.push(honest);
    const ready = t.nextEvent('device.ready', honest.deviceId);
    await honest.connectWebSocket(t.wsUrl, { localAddress: '127.0.0.2' });
    await ready;
    const byDeviceBefore = await t.metric('voxgate_device_reads_paused_total', { budget: 'device' });
    const byAddressBefore = await t.metric('voxgate_device_reads_paused_total', { budget: 'address' });

    const honestCalls = callUntilStopped(t, honest);

    for (let i = 0; i < PER_FLOODER; i++) for (const [n, f] of flooders.entries()) f.sendMcp({ jsonrpc: '2.0', id: `f${n}-${i}`, method: 'flood/x' });
    // The device elsewhere sends unsolicited frames of its own: under its own and its address's burst, never paused.
    for (let i = 0; i < 50; i++) honest.sendMcp({ jsonrpc: '2.0', id: `h-${i}`, method: 'flood/x' });
    await honest.waitForMcp((p) => p['id'] === 'h-49', 60_000);
    for (const [n, f] of flooders.entries()) await f.waitForMcp((p) => p['id'] === `f${n}-${PER_FLOODER - 1}`, 120_000);
    const calls = await honestCalls.stop();

    for (const [n, f] of flooders.entries()) {
      const answered = f.mcpReceived.map((p) => p['id']).filter((id): id is string => typeof id === 'string' && id.startsWith(`f${n}-`));
      expect(answered).toEqual(Array.from({ length: PER_FLOODER }, (_, i) => `f${n}-${i}`));
    }
    const honestAnswered = honest.mcpReceived.map((p) => p['id']).filter((id) => typeof id === 'string' && id.startsWith('h-'));
    expect(honestAnswered).toHaveLength(50);
    // Only the address's budget paused anyone: each device stayed inside its own.
    expect(await t.metric('voxgate_device_reads_paused_total', { budget: 'address' })).toBeGreaterThan(byAddressBefore);
    expect(await t.metric('voxgate_device_reads_paused_total', { budget: 'device' })).toBe(byDeviceBefore);
    expect(await t.metric('voxgate_frames_rejected_total', { reason: 'over_rate' })).toBe(0);
    const lines = t.logs.filter((l) => l['reason'] === 'frame_rate');
    expect(lines.some((l) => l['budget'] === 'address' && flooders.some((f) => f.deviceId === l['deviceId']))).toBe(true);
    expect(lines.some((l) => l['deviceId'] === honest.deviceId)).toBe(false);
    expect(calls.failed).toEqual([]);
    expect(calls.ok).toBeGreaterThan(0);
  }, 180_000);
});
