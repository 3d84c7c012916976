import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { DeviceSession } from '../../src/devices/session.js';
import { startTestGateway, type TestGateway } from '../../../test/support/gateway-harness.js';
import { ReferenceDevice } from '../../../test/support/reference-device.js';
import { ScriptedWsDevice } from '../../../test/support/scripted-device.js';

type How = 'websocket' | 'mqtt';
let mac = 0x10;
const nextMac = () => `02:00:00:00:0d:${(mac++).toString(16).padStart(2, '0')}`;
const nested = (depth: number) => `${'['.repeat(depth)}${']'.repeat(depth)}`;
const deepObject = (depth: number) => `${'{"a":'.repeat(depth)}1${'}'.repeat(depth)}`;

/** Issue 8, defect 1: one frame from one device must not end the process (every device with it). */
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
  /** Frames on one connection are handled in order: once this is answered, everything before it was handled. */
  let sentinels = 0;
  const handled = async (d: ReferenceDevice) => {
    const id = `sentinel-${++sentinels}`;
    d.sendMcp({ jsonrpc: '2.0', id, method: 'ping.sentinel' });
    await d.waitForMcp((p) => p['id'] === id);
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

  it.each<How>(['websocket', 'mqtt'])('the 5000-level frame and a 5000-level error.message over %s are refused; every device keeps answering', async (how) => {
    const attacker = await join(how);
    const healthy = await join(how === 'websocket' ? 'mqtt' : 'websocket');
    const before = await t.metric('voxgate_frames_rejected_total', { reason: 'too_deep' });

    attacker.sendRaw(`{"type":"mcp","payload":{"jsonrpc":"2.0","method":"n","params":{"a":${nested(5000)}}}}`);
    attacker.sendRaw(`{"session_id":"s","type":"mcp","payload":{"jsonrpc":"2.0","id":999,"error":{"message":${nested(5000)}}}}`);
    attacker.sendRaw(`{"session_id":"s","type":"mcp","payload":{"jsonrpc":"2.0","id":999,"error":{"message":${deepObject(5000)}}}}`);
    attacker.sendRaw(`{"type":"listen","state":${deepObject(5000)}}`);
    await handled(attacker);

    expect(await t.metric('voxgate_frames_rejected_total', { reason: 'too_deep' })).toBe(before + 4);
    expect(t.logs.some((l) => l['msg'] === 'frame rejected' && l['reason'] === 'too_deep' && l['deviceId'] === attacker.deviceId)).toBe(true);
    // Both devices, the attacker included, still answer calls.
    for (const [d, v] of [
      [healthy, 31],
      [attacker, 32],
    ] as const) {
      const r = await setVolume(d, v);
      expect(r.status).toBe(200);
      expect(d.volume).toBe(v);
    }
    // Nesting under the limit is still accepted (a notification reaches the bus).
    const note = t.nextEvent('device.notification', attacker.deviceId);
    attacker.notify('notifications/deep', { a: JSON.parse(nested(50)) as unknown });
    expect((await note).data['method']).toBe('notifications/deep');
  });

  it('a reply refused at the parse boundary (too deep) fails the call it answers at once, not at its timeout', async () => {
    const id = nextMac();
    const ready = t.nextEvent('device.ready', id);
    // `result` is left to the test for this one tool: the device answers with a 5000-level result.
    const device = await ScriptedWsDevice.connect(t.wsUrl, id, [{ name: 'deep', inputSchema: { type: 'object' }, result: nested(5000) }]);
    try {
      await ready;
      const r = await t.api<{ code?: string; detail?: string }>('POST', `/v1/devices/${id}/tools/deep/call`, { arguments: {}, timeoutMs: 300_000 });
      expect(r.status).toBe(502);
      expect(r.body.code).toBe('DEVICE_ERROR');
      expect(r.body.detail).toContain('too_deep');
    } finally {
      device.close();
    }
  });

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
