import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { encodeBinaryFrame, verifyDeviceToken } from '@voxgate/protocol';
import { afterAll, afterEach, beforeAll, describe, expect, it, onTestFinished } from 'vitest';
import { startTestGateway, type TestGateway } from '../../../test/support/gateway-harness.js';
import { ReferenceDevice } from '../../../test/support/reference-device.js';
import { VoiceServerDouble } from '../../../test/support/voice-server.js';
import { deferred, until, withTimeout } from '../../../test/support/wait.js';

const SECRET = 'voice-server-auth-key';
let mac = 0x10;
const nextMac = () => `02:00:00:00:0a:${(mac++).toString(16).padStart(2, '0')}`;

/** Opus-like frames: distinct bytes per frame so a reorder or a changed byte shows. */
const frame = (i: number, size = 120) => Buffer.from(Array.from({ length: size }, (_, k) => (i * 31 + k) & 0xff));

describe('voice relay: WebSocket devices through Voxgate to a voice server', () => {
  let vs: VoiceServerDouble;
  let t: TestGateway;
  const devices: ReferenceDevice[] = [];
  const device = () => {
    const d = new ReferenceDevice({ deviceId: nextMac() });
    devices.push(d);
    return d;
  };

  beforeAll(async () => {
    // The double checks the token the way xiaozhi-esp32-server's AuthManager does.
    vs = await VoiceServerDouble.start({
      authorize: (h) => {
        const auth = String(h['authorization'] ?? '');
        if (!auth.startsWith('Bearer ')) return false;
        const r = verifyDeviceToken(SECRET, auth.slice(7), String(h['client-id']), String(h['device-id']), {
          nowSeconds: Date.now() / 1000,
          maxAgeSeconds: 3600,
        });
        return r.ok;
      },
    });
    t = await startTestGateway({ voice: { mode: 'relay', upstream: { url: vs.url, hmacSecret: SECRET } } });
  });
  afterEach(() => {
    for (const d of devices.splice(0)) d.terminate();
  });
  afterAll(async () => {
    await t.close();
    await vs.close();
  });

  it.each([1, 2, 3] as const)('protocol %i: hello from the voice server, JSON both ways, audio both ways byte-exact', async (version) => {
    const d = device();
    const ready = t.nextEvent('device.ready', d.deviceId);
    const upConn = vs.nextConnection();
    await d.connectWebSocket(t.wsUrl, { protocolVersion: version });
    const up = await upConn;

    // The upstream saw the device's identity, its protocol version and an HMAC token it accepts.
    expect(up.headers['device-id']).toBe(d.deviceId);
    expect(up.headers['client-id']).toBe(d.clientId);
    expect(up.headers['protocol-version']).toBe(String(version));
    expect(up.json[0]).toMatchObject({ type: 'hello', version, transport: 'websocket', features: { mcp: true } });
    // The device got the voice server's hello: its session id and audio params.
    expect(d.received[0]).toMatchObject({ type: 'hello', transport: 'websocket', session_id: up.sessionId, audio_params: { sample_rate: 24000 } });
    expect(d.sessionId).toBe(up.sessionId);
    // The device's MCP session is still Voxgate's, started after the hello.
    await ready;

    // JSON up (listen) and down (stt, tts).
    d.sendRaw(JSON.stringify({ session_id: d.sessionId, type: 'listen', state: 'detect', text: '你好小智' }));
    expect(await up.nextJson((m) => m['type'] === 'listen')).toMatchObject({ state: 'detect', text: '你好小智' });
    const stt = await d.waitForFrame((f) => f['type'] === 'stt');
    expect(stt['text']).toBe('你好小智');
    await d.waitForFrame((f) => f['type'] === 'tts' && f['state'] === 'stop');

    // Audio up, echoed down: every frame arrives unchanged, in order.
    const sent = Array.from({ length: 20 }, (_, i) => encodeBinaryFrame(version, { payload: frame(i), timestampMs: i * 60 }));
    for (const f of sent) d.sendRaw(f, { binary: true });
    for (const f of sent) expect((await up.nextAudio()).equals(f)).toBe(true);
    await until(() => d.audioReceived.length >= sent.length, 'echoed audio at the device');
    expect(d.audioReceived.map((b) => b.toString('hex'))).toEqual(sent.map((b) => b.toString('hex')));
    expect(await t.metric('voxgate_voice_audio_frames_total', { direction: 'up' })).toBeGreaterThanOrEqual(20);
  });

  it("answers the voice server's initialize and tools/list from the cache, and runs its tools/call beside an HTTP call", async () => {
    const d = device();
    const ready = t.nextEvent('device.ready', d.deviceId);
    const upConn = vs.nextConnection();
    await d.connectWebSocket(t.wsUrl);
    const up = await upConn;
    await ready;
    const initsBefore = d.mcpReceived.filter((p) => p['method'] === 'initialize').length;
    const listsBefore = d.mcpReceived.filter((p) => p['method'] === 'tools/list').length;

    const init = await up.mcp('initialize', { protocolVersion: '2024-11-05', capabilities: {}, clientInfo: { name: 'XiaozhiClient', version: '1.0.0' } });
    expect(init).toMatchObject({ id: 1, result: { protocolVersion: '2024-11-05', serverInfo: { name: 'sim-board' } } });
    const page = await up.mcp('tools/list');
    const names = (page['result'] as { tools: Array<{ name: string }> }).tools.map((x) => x.name);
    expect(names).toContain('self.audio_speaker.set_volume');
    expect(names).not.toContain('self.reboot'); // user-only, not asked for
    const withUser = await up.mcp('tools/list', { withUserTools: true });
    expect((withUser['result'] as { tools: Array<{ name: string }> }).tools.map((x) => x.name)).toContain('self.reboot');
    // Any other method reaches the device under a gateway id; its answer comes back under the server's.
    const ping = await up.mcp('ping');
    expect(ping).toMatchObject({ id: 4, error: { message: 'Method not implemented: ping' } });
    const pingAtDevice = d.mcpReceived.find((p) => p['method'] === 'ping')!;
    expect(Number.isInteger(pingAtDevice['id'])).toBe(true);
    // Neither initialize nor tools/list reached the device.
    expect(d.mcpReceived.filter((p) => p['method'] === 'initialize')).toHaveLength(initsBefore);
    expect(d.mcpReceived.filter((p) => p['method'] === 'tools/list')).toHaveLength(listsBefore);

    // An HTTP call and the voice server's call in flight together: each gets its own answer.
    d.holdReplies();
    const http = t.api<{ content: Array<{ text: string }> }>('POST', `/v1/devices/${d.deviceId}/tools/self.get_device_status/call`, { arguments: {} });
    const upCall = up.mcp('tools/call', { name: 'self.audio_speaker.set_volume', arguments: { volume: 33 } });
    await until(() => d.heldReplies + d.mcpReceived.filter((p) => p['method'] === 'tools/call').length >= 2, 'both calls at the device');
    d.releaseReplies();
    const [h, u] = await Promise.all([http, upCall]);
    expect(h.status).toBe(200);
    expect(u).toMatchObject({ id: 5, result: { content: [{ type: 'text', text: 'true' }], isError: false } });
    expect(d.volume).toBe(33);
    const ids = d.mcpReceived.map((p) => p['id']).filter((x) => x !== undefined);
    expect(new Set(ids).size).toBe(ids.length); // the device never saw one id twice
  });

  it("a voice server's initialize sent before its hello (xiaozhi-esp32-server can) is answered, not dropped", async () => {
    const early = await VoiceServerDouble.start({ initializeBeforeHello: true });
    const gw = await startTestGateway({ voice: { mode: 'relay', upstream: { url: early.url } } });
    onTestFinished(async () => {
      await gw.close();
      await early.close();
    });
    const d = device();
    const upConn = early.nextConnection();
    await d.connectWebSocket(gw.wsUrl);
    const up = await upConn;
    const init = await withTimeout(up.earlyInitialize!, 10_000, 'the answer to the early initialize');
    expect(init).toMatchObject({ id: 1, result: { protocolVersion: '2024-11-05', serverInfo: { name: 'sim-board' } } });
    const page = await up.mcp('tools/list');
    expect((page['result'] as { tools: Array<{ name: string }> }).tools.map((x) => x.name)).toContain('self.audio_speaker.set_volume');
  });

  it('closes the voice server side when the device goes, and the device when the voice server goes', async () => {
    const a = device();
    let upConn = vs.nextConnection();
    await a.connectWebSocket(t.wsUrl);
    const upA = await upConn;
    a.terminate();
    await withTimeout(upA.closed.promise, 5000, 'the upstream to close after the device');

    const b = device();
    upConn = vs.nextConnection();
    await b.connectWebSocket(t.wsUrl);
    const upB = await upConn;
    upB.close(1000, 'bye');
    const closed = await withTimeout(b.closed(), 5000, 'the device to be closed after the upstream');
    expect(closed.code).toBe(1000);
    await until(async () => (await t.metric('voxgate_voice_sessions_ended_total', { reason: 'upstream_closed' })) >= 1, 'ended metric');
  });
});

