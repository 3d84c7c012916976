import { randomBytes } from 'node:crypto';
import { createSocket } from 'node:dgram';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { decodeBinaryFrame } from '@voxgate/protocol';
import { startTestGateway, type TestGateway } from '../../../test/support/gateway-harness.js';
import { ReferenceDevice } from '../../../test/support/reference-device.js';
import { UdpDeviceChannel } from '../../../test/support/udp-device.js';
import { VoiceServerDouble, type VoiceServerConnection } from '../../../test/support/voice-server.js';
import { until, withTimeout } from '../../../test/support/wait.js';

const SECRET = 'mqtt-voice-secret-0123456789';
let mac = 0x30;
const nextMac = () => `02:00:00:00:0b:${(mac++).toString(16).padStart(2, '0')}`;
// An Opus packet as the firmware makes (TOC 0x58: SILK wideband, one 60 ms frame, mono), then bytes distinct per frame.
const opus = (tag: number, i: number, size = 80) => Buffer.from(Array.from({ length: size }, (_, k) => (k === 0 ? 0x58 : (tag * 7 + i * 13 + k) & 0xff)));

interface OtaMqtt {
  mqtt: { client_id: string; username: string; password: string; publish_topic: string };
}

describe('voice relay: MQTT + UDP devices', () => {
  let vs: VoiceServerDouble;
  let t: TestGateway;
  const cleanup: Array<() => void> = [];

  /** The device's OTA check at `gw`, then its MQTT connection there with what the check returned, until it is ready. */
  const connectTo = async (d: ReferenceDevice, gw: TestGateway) => {
    const res = await fetch(`${gw.baseUrl}/xiaozhi/ota/`, {
      method: 'POST',
      headers: { 'device-id': d.deviceId, 'client-id': d.clientId, 'content-type': 'application/json' },
      body: JSON.stringify({ application: { version: '1.7.6' } }),
    });
    const c = ((await res.json()) as OtaMqtt).mqtt;
    const ready = gw.nextEvent('device.ready', d.deviceId);
    await d.connectMqtt(gw.mqttUrl, { clientId: c.client_id, username: c.username, password: c.password, publishTopic: c.publish_topic });
    await ready;
  };
  const onlineDevice = async (gw: TestGateway = t) => {
    const d = new ReferenceDevice({ deviceId: nextMac() });
    cleanup.push(() => d.terminate());
    await connectTo(d, gw);
    return d;
  };
  /** The device opens its audio channel: hello over MQTT, the server hello with the udp block, a UDP socket. */
  const voiceSession = async (d: ReferenceDevice, server: VoiceServerDouble = vs): Promise<{ up: VoiceServerConnection; udp: UdpDeviceChannel }> => {
    expect(await d.openAudioChannel()).toBe(true);
    let up = await server.nextConnection();
    while (up.headers['device-id'] !== d.deviceId) up = await server.nextConnection(); // skip other tests' sessions
    const udp = await UdpDeviceChannel.open(d.udp!);
    cleanup.push(() => udp.close());
    return { up, udp };
  };

  beforeAll(async () => {
    vs = await VoiceServerDouble.start();
    t = await startTestGateway({
      deviceAuth: 'hmac',
      deviceSecret: SECRET,
      enrollment: { policy: 'open' },
      ota: { transport: 'mqtt' },
      voice: { mode: 'relay', upstream: { url: vs.url, token: 'upstream-token-1' }, udp: { publicHost: '127.0.0.1' } },
    });
  });
  afterEach(() => {
    for (const f of cleanup.splice(0)) f();
  });
  afterAll(async () => {
    await t.close();
    await vs.close();
  });

  it("the voice server's JSON to an MQTT device that stopped reading is dropped past voice.maxBufferedBytes, counted", async () => {
    const server = await VoiceServerDouble.start();
    const gw = await startTestGateway({
      deviceAuth: 'hmac',
      deviceSecret: SECRET,
      enrollment: { policy: 'open' },
      ota: { transport: 'mqtt' },
      voice: { mode: 'relay', upstream: { url: server.url }, udp: { publicHost: '127.0.0.1' }, maxBufferedBytes: 64 * 1024 },
    });
    try {
      const d = await onlineDevice(gw);
      const { up } = await voiceSession(d, server);
      d.pauseReading();
      const dropped = () => gw.metric('voxgate_voice_audio_dropped_total', { direction: 'down', reason: 'backpressure_json' });
      // 40 MB of sentences: far more than the sockets' buffers and the bound hold. Before, every byte was queued for the
      // device in the broker's connection (the link reported nothing buffered), however long it stayed stalled.
      const n = 400;
      const text = 'x'.repeat(100_000);
      for (let i = 0; i < n; i++) up.ws.send(JSON.stringify({ type: 'tts', state: 'sentence_start', text, i }));
      await until(async () => (await dropped()) > 0, 'JSON dropped for the stalled device');
      // The MCP channel is not the relay's: once the device reads again it still answers calls.
      d.pauseReading(false);
      const r = await gw.api('POST', `/v1/devices/${d.deviceId}/tools/self.audio_speaker.set_volume/call`, { arguments: { volume: 9 } });
      expect(r.status).toBe(200);
      // Every sentence the voice server sent is either delivered or counted as dropped, once the relay has read them all.
      const delivered = () => d.received.filter((f) => f['type'] === 'tts').length;
      await until(async () => delivered() + (await dropped()) === n, 'every sentence delivered or counted');
      expect(delivered()).toBeLessThan(n);
    } finally {
      await gw.close();
      await server.close();
    }
  });

  it('answers the hello with a udp block, relays audio both ways over AES-128-CTR, byte-exact, in order', async () => {
    const d = await onlineDevice();
    const { up, udp } = await voiceSession(d);
    // Upstream: a WebSocket session in binary protocol 2, marked as coming from an MQTT gateway.
    expect(up.headers['protocol-version']).toBe('2');
    expect(up.headers['authorization']).toBe('Bearer upstream-token-1');
    expect(up.url).toContain('from=mqtt_gateway');
    expect(up.json[0]).toMatchObject({ type: 'hello', version: 2, transport: 'websocket' });
    const hello = d.received.find((f) => f['type'] === 'hello')!;
    expect(hello).toMatchObject({ transport: 'udp', session_id: up.sessionId, udp: { server: '127.0.0.1', encryption: 'aes-128-ctr' } });
    expect(d.udp!.key).toMatch(/^[0-9a-f]{32}$/);

    // JSON both ways over MQTT.
    d.sendRaw(JSON.stringify({ session_id: d.sessionId, type: 'listen', state: 'detect', text: 'hi' }));
    expect(await up.nextJson((m) => m['type'] === 'listen')).toMatchObject({ state: 'detect', text: 'hi' });
    expect((await d.waitForFrame((f) => f['type'] === 'stt'))['text']).toBe('hi');

    const frames = Array.from({ length: 12 }, (_, i) => opus(1, i));
    frames.forEach((f, i) => udp.sendAudio(f, 1000 + i * 60));
    for (let i = 0; i < frames.length; i++) {
      const f = decodeBinaryFrame(2, await up.nextAudio(), 4096);
      expect(f.ok && f.value.payload.equals(frames[i]!)).toBe(true);
      expect(f.ok && f.value.timestampMs).toBe(1000 + i * 60);
    }
    // The double echoes: re-encrypted with the gateway's own sequence, 1, 2, 3...
    await until(() => udp.received.length >= frames.length, 'echoed audio at the device');
    expect(udp.received.map((r) => r.opus.toString('hex'))).toEqual(frames.map((f) => f.toString('hex')));
    expect(udp.received.map((r) => r.sequence)).toEqual(frames.map((_, i) => i + 1));
    expect(udp.dropped).toBe(0);
    // MCP over MQTT still Voxgate's, during the voice session.
    const call = await t.api('POST', `/v1/devices/${d.deviceId}/tools/self.audio_speaker.set_volume/call`, { arguments: { volume: 12 } });
    expect(call.status).toBe(200);
  });

  it("xiaozhi-esp32-server's downlink layout (type 1, size at 2, sequence at 4; sendAudioHandle.py) reaches the device", async () => {
    const server = await VoiceServerDouble.start({ echoAudio: false });
    const gw = await startTestGateway({
      deviceAuth: 'hmac',
      deviceSecret: SECRET,
      enrollment: { policy: 'open' },
      ota: { transport: 'mqtt' },
      voice: { mode: 'relay', upstream: { url: server.url }, udp: { publicHost: '127.0.0.1' } },
    });
    try {
      const d = await onlineDevice(gw);
      const { up, udp } = await voiceSession(d, server);
      udp.sendAudio(opus(5, 0), 0); // the device's first packet tells the gateway where it listens
      await up.nextAudio();
      // The header that server writes for connections marked from=mqtt_gateway: not protocol 2's version and type.
      const xinnan = (payload: Buffer, sequence: number, timestamp: number) => {
        const h = Buffer.alloc(16);
        h[0] = 1;
        h.writeUInt16BE(payload.length, 2);
        h.writeUInt32BE(sequence, 4);
        h.writeUInt32BE(timestamp, 8);
        h.writeUInt32BE(payload.length, 12);
        return Buffer.concat([h, payload]);
      };
      const frames = [opus(6, 0), opus(6, 1, 1), opus(6, 2, 200)];
      frames.forEach((f, i) => up.sendAudio(xinnan(f, i, 5000 + i * 60)));
      await until(() => udp.received.length >= frames.length, 'the voice server audio at the device');
      expect(udp.received.map((r) => r.opus.toString('hex'))).toEqual(frames.map((f) => f.toString('hex')));
      expect(udp.received.map((r) => r.timestamp)).toEqual([5000, 5060, 5120]);
      expect(udp.received.map((r) => r.sequence)).toEqual([1, 2, 3]);
    } finally {
      await gw.close();
      await server.close();
    }
  });

  it('drops wrong lengths, replayed and old sequences, and packets for no session; then carries on', async () => {
    const d = await onlineDevice();
    const { up, udp } = await voiceSession(d);
    const before = async (reason: string) => t.metric('voxgate_voice_audio_dropped_total', { direction: 'up', reason });
    const [len0, old0, ssrc0] = [await before('bad_length'), await before('old_sequence'), await before('unknown_ssrc')];

    const good = udp.packet(opus(2, 0), 0);
    udp.send(good);
    await up.nextAudio();
    const short = Buffer.from(udp.packet(opus(2, 1), 60));
    short.writeUInt16BE(short.readUInt16BE(2) + 5, 2); // declares more than it carries
    udp.send(short);
    udp.send(good); // replayed
    const stranger = Buffer.from(udp.packet(opus(2, 2), 120));
    stranger.writeUInt32BE((udp.ssrc + 1) >>> 0, 4);
    udp.send(stranger);
    const last = opus(2, 3);
    udp.sendAudio(last, 180);
    const next = decodeBinaryFrame(2, await up.nextAudio(), 4096);
    expect(next.ok && next.value.payload.equals(last)).toBe(true);
    await until(async () => (await before('unknown_ssrc')) > ssrc0, 'the stranger dropped');
    expect(await before('bad_length')).toBe(len0 + 1);
    expect(await before('old_sequence')).toBe(old0 + 1);
    expect(up.audio).toHaveLength(2);
  });

  it('garbage on the UDP port (random bytes, live ssrcs with wrong keys) is dropped, and the session goes on', async () => {
    const d = await onlineDevice();
    const { up, udp } = await voiceSession(d);
    const dropped0 = await t.metric('voxgate_voice_audio_dropped_total', { direction: 'up' });
    const junk = createSocket('udp4');
    cleanup.push(() => junk.close());
    // In batches, each counted before the next: a burst would overflow the kernel's receive buffer.
    const dropped = async () => (await t.metric('voxgate_voice_audio_dropped_total', { direction: 'up' })) - dropped0;
    for (let batch = 0; batch < 10; batch++) {
      for (let j = 0; j < 30; j++) {
        const i = batch * 30 + j;
        const p = randomBytes(i % 60);
        if (i % 3 === 0 && p.length >= 16) {
          p[0] = 1;
          p.writeUInt16BE(p.length - 16, 2);
          p.writeUInt32BE(udp.ssrc, 4);
          p.writeUInt32BE(0, 12); // sequence 0: never above the last accepted
        }
        junk.send(p, d.udp!.port, '127.0.0.1');
      }
      await until(async () => (await dropped()) === (batch + 1) * 30, `junk batch ${batch} dropped`);
    }
    expect(up.audio).toHaveLength(0);
    const good = opus(4, 0);
    udp.sendAudio(good, 60);
    const f = decodeBinaryFrame(2, await up.nextAudio(), 4096);
    expect(f.ok && f.value.payload.equals(good)).toBe(true);
  });

  it('routes by ssrc among several devices at once', async () => {
    // Opened one after another so each upstream connection is known to be its device's; then all at once.
    const sessions: Array<{ up: VoiceServerConnection; udp: UdpDeviceChannel }> = [];
    for (let i = 0; i < 3; i++) sessions.push(await voiceSession(await onlineDevice()));
    expect(new Set(sessions.map((s) => s.udp.ssrc)).size).toBe(3);
    sessions.forEach((s, tag) => {
      for (let i = 0; i < 5; i++) s.udp.sendAudio(opus(10 + tag, i), i * 60);
    });
    for (const [tag, s] of sessions.entries()) {
      for (let i = 0; i < 5; i++) {
        const f = decodeBinaryFrame(2, await s.up.nextAudio(), 4096);
        expect(f.ok && f.value.payload.equals(opus(10 + tag, i))).toBe(true);
      }
      await until(() => s.udp.received.length >= 5, 'echo');
      expect(s.udp.received.map((r) => r.opus.toString('hex'))).toEqual([0, 1, 2, 3, 4].map((i) => opus(10 + tag, i).toString('hex')));
    }
  });

  it('50 concurrent MQTT voice sessions with audio at the 60 ms frame rate lose nothing', async () => {
    const ds = await Promise.all(Array.from({ length: 50 }, () => onlineDevice()));
    expect((await Promise.all(ds.map((d) => d.openAudioChannel()))).every(Boolean)).toBe(true);
    const sessions = await Promise.all(
      ds.map(async (d) => {
        let up: VoiceServerConnection | undefined;
        await until(() => (up = vs.all.find((c) => c.headers['device-id'] === d.deviceId)) !== undefined, 'its upstream');
        const udp = await UdpDeviceChannel.open(d.udp!);
        cleanup.push(() => udp.close());
        return { up: up!, udp };
      }),
    );
    const dropped0 = await t.metric('voxgate_voice_audio_dropped_total');
    const frames = 10;
    for (let i = 0; i < frames; i++) {
      sessions.forEach((s, n) => s.udp.sendAudio(opus(n, i), i * 60));
      await new Promise((r) => setTimeout(r, 60)); // the device's frame pace (pacing the sender, not waiting for a result)
    }
    await until(() => sessions.every((s) => s.udp.received.length === frames), 'every echoed frame at every device', 20_000);
    for (const [n, s] of sessions.entries()) {
      expect(s.up.audio.map((b) => b.subarray(16).toString('hex'))).toEqual(Array.from({ length: frames }, (_, i) => opus(n, i).toString('hex')));
      expect(s.udp.received.map((r) => r.opus.toString('hex'))).toEqual(Array.from({ length: frames }, (_, i) => opus(n, i).toString('hex')));
    }
    expect(await t.metric('voxgate_voice_audio_dropped_total')).toBe(dropped0);
  });

  it('goodbye from the device closes the upstream; goodbye from the upstream reaches the device and frees the ssrc', async () => {
    const a = await onlineDevice();
    const sa = await voiceSession(a);
    a.sendRaw(JSON.stringify({ session_id: a.sessionId, type: 'goodbye' }));
    await withTimeout(sa.up.closed.promise, 5000, 'the upstream to close after the device goodbye');

    const b = await onlineDevice();
    const sb = await voiceSession(b);
    sb.up.send({ type: 'goodbye', session_id: sb.up.sessionId });
    const bye = await b.waitForFrame((f) => f['type'] === 'goodbye');
    expect(bye['session_id']).toBe(sb.up.sessionId);
    await withTimeout(sb.up.closed.promise, 5000, 'the upstream closed after its goodbye');
    const dropped = await t.metric('voxgate_voice_audio_dropped_total', { reason: 'unknown_ssrc' });
    sb.udp.sendAudio(opus(3, 0), 0);
    await until(async () => (await t.metric('voxgate_voice_audio_dropped_total', { reason: 'unknown_ssrc' })) > dropped, 'audio after goodbye dropped');
    // The MQTT link, and the device's MCP, outlive the voice session.
    expect(b.connected).toBe(true);
    expect((await t.api('POST', `/v1/devices/${b.deviceId}/tools/self.get_device_status/call`, { arguments: {} })).status).toBe(200);
  });

  it('an unreachable voice server: the device gets an alert and a goodbye, and keeps its MQTT link and MCP', async () => {
    const gone = await VoiceServerDouble.start();
    const url = gone.url;
    await gone.close(); // nothing listens there now
    const gw = await startTestGateway({
      deviceAuth: 'hmac',
      deviceSecret: SECRET,
      enrollment: { policy: 'open' },
      ota: { transport: 'mqtt' },
      voice: { mode: 'relay', upstream: { url } },
    });
    try {
      const d = await onlineDevice(gw);
      const alert = d.waitForFrame((f) => f['type'] === 'alert', 10_000);
      const bye = d.waitForFrame((f) => f['type'] === 'goodbye', 10_000);
      // The firmware's own 10 s wait for the server hello: a hello it cannot connect with ends it at once (before, only
      // an alert and a goodbye came, and the device's main task, its MCP replies with it, waited the 10 s out).
      const opened = d.openAudioChannel();
      const call = gw.api('POST', `/v1/devices/${d.deviceId}/tools/self.get_device_status/call`, { arguments: {} });
      expect(await opened).toBe(false);
      expect(d.lastAudioChannelFailure).toBe('udp_connect');
      expect(d.networkErrors).not.toContain('SERVER_TIMEOUT');
      expect((await call).status).toBe(200);
      expect(await alert).toMatchObject({ status: 'error', emotion: 'sad' });
      expect((await bye)['session_id']).toBe(d.received.find((f) => f['type'] === 'hello')!['session_id']);
      expect(await gw.metric('voxgate_voice_sessions_total', { transport: 'udp', outcome: 'upstream_error' })).toBe(1);
      expect(d.connected).toBe(true);
      expect((await gw.api('POST', `/v1/devices/${d.deviceId}/tools/self.get_device_status/call`, { arguments: {} })).status).toBe(200);
    } finally {
      await gw.close();
    }
  });

  it('a device whose audio channel outlived its session (the gateway restarted) is told goodbye when it speaks on it', async () => {
    const d = await onlineDevice();
    await voiceSession(d);
    const stale = d.sessionId;
    expect(d.audioChannelOpen).toBe(true);
    // The restarted gateway: another process with the same configuration and secret. The firmware's MQTT client
    // reconnects there and keeps its UDP channel (nothing in MqttProtocol closes it on a disconnect).
    const gw = await startTestGateway({
      deviceAuth: 'hmac',
      deviceSecret: SECRET,
      enrollment: { policy: 'open' },
      ota: { transport: 'mqtt' },
      voice: { mode: 'relay', upstream: { url: vs.url }, udp: { publicHost: '127.0.0.1' } },
    });
    try {
      await connectTo(d, gw);
      expect(d.audioChannelOpen).toBe(true);
      // The wake word on a channel the device believes open: listen start, no hello. Twice: one goodbye.
      const bye = d.waitForFrame((f) => f['type'] === 'goodbye');
      const listen = (sid: string) => d.sendRaw(JSON.stringify({ session_id: sid, type: 'listen', state: 'start', mode: 'auto' }));
      listen(stale);
      listen(stale);
      expect((await bye)['session_id']).toBe(stale);
      await until(async () => !d.audioChannelOpen, 'the device to close its audio channel');
      // Another stale id is answered too (a goodbye for it, not a second one for the first); MCP is not a channel message.
      d.sendRaw(JSON.stringify({ session_id: 'other-session', type: 'mcp', payload: { jsonrpc: '2.0', id: 99999, result: {} } }));
      listen('other-session');
      const next = await d.waitForFrame((f) => f['type'] === 'goodbye' && f['session_id'] !== stale);
      expect(next['session_id']).toBe('other-session');
      expect(d.received.filter((f) => f['type'] === 'goodbye' && f['session_id'] === stale)).toHaveLength(1);
      // The next wake word opens a fresh session on the restarted gateway.
      const { up } = await voiceSession(d);
      expect(d.sessionId).toBe(up.sessionId);
    } finally {
      await gw.close();
    }
  });

  it('a voice session with no audio for voice.idleTimeoutMs ends with a goodbye', async () => {
    const gw = await startTestGateway({
      deviceAuth: 'hmac',
      deviceSecret: SECRET,
      enrollment: { policy: 'open' },
      ota: { transport: 'mqtt' },
      voice: { mode: 'relay', upstream: { url: vs.url }, idleTimeoutMs: 300 },
    });
    try {
      const d = await onlineDevice(gw);
      const { up } = await voiceSession(d);
      const bye = await d.waitForFrame((f) => f['type'] === 'goodbye', 10_000);
      expect(bye['session_id']).toBe(up.sessionId);
      await withTimeout(up.closed.promise, 5000, 'the upstream closed');
      expect(await gw.metric('voxgate_voice_sessions_ended_total', { reason: 'idle' })).toBe(1);
    } finally {
      await gw.close();
    }
  });
});
