import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { DeviceSession } from '../../src/devices/session.js';
import { startTestGateway, type TestGateway } from '../../../test/support/gateway-harness.js';
import { ReferenceDevice } from '../../../test/support/reference-device.js';

type How = 'websocket' | 'mqtt';
let mac = 0x10;
const nextMac = () => `02:00:00:00:0d:${(mac++).toString(16).padStart(2, '0')}`;

/**
 * Issue 8, defect 1: one frame from one device must not end the process (every device with it). The
 * frames themselves: ../devices/session-frames.test.ts; here, that both links put the safety net around each handler.
 */
describe('hostile frames: deep nesting, and the safety net around each frame handler', () => {
  let t: TestGateway;
  const devices: ReferenceDevice[] = [];

  const join = async (how: How): Promise<ReferenceDevice> => {
    const d = new ReferenceDevice({ deviceId: nextMac() });
    devices.push(d);
    const ready = t.nextEvent('device.ready', d.deviceId);
    if (how === 'websocket') await d.connectWebSocket(t.wsUrl);
    else await d.connectMqtt(t.mqttUrl, { clientId: `GID_test@@@${d.deviceId.replace(/:/g, '_')}@@@${d.clientId}` });
    await ready;
    return d;
  };
  const setVolume = (d: ReferenceDevice, volume: number) =>
    t.api<{ content: Array<{ text: string }> }>('POST', `/v1/devices/${d.deviceId}/tools/self.audio_speaker.set_volume/call`, { arguments: { volume } });

  beforeAll(async () => {
    t = await startTestGateway();
  });
  afterEach(() => {
    vi.restoreAllMocks();
    for (const d of devices.splice(0)) d.terminate();
  });
  afterAll(() => t.close());

  it.each<How>(['websocket', 'mqtt'])('an unexpected throw in a frame handler over %s closes that connection only, logged and counted', async (how) => {
    const victim = await join(how);
    const healthy = await join(how);
    const original = DeviceSession.prototype.onText;
    // A fault no input should cause: injected, since every known cause is fixed at its root.
    vi.spyOn(DeviceSession.prototype, 'onText').mockImplementation(function (this: DeviceSession, text: string) {
      if (text.includes('"inject-fault"')) throw new RangeError('injected fault');
      original.call(this, text);
    });
    const before = await t.metric('voxgate_frame_handler_errors_total', { transport: how });
    const offline = t.nextEvent('device.offline', victim.deviceId);

    victim.sendRaw('{"type":"inject-fault"}');
    await offline;

    expect(await t.metric('voxgate_frame_handler_errors_total', { transport: how })).toBe(before + 1);
    const line = t.logs.find((l) => l['msg'] === 'unexpected error handling a device frame; closing this connection' && l['deviceId'] === victim.deviceId);
    expect(line?.['level']).toBe(50);
    const r = await setVolume(healthy, 44);
    expect(r.status).toBe(200);
    expect(healthy.volume).toBe(44);
  });
});