describe('voice relay: backpressure and many sessions', () => {
  it('a voice server that stops reading costs only dropped (counted) audio; every frame is relayed or counted', async () => {
    const vs = await VoiceServerDouble.start({ echoAudio: false });
    const t = await startTestGateway({ voice: { mode: 'relay', upstream: { url: vs.url }, maxBufferedBytes: 1024 } });
    const d = new ReferenceDevice({ deviceId: nextMac() });
    try {
      const upConn = vs.nextConnection();
      await d.connectWebSocket(t.wsUrl);
      const up = await upConn;
      up.ws.pause(); // the voice server stops reading: the gateway's socket to it fills up
      const n = 3000;
      for (let i = 0; i < n; i++) d.sendRaw(frame(i, 2000), { binary: true });
      await until(async () => (await t.metric('voxgate_voice_audio_dropped_total', { direction: 'up', reason: 'backpressure' })) > 0, 'backpressure drops');
      // The gateway keeps serving while the voice server is stuck.
      expect((await fetch(`${t.baseUrl}/healthz`)).status).toBeLessThan(500);
      up.ws.resume();
      const relayed = async () => t.metric('voxgate_voice_audio_frames_total', { direction: 'up' });
      const dropped = async () => t.metric('voxgate_voice_audio_dropped_total', { direction: 'up' });
      await until(async () => (await relayed()) + (await dropped()) === n, 'every frame relayed or dropped');
      await until(async () => up.audio.length === (await relayed()), 'the relayed frames at the voice server');
      // What arrived is a subsequence of what was sent, in order, unchanged.
      let k = 0;
      for (const got of up.audio) {
        while (k < n && !frame(k, 2000).equals(got)) k++;
        expect(k).toBeLessThan(n);
        k++;
      }
    } finally {
      d.terminate();
      await t.close();
      await vs.close();
    }
  });

  it('50 concurrent voice sessions with audio at the 60 ms frame rate lose nothing', async () => {
    const vs = await VoiceServerDouble.start();
    const t = await startTestGateway({ voice: { mode: 'relay', upstream: { url: vs.url } } });
    const ds = Array.from({ length: 50 }, () => new ReferenceDevice({ deviceId: nextMac() }));
    try {
      await Promise.all(ds.map((d) => d.connectWebSocket(t.wsUrl, { protocolVersion: 3 })));
      expect(vs.openCount).toBe(50);
      const frames = 10;
      for (let i = 0; i < frames; i++) {
        for (const [n, d] of ds.entries()) d.sendRaw(encodeBinaryFrame(3, { payload: frame(n * 100 + i) }), { binary: true });
        await new Promise((r) => setTimeout(r, 60)); // the device's frame pace (pacing the sender, not waiting for a result)
      }
      await until(() => ds.every((d) => d.audioReceived.length === frames), 'every echoed frame at every device', 20_000);
      for (const [n, d] of ds.entries())
        expect(d.audioReceived.map((b) => b.subarray(4).toString('hex'))).toEqual(Array.from({ length: frames }, (_, i) => frame(n * 100 + i).toString('hex')));
      expect(await t.metric('voxgate_voice_audio_dropped_total')).toBe(0);
      expect(await t.metric('voxgate_voice_sessions_active')).toBe(50);
    } finally {
      for (const d of ds) d.terminate();
      await t.close();
      await vs.close();
    }
  });
});

