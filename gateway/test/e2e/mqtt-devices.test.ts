import { connect, type MqttClient } from 'mqtt';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startTestGateway, TEST_API_KEY, type TestGateway } from '../../../test/support/gateway-harness.js';
import { ReferenceDevice, referenceTools, type RefTool } from '../../../test/support/reference-device.js';
import { once } from '../../../test/support/wait.js';

const SECRET = 'mqtt-device-secret-0123456789';
let mac = 0x20;
const nextMac = () => `02:00:00:00:01:${(mac++).toString(16).padStart(2, '0')}`;

interface OtaMqtt {
  mqtt: { endpoint: string; client_id: string; username: string; password: string; publish_topic: string; subscribe_topic: string };
}

describe('reference-firmware devices over MQTT (embedded broker)', () => {
  let t: TestGateway;
  const cleanup: Array<() => void> = [];

  /** Ask the OTA endpoint for MQTT credentials, as the device does at boot. */
  const credentials = async (d: ReferenceDevice) => {
    const res = await fetch(`${t.baseUrl}/xiaozhi/ota/`, {
      method: 'POST',
      headers: { 'device-id': d.deviceId, 'client-id': d.clientId, 'content-type': 'application/json' },
      body: JSON.stringify({ application: { version: '1.7.6' } }),
    });
    expect(res.status).toBe(200);
    return ((await res.json()) as OtaMqtt).mqtt;
  };
  const onlineDevice = async (opts: { extraTools?: number } = {}) => {
    const d = new ReferenceDevice({ deviceId: nextMac(), ...opts });
    cleanup.push(() => d.terminate());
    const c = await credentials(d);
    const ready = t.nextEvent('device.ready', d.deviceId);
    await d.connectMqtt(t.mqttUrl, { clientId: c.client_id, username: c.username, password: c.password, publishTopic: c.publish_topic });
    await ready;
    return { d, c };
  };
  const backend = async (password = TEST_API_KEY): Promise<MqttClient> => {
    const client = connect(t.mqttUrl, { clientId: `backend-${Math.random()}`, username: 'backend', password, reconnectPeriod: 0 });
    cleanup.push(() => client.end(true));
    await once(client, 'connect');
    return client;
  };

  beforeAll(async () => {
    // Enrollment open: each new device id collects its credentials on its first OTA check.
    t = await startTestGateway({ deviceAuth: 'hmac', deviceSecret: SECRET, enrollment: { policy: 'open' }, ota: { transport: 'mqtt' } });
  });
  afterEach(() => {
    for (const f of cleanup.splice(0)) f();
  });
  afterAll(() => t.close());

  it('initializes and lists right after CONNECT, without hello or subscription, and calls tools', async () => {
    const { d, c } = await onlineDevice({ extraTools: 60 });
    expect(c.publish_topic).toBe('device-server');
    expect(c.subscribe_topic).toBe(`devices/p2p/${d.deviceId.replace(/:/g, '_')}`);
    expect(c.client_id).toBe(`GID_voxgate@@@${d.deviceId.replace(/:/g, '_')}@@@${d.clientId}`);
    expect(d.received.some((f) => f['type'] === 'hello')).toBe(false);
    expect(d.mcpReceived[0]?.['method']).toBe('initialize');
    expect(d.mcpReceived.filter((p) => p['method'] === 'tools/list').length).toBeGreaterThanOrEqual(3);

    const info = await t.api<{ transport: string; state: string; toolCount: number }>('GET', `/v1/devices/${d.deviceId}`);
    expect(info.body).toMatchObject({ transport: 'mqtt', state: 'ready' });
    const r = await t.api<{ content: Array<{ text: string }> }>('POST', `/v1/devices/${d.deviceId}/tools/self.audio_speaker.set_volume/call`, {
      arguments: { volume: 77 },
    });
    expect(r.status).toBe(200);
    expect(r.body.content[0]?.text).toBe('true');
    expect(d.volume).toBe(77);
    expect(await t.metric('voxgate_devices_connected', { transport: 'mqtt' })).toBeGreaterThanOrEqual(1);
  });

  it("ends the firmware's voice-channel wait at once (no 10 s stall, no error alert) and keeps the MCP channel", async () => {
    const { d } = await onlineDevice();
    // The firmware's OpenAudioChannel: hello, then the main task waits (10 s) for a valid UDP server hello.
    const opened = d.openAudioChannel();
    const hello = await d.waitForFrame((f) => f['type'] === 'hello');
    const goodbye = await d.waitForFrame((f) => f['type'] === 'goodbye');
    expect(goodbye['session_id']).toBe(hello['session_id']);
    expect(await opened).toBe(false);
    // It stopped waiting because the hello was accepted and the UDP connect failed, not at the timeout.
    expect(d.lastAudioChannelFailure).toBe('udp_connect');
    expect(d.networkErrors).toEqual([]);
    expect(d.audioChannelOpen).toBe(false);
    const r = await t.api('POST', `/v1/devices/${d.deviceId}/tools/self.audio_speaker.set_volume/call`, { arguments: { volume: 12 } });
    expect(r.status).toBe(200);
  });

  it('answers a hello flood a handful of times, drops the rest counted, and the device keeps serving', async () => {
    const { d } = await onlineDevice();
    const hello = JSON.stringify({
      type: 'hello',
      version: 3,
      transport: 'udp',
      audio_params: { format: 'opus', sample_rate: 16000, channels: 1, frame_duration: 60 },
    });
    const dropped = () => t.metric('voxgate_frames_rejected_total', { reason: 'hello_rate' });
    const before = await dropped();
    const start = Date.now();
    for (let i = 0; i < 200; i++) d.sendRaw(hello);
    // The calls after the flood are answered in order behind it: once this one is, every hello has been handled.
    const r = await t.api('POST', `/v1/devices/${d.deviceId}/tools/self.audio_speaker.set_volume/call`, { arguments: { volume: 21 } });
    expect(r.status).toBe(200);
    const answered = d.received.filter((f) => f['type'] === 'hello').length;
    // HELLO_RATE: a burst of 5, then one per 2 s (however long this machine took).
    const allowed = 5 + Math.ceil((Date.now() - start) / 2000);
    expect(answered).toBeGreaterThanOrEqual(5);
    expect(answered).toBeLessThanOrEqual(allowed);
    expect(await dropped()).toBe(before + 200 - answered);
  });

  it('refuses bad credentials with CONNACK "not authorized"', async () => {
    const d = new ReferenceDevice({ deviceId: nextMac() });
    const c = await credentials(d);
    await expect(d.connectMqtt(t.mqttUrl, { clientId: c.client_id, username: c.username, password: 'wrong' })).rejects.toMatchObject({ code: 5 });
    await expect(d.connectMqtt(t.mqttUrl, { clientId: c.client_id })).rejects.toMatchObject({ code: 5 });
    const stranger = connect(t.mqttUrl, { clientId: 'stranger', username: 'x', password: 'not-a-key', reconnectPeriod: 0 });
    const [err] = await once<[Error & { code?: number }]>(stranger, 'error');
    expect(err.code).toBe(5);
    stranger.end(true);
    expect(await t.metric('voxgate_device_auth_refused_total', { transport: 'mqtt', reason: 'bad_password' })).toBeGreaterThanOrEqual(1);
  });

  it("disconnects a device that publishes to another device's topic, and refuses foreign subscriptions", async () => {
    const { d: victim } = await onlineDevice();
    const { d: rogue } = await onlineDevice();
    const inbox = `devices/p2p/${victim.deviceId.replace(/:/g, '_')}`;
    const before = victim.received.length;
    const offline = t.nextEvent('device.offline', rogue.deviceId);
    rogue.sendRaw(JSON.stringify({ type: 'mcp', payload: { jsonrpc: '2.0', id: 1, method: 'self.reboot' } }), { topic: inbox });
    await rogue.closed();
    await offline;
    expect(victim.received.length).toBe(before);
    expect(await t.metric('voxgate_device_auth_refused_total', { reason: 'publish_denied' })).toBeGreaterThanOrEqual(1);

    const b = await backend();
    // SUBACK 0x80 for topics outside the backend's ACL; mqtt.js turns that into a rejected subscribe.
    await expect(b.subscribeAsync('device-server')).rejects.toThrow(/Subscribe error/);
    await expect(b.subscribeAsync(inbox)).rejects.toThrow(/Subscribe error/);
    expect((await b.subscribeAsync('voxgate/events/#')).map((g) => g.qos)).toEqual([0]);
    expect(await t.metric('voxgate_device_auth_refused_total', { reason: 'subscribe_denied' })).toBe(2);
  });

  it('fans events out to a backend subscriber on voxgate/events/<deviceId>/<type>', async () => {
    const b = await backend();
    await b.subscribeAsync('voxgate/events/#');
    const seen: Array<{ topic: string; type: string; deviceId: string }> = [];
    const gotReady = new Promise<void>((resolve) =>
      b.on('message', (topic, payload) => {
        const e = JSON.parse(payload.toString()) as { type: string; deviceId: string };
        seen.push({ topic, type: e.type, deviceId: e.deviceId });
        if (e.type === 'device.ready') resolve();
      }),
    );
    const { d } = await onlineDevice();
    await gotReady;
    expect(seen).toContainEqual({ topic: `voxgate/events/${d.deviceId}/device.online`, type: 'device.online', deviceId: d.deviceId });
    expect(seen).toContainEqual({ topic: `voxgate/events/${d.deviceId}/device.ready`, type: 'device.ready', deviceId: d.deviceId });
  });

  it('takes a 70 KiB result (over the old 64 KiB limit); refuses a reply over mqtt.maxPacketBytes alone, failing its call at once', async () => {
    const big = 'x'.repeat(300 * 1024);
    const tools: RefTool[] = [
      {
        name: 'self.dump',
        description: 'A large result',
        properties: { kib: { type: 'integer' } },
        run: (args) => (args['kib'] === 300 ? big : 'y'.repeat(70 * 1024)),
      },
      ...referenceTools(),
    ];
    const d = new ReferenceDevice({ deviceId: nextMac(), tools });
    cleanup.push(() => d.terminate());
    const ready = t.nextEvent('device.ready', d.deviceId);
    const c = await credentials(d);
    await d.connectMqtt(t.mqttUrl, { clientId: c.client_id, username: c.username, password: c.password, publishTopic: c.publish_topic });
    await ready;

    const ok = await t.api<{ content: Array<{ text: string }> }>('POST', `/v1/devices/${d.deviceId}/tools/self.dump/call`, { arguments: { kib: 70 } });
    expect(ok.status).toBe(200);
    expect(ok.body.content[0]?.text).toHaveLength(70 * 1024);

    const before = await t.metric('voxgate_frames_rejected_total', { reason: 'too_large' });
    const r = await t.api<{ code: string; detail: string }>('POST', `/v1/devices/${d.deviceId}/tools/self.dump/call`, {
      arguments: { kib: 300 },
      timeoutMs: 60_000,
    });
    expect([r.status, r.body.code]).toEqual([502, 'DEVICE_ERROR']);
    expect(r.body.detail).toContain('exceeds the 262144-byte limit');
    expect(await t.metric('voxgate_frames_rejected_total', { reason: 'too_large' })).toBe(before + 1);
    // The device stays connected and keeps working.
    expect(d.connected).toBe(true);
    const after = await t.api('POST', `/v1/devices/${d.deviceId}/tools/self.audio_speaker.set_volume/call`, { arguments: { volume: 1 } });
    expect(after.status).toBe(200);
  });

  it('counts every message over mqtt.maxPacketBytes, and writes their lines within the bad-input budget of the device', async () => {
    const { d } = await onlineDevice();
    const before = await t.metric('voxgate_frames_rejected_total', { reason: 'too_large' });
    // Each is skipped as it streams by: the line about it was unbounded (one per 256 KiB sent, from every device).
    const big = 'z'.repeat(300 * 1024);
    for (let i = 0; i < 40; i++) d.sendRaw(big);
    await expect.poll(() => t.metric('voxgate_frames_rejected_total', { reason: 'too_large' })).toBe(before + 40);
    const lines = t.logs.filter((l) => l['msg'] === 'device message over the size limit refused' && l['deviceId'] === d.deviceId);
    expect(lines.length).toBeGreaterThan(0);
    expect(lines.length).toBeLessThanOrEqual(20);
    expect(d.connected).toBe(true);
  });

  it('fails pending calls at once when an MQTT device drops', async () => {
    const { d } = await onlineDevice();
    d.holdReplies();
    const pending = t.api<{ code: string }>('POST', `/v1/devices/${d.deviceId}/tools/self.audio_speaker.set_volume/call`, { arguments: { volume: 2 } });
    await d.waitForMcp((p) => p['method'] === 'tools/call');
    d.terminate();
    const r = await pending;
    expect([r.status, r.body.code]).toEqual([503, 'DEVICE_OFFLINE']);
  });
});