describe('voice relay: the voice server refusing or unreachable', () => {
  it('a refused upgrade and a silent server each give the device an alert it can show, then close', async () => {
    const refusing = await VoiceServerDouble.start({ authorize: () => false });
    const silent = await VoiceServerDouble.start({ silent: true });
    const t1 = await startTestGateway({ voice: { mode: 'relay', upstream: { url: refusing.url, token: 'static-token-1' } } });
    const t2 = await startTestGateway({ voice: { mode: 'relay', upstream: { url: silent.url, connectTimeoutMs: 300 } } });
    try {
      for (const [t, outcome] of [
        [t1, 'upstream_refused'],
        [t2, 'upstream_timeout'],
      ] as const) {
        const d = new ReferenceDevice({ deviceId: nextMac() });
        const alert = deferred<Record<string, unknown>>();
        void d.waitForFrame((f) => f['type'] === 'alert', 10_000).then(alert.resolve, alert.reject);
        await expect(d.connectWebSocket(t.wsUrl, { helloTimeoutMs: 10_000 })).rejects.toThrow();
        expect(await alert.promise).toMatchObject({ type: 'alert', status: 'error', emotion: 'sad' });
        expect((await d.closed()).code).toBe(4005);
        expect(await t.metric('voxgate_voice_sessions_total', { outcome })).toBe(1);
        // The token never reaches a log line.
        expect(JSON.stringify(t.logs)).not.toContain('static-token-1');
      }
      expect(refusing.refused).toBe(1);
    } finally {
      await Promise.all([t1.close(), t2.close()]);
      await Promise.all([refusing.close(), silent.close()]);
    }
  });
});

describe('voice relay: limits and configuration', () => {
  it('a hello past voice.maxSessions gets an alert, and the sessions already open go on', async () => {
    const vs = await VoiceServerDouble.start();
    const t = await startTestGateway({ voice: { mode: 'relay', upstream: { url: vs.url }, maxSessions: 1 } });
    const a = new ReferenceDevice({ deviceId: nextMac() });
    const b = new ReferenceDevice({ deviceId: nextMac() });
    try {
      await a.connectWebSocket(t.wsUrl);
      const alert = b.waitForFrame((f) => f['type'] === 'alert', 10_000);
      await expect(b.connectWebSocket(t.wsUrl)).rejects.toThrow();
      expect(await alert).toMatchObject({ status: 'error', message: expect.stringContaining('busy') as unknown });
      expect(await t.metric('voxgate_voice_sessions_total', { outcome: 'busy' })).toBe(1);
      a.sendRaw(Buffer.from([1, 2, 3]), { binary: true });
      await until(() => a.audioReceived.length === 1, 'the open session still relays');
    } finally {
      a.terminate();
      b.terminate();
      await t.close();
      await vs.close();
    }
  });

  it('a WebSocket device claiming transport "udp" still gets a WebSocket session: no UDP key, no binding', async () => {
    const vs = await VoiceServerDouble.start();
    const t = await startTestGateway({ voice: { mode: 'relay', upstream: { url: vs.url } } });
    const d = new ReferenceDevice({ deviceId: nextMac() });
    try {
      await d.connectWebSocket(t.wsUrl, { skipHello: true });
      d.sendRaw(
        JSON.stringify({ type: 'hello', version: 3, transport: 'udp', audio_params: { format: 'opus', sample_rate: 16000, channels: 1, frame_duration: 60 } }),
      );
      const hello = await d.waitForFrame((f) => f['type'] === 'hello');
      expect(hello['transport']).toBe('websocket');
      expect(hello['udp']).toBeUndefined();
      expect(t.gw.voice!.udp!.bindingCount).toBe(0);
    } finally {
      d.terminate();
      await t.close();
      await vs.close();
    }
  });

  it('a hello flood while the voice server is connecting opens one upstream connection, not many', async () => {
    const vs = await VoiceServerDouble.start({ silent: true });
    const t = await startTestGateway({ voice: { mode: 'relay', upstream: { url: vs.url, connectTimeoutMs: 60_000 } } });
    const d = new ReferenceDevice({ deviceId: nextMac() });
    try {
      await d.connectWebSocket(t.wsUrl, { skipHello: true });
      const hello = JSON.stringify({
        type: 'hello',
        version: 1,
        transport: 'websocket',
        audio_params: { format: 'opus', sample_rate: 16000, channels: 1, frame_duration: 60 },
      });
      for (let i = 0; i < 20; i++) d.sendRaw(hello);
      await until(async () => (await t.metric('voxgate_voice_sessions_total', { outcome: 'duplicate_hello' })) === 19, 'the duplicates counted');
      await vs.nextConnection();
      expect(vs.all).toHaveLength(1);
    } finally {
      d.terminate();
      await t.close();
      await vs.close();
    }
  });

  it("the voice server's MCP requests in flight are capped per session; the rest are answered busy at once", async () => {
    const vs = await VoiceServerDouble.start();
    const t = await startTestGateway({ calls: { queueLimit: 64 }, voice: { mode: 'relay', upstream: { url: vs.url } } });
    const d = new ReferenceDevice({ deviceId: nextMac() });
    try {
      const ready = t.nextEvent('device.ready', d.deviceId);
      const upConn = vs.nextConnection();
      await d.connectWebSocket(t.wsUrl);
      const up = await upConn;
      await ready;
      d.holdReplies();
      const calls = Array.from({ length: 20 }, (_, i) => up.mcp('tools/call', { name: 'self.audio_speaker.set_volume', arguments: { volume: i } }));
      const busy = await Promise.all(calls.slice(16));
      for (const b of busy) expect(b['error']).toMatchObject({ message: expect.stringContaining('in flight') as unknown });
      await until(() => d.heldReplies >= 1, 'the first call at the device');
      d.releaseReplies();
      // The device runs one call at a time: release each held reply until all 16 are answered.
      const all = Promise.all(calls.slice(0, 16));
      let settled = false;
      void all.then(() => (settled = true));
      await until(() => {
        d.releaseReplies();
        d.holdReplies();
        return settled;
      }, 'the 16 admitted calls answered');
      for (const r of await all) expect(r['result']).toMatchObject({ isError: false });
    } finally {
      d.terminate();
      await t.close();
      await vs.close();
    }
  });

  it('relay mode needs the upstream URL, and one credential kind', async () => {
    const { loadConfig, ConfigError } = await import('../../src/config.js');
    const dir = mkdtempSync(join(tmpdir(), 'voxgate-voice-config-'));
    onTestFinished(() => rmSync(dir, { recursive: true, force: true }));
    writeFileSync(join(dir, 'c.json'), '{}');
    const env = { GATEWAY_CONFIG: join(dir, 'c.json') };
    expect(() => loadConfig(env, { voice: { mode: 'relay' } })).toThrow(ConfigError);
    expect(() => loadConfig(env, { voice: { mode: 'relay', upstream: { url: 'ws://x/', token: 'a-token-1', hmacSecret: 'a-secret-1' } } })).toThrow(/not both/);
    let message = '';
    try {
      loadConfig({ ...env, GATEWAY_VOICE_MODE: 'relay', GATEWAY_VOICE_UPSTREAM_URL: 'http://x/', GATEWAY_VOICE_UPSTREAM_HMAC_SECRET: 'hmac-secret-value-1' });
    } catch (e) {
      message = (e as Error).message;
    }
    expect(message).toContain('voice.upstream.url');
    expect(message).not.toContain('hmac-secret-value-1');
    const ok = loadConfig({ ...env, GATEWAY_VOICE_MODE: 'relay', GATEWAY_VOICE_UPSTREAM_URL: 'ws://voice:8000/xiaozhi/v1/', GATEWAY_VOICE_UDP_PORT: '9884' });
    expect(ok.voice).toMatchObject({ mode: 'relay', udp: { port: 9884 }, idleTimeoutMs: 120_000 });
    // The example in examples/voice-relay/ is a valid configuration.
    const example = loadConfig({ GATEWAY_CONFIG: fileURLToPath(new URL('../../../examples/voice-relay/gateway.config.json', import.meta.url)) });
    expect(example.voice).toMatchObject({ mode: 'relay', exposeHubTools: true });
  });
});

describe("voice relay: the voice server's vision endpoint", () => {
  const VISION = { url: 'http://vision.example/mcp/vision/explain', token: 'upstream-vision-token' };
  const initParams = { protocolVersion: '2024-11-05', capabilities: { vision: VISION }, clientInfo: { name: 'XiaozhiClient', version: '1.0.0' } };

  it("is applied to the device (re-initialize) when Voxgate has no vision of its own; Voxgate's wins when it has", async () => {
    const vs = await VoiceServerDouble.start();
    const plain = await startTestGateway({ voice: { mode: 'relay', upstream: { url: vs.url } } });
    const withVision = await startTestGateway({ vision: { url: 'http://127.0.0.1:9/vision/explain' }, voice: { mode: 'relay', upstream: { url: vs.url } } });
    const devices: ReferenceDevice[] = [];
    try {
      for (const [t, outcome] of [
        [plain, 'applied'],
        [withVision, 'gateway'],
      ] as const) {
        const d = new ReferenceDevice({ deviceId: nextMac(), boardName: 'cam-board' });
        devices.push(d);
        const ready = t.nextEvent('device.ready', d.deviceId);
        const upConn = vs.nextConnection();
        await d.connectWebSocket(t.wsUrl);
        const up = await upConn;
        await ready;
        const reply = await up.mcp('initialize', initParams);
        expect(reply['result']).toMatchObject({ serverInfo: { name: 'cam-board' }, _meta: { 'voxgate/vision': outcome } });
        if (outcome === 'applied') {
          expect(d.vision).toEqual(VISION);
          expect(d.mcpReceived.filter((p) => p['method'] === 'initialize')).toHaveLength(2);
        } else {
          expect(d.vision?.url).toBe('http://127.0.0.1:9/vision/explain');
          expect(d.mcpReceived.filter((p) => p['method'] === 'initialize')).toHaveLength(1);
        }
        expect(JSON.stringify(t.logs)).not.toContain('upstream-vision-token');
      }
    } finally {
      for (const d of devices) d.terminate();
      await Promise.all([plain.close(), withVision.close()]);
      await vs.close();
    }
  });
});

describe('voice relay: fleet tools for the voice server (voice.exposeHubTools)', () => {
  it("lists the hub's tools after the device's own and runs them in Voxgate: a hosted server and another device", async () => {
    const vs = await VoiceServerDouble.start();
    const t = await startTestGateway({
      mcp: { servers: { utils: { type: 'builtin', tools: ['calculator'] } } },
      voice: { mode: 'relay', upstream: { url: vs.url }, exposeHubTools: true },
    });
    const kitchen = new ReferenceDevice({ deviceId: nextMac() });
    const hallway = new ReferenceDevice({ deviceId: nextMac() });
    try {
      await t.gw.hubStarted;
      for (const d of [hallway, kitchen]) {
        const ready = t.nextEvent('device.ready', d.deviceId);
        await d.connectWebSocket(t.wsUrl);
        await ready;
      }
      const up = vs.all.find((c) => c.headers['device-id'] === kitchen.deviceId)!;
      // Walk every page, as xiaozhi-esp32-server does.
      const names: string[] = [];
      let cursor: string | undefined;
      for (let page = 0; page < 20; page++) {
        const r = (await up.mcp('tools/list', cursor ? { cursor } : undefined))['result'] as { tools: Array<{ name: string }>; nextCursor?: string };
        names.push(...r.tools.map((x) => x.name));
        cursor = r.nextCursor;
        if (!cursor) break;
      }
      const compact = (id: string) => id.replace(/:/g, '');
      expect(names[0]).toBe('self.get_device_status'); // the device's own first, under their own names
      expect(names).toContain('mcp__utils__calculator');
      expect(names).toContain('device_call');
      const hallwayVolume = names.find((n) => n.startsWith(`device__${compact(hallway.deviceId)}__`) && n.includes('set_volume'));
      expect(hallwayVolume).toBeDefined();
      expect(names.some((n) => n.startsWith(`device__${compact(kitchen.deviceId)}__`))).toBe(false);

      const calc = await up.mcp('tools/call', { name: 'mcp__utils__calculator', arguments: { expression: '6 * 7' } });
      expect(calc).toMatchObject({ result: { content: [{ type: 'text', text: '42' }], isError: false } });
      const lamp = await up.mcp('tools/call', { name: hallwayVolume!, arguments: { volume: 7 } });
      expect(lamp).toMatchObject({ result: { isError: false } });
      expect(hallway.volume).toBe(7);
      expect(kitchen.mcpReceived.filter((p) => p['method'] === 'tools/call')).toHaveLength(0);
      expect(await t.metric('voxgate_voice_upstream_mcp_total', { method: 'tools/call', answer: 'hub' })).toBe(2);
    } finally {
      kitchen.terminate();
      hallway.terminate();
      await t.close();
      await vs.close();
    }
  });
});
