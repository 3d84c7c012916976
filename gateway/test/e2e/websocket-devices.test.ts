import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { verifyVisionToken } from '@voxgate/protocol';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { deviceToolRaw } from '../../src/hub/names.js';
import { startTestGateway, TEST_API_KEY, type TestGateway } from '../../../test/support/gateway-harness.js';
import { ScriptedWsDevice } from '../../../test/support/scripted-device.js';
import { ReferenceDevice, referenceTools, type RefTool } from '../../../test/support/reference-device.js';

interface ToolsBody {
  tools: Array<{ name: string; userOnly: boolean; inputSchema: Record<string, unknown> }>;
  hash: string;
}
interface CallBody {
  content: Array<{ type: string; text?: string }>;
  isError: boolean;
  durationMs: number;
}
interface ProblemBody {
  code: string;
  detail: string;
  status: number;
  errors?: Array<{ argument: string; message: string }>;
}

let mac = 0x10;
const nextMac = () => `02:00:00:00:00:${(mac++).toString(16).padStart(2, '0')}`;

describe('reference-firmware devices over WebSocket', () => {
  let t: TestGateway;
  const devices: ReferenceDevice[] = [];
  const device = (opts: Partial<ConstructorParameters<typeof ReferenceDevice>[0]> = {}) => {
    const d = new ReferenceDevice({ deviceId: nextMac(), ...opts });
    devices.push(d);
    return d;
  };
  const online = async (d: ReferenceDevice) => {
    const ready = t.nextEvent('device.ready', d.deviceId);
    await d.connectWebSocket(t.wsUrl);
    await ready;
    return d;
  };

  beforeAll(async () => {
    t = await startTestGateway({ vision: { url: 'http://127.0.0.1:9/vision/explain' }, calls: { queueLimit: 1 } });
  });
  afterEach(() => {
    for (const d of devices.splice(0)) d.terminate();
  });
  afterAll(() => t.close());

  it('answers hello first, initializes with vision, and walks 3+ pages of tools including user-only ones', async () => {
    const d = await online(device({ extraTools: 60 }));
    const first = d.received[0]!;
    expect(first).toMatchObject({ type: 'hello', transport: 'websocket' });
    expect(typeof first['session_id']).toBe('string');
    const methods = d.mcpReceived.map((p) => p['method']);
    expect(methods[0]).toBe('initialize');
    const lists = d.mcpReceived.filter((p) => p['method'] === 'tools/list');
    expect(lists.length).toBeGreaterThanOrEqual(3);
    for (const l of lists) expect(l['params']).toMatchObject({ withUserTools: true });
    for (const p of d.mcpReceived) expect(Number.isInteger(p['id'])).toBe(true);

    expect(d.vision?.url).toBe('http://127.0.0.1:9/vision/explain');
    expect(verifyVisionToken(t.gw.visionKey, d.vision!.token!, d.deviceId, Date.now() / 1000)).toBe(true);
    expect(verifyVisionToken(t.gw.visionKey, d.vision!.token!, '02:00:00:00:00:ff', Date.now() / 1000)).toBe(false);

    const r = await t.api<ToolsBody>('GET', `/v1/devices/${d.deviceId}/tools`);
    expect(r.status).toBe(200);
    const names = r.body.tools.map((x) => x.name);
    expect(new Set(names).size).toBe(names.length);
    expect(names.length).toBe(referenceTools().length + 60);
    expect(r.body.tools.find((x) => x.name === 'self.reboot')?.userOnly).toBe(true);
    expect(r.body.tools.find((x) => x.name === 'self.audio_speaker.set_volume')?.userOnly).toBe(false);
    expect(r.body.hash).toMatch(/^[A-Za-z0-9_-]{22}$/);

    const info = await t.api<Record<string, unknown>>('GET', `/v1/devices/${d.deviceId}`);
    expect(info.body).toMatchObject({
      id: d.deviceId,
      clientId: d.clientId,
      transport: 'websocket',
      online: true,
      state: 'ready',
      toolCount: names.length,
      protocolVersion: '2024-11-05',
      server: { name: 'sim-board', version: '1.7.6' },
    });
  });

  it('calls a tool and accepts every spelling of the device id', async () => {
    const d = await online(device());
    const hex = d.deviceId.replace(/:/g, '');
    for (const id of [d.deviceId, encodeURIComponent(d.deviceId), d.deviceId.replace(/:/g, '_'), d.deviceId.replace(/:/g, '-').toUpperCase(), hex]) {
      const volume = 10 + id.length;
      const r = await t.api<CallBody>('POST', `/v1/devices/${id}/tools/self.audio_speaker.set_volume/call`, { arguments: { volume } });
      expect(r.status, id).toBe(200);
      expect(r.body).toMatchObject({ content: [{ type: 'text', text: 'true' }], isError: false });
      expect(typeof r.body.durationMs).toBe('number');
      expect(d.volume).toBe(volume);
    }
    const list = await t.api<{ devices: Array<{ id: string }> }>('GET', '/v1/devices');
    expect(list.body.devices.map((x) => x.id)).toContain(d.deviceId);
  });

  it('refuses callers without a valid API key (401 problem+json)', async () => {
    for (const key of [null, 'wrong-key']) {
      const r = await t.api<ProblemBody>('GET', '/v1/devices', undefined, { apiKey: key });
      expect(r.status).toBe(401);
      expect(r.headers.get('content-type')).toContain('application/problem+json');
      expect(r.body.code).toBe('UNAUTHORIZED');
    }
  });

  it('maps unknown devices, tools and bad arguments to stable codes', async () => {
    const d = await online(device());
    const notFound = await t.api<ProblemBody>('GET', '/v1/devices/0a:0b:0c:0d:0e:0f/tools');
    expect([notFound.status, notFound.body.code]).toEqual([404, 'DEVICE_NOT_FOUND']);
    const badId = await t.api<ProblemBody>('GET', '/v1/devices/not-a-mac');
    expect([badId.status, badId.body.code]).toEqual([400, 'INVALID_REQUEST']);

    const noTool = await t.api<ProblemBody>('POST', `/v1/devices/${d.deviceId}/tools/self.nope/call`, {});
    expect([noTool.status, noTool.body.code]).toEqual([404, 'TOOL_NOT_FOUND']);

    const sentBefore = d.mcpReceived.length;
    const tooLoud = await t.api<ProblemBody>('POST', `/v1/devices/${d.deviceId}/tools/self.audio_speaker.set_volume/call`, { arguments: { volume: 101 } });
    expect([tooLoud.status, tooLoud.body.code]).toEqual([422, 'INVALID_ARGUMENTS']);
    expect(tooLoud.body.detail).toContain('volume');
    expect(tooLoud.body.detail).toContain('100');
    const missing = await t.api<ProblemBody>('POST', `/v1/devices/${d.deviceId}/tools/self.audio_speaker.set_volume/call`, { arguments: {} });
    expect(missing.status).toBe(422);
    expect(missing.body.errors?.[0]).toEqual({ argument: 'volume', message: 'is required' });
    const wrongType = await t.api<ProblemBody>('POST', `/v1/devices/${d.deviceId}/tools/self.audio_speaker.set_volume/call`, { arguments: { volume: 'loud' } });
    expect(wrongType.status).toBe(422);
    expect(d.mcpReceived.length).toBe(sentBefore); // refused before anything was sent

    expect(await t.metric('voxgate_calls_total', { outcome: 'invalid_arguments' })).toBeGreaterThanOrEqual(3);
    expect(await t.metric('voxgate_calls_total', { outcome: 'tool_not_found' })).toBeGreaterThanOrEqual(1);

    const badBody = await t.api<ProblemBody>('POST', `/v1/devices/${d.deviceId}/tools/self.audio_speaker.set_volume/call`, { arguments: [] });
    expect([badBody.status, badBody.body.code]).toEqual([400, 'INVALID_REQUEST']);
  });

  it('turns a device error (no code, unescaped quotes) into DEVICE_ERROR with the exact message', async () => {
    const d = device({
      tools: [
        ...referenceTools(),
        {
          name: 'self.fail',
          description: 'always fails',
          run: () => {
            throw new Error('bad "quoted" {json}');
          },
        },
      ],
    });
    await online(d);
    const photo = await t.api<ProblemBody>('POST', `/v1/devices/${d.deviceId}/tools/self.camera.take_photo/call`, { arguments: { question: 'what?' } });
    // The device got the vision capability, so the photo tool answers (the simulator's vision reply).
    expect(photo.status).toBe(200);
    const before = await t.metric('voxgate_frames_rejected_total', { reason: 'repaired' });
    const r = await t.api<ProblemBody>('POST', `/v1/devices/${d.deviceId}/tools/self.fail/call`, {});
    expect([r.status, r.body.code]).toEqual([502, 'DEVICE_ERROR']);
    expect(r.body.detail).toBe('bad "quoted" {json}');
    expect(await t.metric('voxgate_frames_rejected_total', { reason: 'repaired' })).toBe(before + 1);

    const rpc = await t.api<ProblemBody & { rpcCode?: number }>('POST', `/v1/devices/${d.deviceId}/rpc`, { method: 'ping' });
    expect([rpc.status, rpc.body.code, rpc.body.detail, rpc.body.rpcCode]).toEqual([502, 'DEVICE_ERROR', 'Method not implemented: ping', -32601]);
  });

  it('passes raw JSON-RPC through /rpc', async () => {
    const d = await online(device());
    const r = await t.api<{ result: { tools: unknown[] } }>('POST', `/v1/devices/${d.deviceId}/rpc`, { method: 'tools/list', params: {} });
    expect(r.status).toBe(200);
    expect(r.body.result.tools.length).toBe(referenceTools().filter((x) => !x.userOnly).length);
  });

  it('times out a call, counts and drops the late reply, and keeps working', async () => {
    const d = await online(device());
    d.holdReplies();
    const r = await t.api<ProblemBody>('POST', `/v1/devices/${d.deviceId}/tools/self.audio_speaker.set_volume/call`, {
      arguments: { volume: 5 },
      timeoutMs: 200,
    });
    expect([r.status, r.body.code]).toEqual([504, 'DEVICE_TIMEOUT']);
    const late = await t.metric('voxgate_late_replies_total');
    d.releaseReplies();
    await expect.poll(() => t.metric('voxgate_late_replies_total')).toBe(late + 1);
    const ok = await t.api<CallBody>('POST', `/v1/devices/${d.deviceId}/tools/self.audio_speaker.set_volume/call`, { arguments: { volume: 6 } });
    expect(ok.status).toBe(200);
  });

  it('queues calls one at a time and answers DEVICE_BUSY when the queue is full', async () => {
    const d = await online(device());
    d.holdReplies();
    const call = (v: number) =>
      t.api<CallBody & ProblemBody>('POST', `/v1/devices/${d.deviceId}/tools/self.audio_speaker.set_volume/call`, { arguments: { volume: v } });
    const first = call(1);
    await d.waitForMcp((p) => p['method'] === 'tools/call');
    const second = call(2); // waits in the queue (limit 1)
    await expect.poll(() => t.gw.registry.get(d.deviceId)?.pendingCalls).toBe(2);
    const third = await call(3);
    expect([third.status, third.body.code]).toEqual([429, 'DEVICE_BUSY']);
    expect(d.mcpReceived.filter((p) => p['method'] === 'tools/call').length).toBe(1); // one at a time
    d.releaseReplies();
    await d.waitForMcp((p) => p['method'] === 'tools/call' && (p['params'] as { arguments: { volume: number } }).arguments.volume === 2);
    d.releaseReplies();
    expect((await first).status).toBe(200);
    expect((await second).status).toBe(200);
    expect(d.volume).toBe(2);
  });

  it('fails a pending call when the device drops, not at its timeout, then reports DEVICE_OFFLINE', async () => {
    const d = await online(device());
    d.holdReplies();
    const pending = t.api<ProblemBody>('POST', `/v1/devices/${d.deviceId}/tools/self.audio_speaker.set_volume/call`, {
      arguments: { volume: 9 },
      timeoutMs: 30_000,
    });
    await d.waitForMcp((p) => p['method'] === 'tools/call');
    const offline = t.nextEvent('device.offline', d.deviceId);
    d.terminate();
    // No clock: a call that waited out its 30 s would answer DEVICE_TIMEOUT (504), and the test's own timeout is 60 s.
    const r = await pending;
    expect([r.status, r.body.code]).toEqual([503, 'DEVICE_OFFLINE']);
    await offline;
    const after = await t.api<ProblemBody>('POST', `/v1/devices/${d.deviceId}/tools/self.audio_speaker.set_volume/call`, { arguments: { volume: 9 } });
    expect([after.status, after.body.code]).toEqual([503, 'DEVICE_OFFLINE']);
    const info = await t.api<{ online: boolean; lastSeenAt: string }>('GET', `/v1/devices/${d.deviceId}`);
    expect(info.body.online).toBe(false);
    expect(Date.parse(info.body.lastSeenAt)).toBeGreaterThan(0);
  });

  it('lets a second connection take over (4000), failing the first one’s calls, and ignores the stale disconnect', async () => {
    const id = nextMac();
    const a = await online(device({ deviceId: id }));
    a.holdReplies();
    const pending = t.api<ProblemBody>('POST', `/v1/devices/${id}/tools/self.audio_speaker.set_volume/call`, { arguments: { volume: 1 } });
    await a.waitForMcp((p) => p['method'] === 'tools/call');
    const offlineEvents: string[] = [];
    const off = t.gw.bus.subscribe((e) => {
      if (e.deviceId === id && e.type === 'device.offline') offlineEvents.push(e.id);
    });
    const b = device({ deviceId: id });
    await online(b);
    expect((await a.closed()).code).toBe(4000);
    const r = await pending;
    expect([r.status, r.body.code]).toEqual([503, 'DEVICE_OFFLINE']);
    const info = await t.api<{ online: boolean; state: string }>('GET', `/v1/devices/${id}`);
    expect(info.body).toMatchObject({ online: true, state: 'ready' });
    expect(offlineEvents).toEqual([]);
    const ok = await t.api<CallBody>('POST', `/v1/devices/${id}/tools/self.audio_speaker.set_volume/call`, { arguments: { volume: 33 } });
    expect(ok.status).toBe(200);
    expect(b.volume).toBe(33);
    off();
  });

  it('drops a device that sends an oversized frame; the gateway and other devices go on', async () => {
    const big = await online(device());
    const other = await online(device());
    const before = await t.metric('voxgate_frames_rejected_total', { reason: 'too_large' });
    big.sendRaw(JSON.stringify({ type: 'listen', state: 'detect', text: 'x'.repeat(70 * 1024) }));
    expect((await big.closed()).code).toBe(1009);
    expect(await t.metric('voxgate_frames_rejected_total', { reason: 'too_large' })).toBe(before + 1);
    const r = await t.api<CallBody>('POST', `/v1/devices/${other.deviceId}/tools/self.audio_speaker.set_volume/call`, { arguments: { volume: 44 } });
    expect(r.status).toBe(200);
    expect((await fetch(`${t.baseUrl}/healthz`)).status).toBe(200);
  });

  it('counts malformed frames and keeps the device', async () => {
    const d = await online(device());
    const notJson = await t.metric('voxgate_frames_rejected_total', { reason: 'not_json' });
    const badEnv = await t.metric('voxgate_frames_rejected_total', { reason: 'bad_envelope' });
    d.sendRaw('{"type":"mcp", nope');
    d.sendRaw('{"type":"mcp","payload":[1,2]}');
    d.sendRaw(Buffer.from([1, 2, 3]), { binary: true });
    await expect.poll(() => t.metric('voxgate_frames_rejected_total', { reason: 'not_json' })).toBe(notJson + 1);
    await expect.poll(() => t.metric('voxgate_frames_rejected_total', { reason: 'bad_envelope' })).toBe(badEnv + 1);
    await expect.poll(() => t.metric('voxgate_audio_bytes_received_total')).toBeGreaterThanOrEqual(3);
    const r = await t.api<CallBody>('POST', `/v1/devices/${d.deviceId}/tools/self.audio_speaker.set_volume/call`, { arguments: { volume: 3 } });
    expect(r.status).toBe(200);
  });

  it('publishes device messages and notifications, and re-lists on tools/list_changed', async () => {
    const d = await online(device());
    const msg = t.nextEvent('device.message', d.deviceId);
    d.sendRaw(JSON.stringify({ session_id: d.sessionId, type: 'listen', state: 'detect', text: 'hi' }));
    expect((await msg).data).toMatchObject({ message: { type: 'listen', state: 'detect', text: 'hi' } });

    const note = t.nextEvent('device.notification', d.deviceId);
    d.notify('notifications/state_changed', { button: 'pressed' });
    expect((await note).data).toEqual({ method: 'notifications/state_changed', params: { button: 'pressed' } });

    const before = (await t.api<ToolsBody>('GET', `/v1/devices/${d.deviceId}/tools`)).body.hash;
    d.tools.push({ name: 'self.light.toggle', description: 'Toggle the light', run: () => true });
    const changed = t.nextEvent('device.tools_changed', d.deviceId);
    d.notify('notifications/tools/list_changed');
    expect((await changed).data).toMatchObject({ previousHash: before, reason: 'notification' });
    const after = await t.api<ToolsBody>('GET', `/v1/devices/${d.deviceId}/tools`);
    expect(after.body.tools.map((x) => x.name)).toContain('self.light.toggle');
    expect(after.body.hash).not.toBe(before);
  });

  it('emits tools_changed when a device comes back with a different catalog', async () => {
    const id = nextMac();
    const first = await online(device({ deviceId: id }));
    await first.close();
    const changed = t.nextEvent('device.tools_changed', id);
    await online(device({ deviceId: id, extraTools: 2 }));
    expect((await changed).data).toMatchObject({ reason: 'relisted', toolCount: referenceTools().length + 2 });
  });
  // From e2e/tools-page-cache.test.ts (the cache itself: ../devices/tools-page-cache.test.ts): every session shares one cache.
  it('parses a firmware’s pages once; a second device with the same pages gets them from the cache', async () => {
    const pages = async () => ({
      parsed: await t.metric('voxgate_tools_pages_total', { source: 'parsed' }),
      cache: await t.metric('voxgate_tools_pages_total', { source: 'cache' }),
    });
    // A catalog of its own (one changed description), so no other test has cached these pages.
    const tools = referenceTools().map((x) => (x.name === 'self.get_device_status' ? { ...x, description: `${x.description} (cache test)` } : x));
    const before = await pages();
    const a = await online(device({ tools, extraTools: 40 }));
    const first = await pages();
    expect(first.parsed - before.parsed).toBeGreaterThanOrEqual(3);
    await online(device({ tools, extraTools: 40 }));
    const second = await pages();
    expect(second.parsed).toBe(first.parsed);
    expect(second.cache - first.cache).toBe(first.parsed - before.parsed);
    const listed = await t.api<ToolsBody>('GET', `/v1/devices/${a.deviceId}/tools`);
    expect(listed.body.tools.length).toBe(a.tools.length);
  });

  // From e2e/session-device-replies.test.ts.
  it('passes normalized device content to HTTP callers and /mcp clients (counting: ../devices/session-frames.test.ts)', async () => {
    const data = Buffer.from('jpeg bytes').toString('base64');
    const firmwareImage = JSON.stringify({ type: 'image', image: JSON.stringify({ type: 'image', mimeType: 'image/jpeg', data }) });
    const id = nextMac();
    const ready = t.nextEvent('device.ready', id);
    const device = await ScriptedWsDevice.connect(t.wsUrl, id, [
      { name: 'photo', inputSchema: { type: 'object' }, result: `{"content":[${firmwareImage}],"isError":false}` },
      {
        name: 'odd',
        inputSchema: { type: 'object' },
        result: '{"content":[{"type":"text","text":42},{"type":"image"},{"type":"video","url":"x"},{"type":"text","text":"fine"}]}',
      },
    ]);
    const client = new Client({ name: 'test-host', version: '1.0.0' });
    try {
      await ready;
      const photo = await t.api<{ content: unknown[] }>('POST', `/v1/devices/${id}/tools/photo/call`, { arguments: {} });
      expect(photo.body.content).toEqual([{ type: 'image', mimeType: 'image/jpeg', data }]);
      const odd = await t.api<{ content: unknown[] }>('POST', `/v1/devices/${id}/tools/odd/call`, { arguments: {} });
      expect(odd.body.content).toEqual([
        { type: 'text', text: '42' },
        { type: 'text', text: '{"type":"image"}' },
        { type: 'text', text: '{"type":"video","url":"x"}' },
        { type: 'text', text: 'fine' },
      ]);

      await client.connect(
        new StreamableHTTPClientTransport(new URL(`${t.baseUrl}/mcp`), { requestInit: { headers: { authorization: `Bearer ${TEST_API_KEY}` } } }),
      );
      const viaMcp = await client.callTool({ name: deviceToolRaw(id, 'photo'), arguments: {} });
      expect(viaMcp.content).toEqual([{ type: 'image', mimeType: 'image/jpeg', data }]);
    } finally {
      await client.close();
      device.close();
    }
  });

  // From e2e/device-rpc.test.ts: how the /rpc route reaches the device.
  it('sends notifications/* as a notification (no id) and answers 202 at once', async () => {
    const d = await online(device());
    // The firmware ignores notifications: sent as a request, this would wait out its timeout.
    const r = await t.api<{ sent: boolean; notification: string }>('POST', `/v1/devices/${d.deviceId}/rpc`, {
      method: 'notifications/initialized',
      timeoutMs: 60_000,
    });
    expect(r.status).toBe(202);
    expect(r.body).toEqual({ sent: true, notification: 'notifications/initialized' });
    const sent = await d.waitForMcp((p) => p['method'] === 'notifications/initialized');
    expect('id' in sent).toBe(false);
    // Nothing was queued behind it: a request goes straight through.
    const list = await t.api<{ result: { tools: unknown[] } }>('POST', `/v1/devices/${d.deviceId}/rpc`, { method: 'tools/list' });
    expect(list.status).toBe(200);
  });

  it("refuses a caller's own id with a clear 400 instead of dropping it silently", async () => {
    const d = await online(device());
    const r = await t.api<{ code: string; detail: string }>('POST', `/v1/devices/${d.deviceId}/rpc`, { method: 'tools/list', id: 'mine' });
    expect([r.status, r.body.code]).toEqual([400, 'INVALID_REQUEST']);
    expect(r.body.detail).toContain('"id"');
    expect(d.mcpReceived.some((p) => p['id'] === 'mine')).toBe(false);
  });

  // From e2e/catalog-incomplete.test.ts (the setup itself: ../devices/registry.test.ts): what callers see of it.
  it('shows a device whose catalog holds a tool larger than its tools/list page as ready, with a warning in its summary', async () => {
    const huge: RefTool = { name: 'self.huge.describe', description: 'x'.repeat(9000), run: () => true };
    const ref = referenceTools().filter((x) => !x.userOnly);
    const d = device({ tools: [...ref.slice(0, 3), huge, ...ref.slice(3)] });
    const incomplete = t.nextEvent('device.catalog_incomplete', d.deviceId);
    await online(d);
    const warning = `catalog incomplete: tool after ${ref[2]!.name} refused by the device`;
    expect((await incomplete).data['error']).toMatch(/Failed to add tool self\.huge\.describe because of payload size limit/);
    const summary = await t.api<{ state: string; toolCount: number; catalogWarning?: string }>('GET', `/v1/devices/${d.deviceId}`);
    expect(summary.body).toMatchObject({ state: 'ready', toolCount: 3, catalogWarning: warning });
    const listed = await t.api<{ tools: Array<{ name: string }> }>('GET', `/v1/devices/${d.deviceId}/tools`);
    expect(listed.body.tools.map((x) => x.name)).toEqual(ref.slice(0, 3).map((x) => x.name));
    // The tools it has answer as usual.
    const call = await t.api('POST', `/v1/devices/${d.deviceId}/tools/self.get_device_status/call`, { arguments: {} });
    expect(call.status).toBe(200);
  });
});

describe('device sessions at the edges (from e2e/session-edges.test.ts; the setup cases: ../devices/registry.test.ts)', () => {
  it('answers pending calls with SHUTTING_DOWN when the gateway stops', async () => {
    const t = await startTestGateway();
    const d = new ReferenceDevice({ deviceId: '02:00:00:00:05:03' });
    const ready = t.nextEvent('device.ready', d.deviceId);
    await d.connectWebSocket(t.wsUrl);
    await ready;
    d.holdReplies();
    const pending = t.api<{ code: string }>('POST', `/v1/devices/${d.deviceId}/tools/self.audio_speaker.set_volume/call`, { arguments: { volume: 1 } });
    await d.waitForMcp((p) => p['method'] === 'tools/call');
    const closing = t.close();
    const r = await pending;
    expect([r.status, r.body.code]).toEqual([503, 'SHUTTING_DOWN']);
    expect((await d.closed()).code).toBe(1001);
    await closing;
  });

  it('logs every line with the device id and never a secret', async () => {
    const t = await startTestGateway({ deviceAuth: 'token', deviceTokens: ['super-secret-device-token'], vision: { url: 'http://127.0.0.1:9/v' } });
    try {
      const d = new ReferenceDevice({ deviceId: '02:00:00:00:05:04' });
      const ready = t.nextEvent('device.ready', d.deviceId);
      await d.connectWebSocket(t.wsUrl, { token: 'super-secret-device-token' });
      await ready;
      const deviceLines = t.logs.filter((l) => l['msg'] === 'device connected' || l['msg'] === 'device ready');
      expect(deviceLines.length).toBe(2);
      for (const l of deviceLines) expect(l['deviceId']).toBe(d.deviceId);
      const all = JSON.stringify(t.logs);
      expect(all).not.toContain('super-secret-device-token');
      expect(all).not.toContain(d.vision!.token!);
      expect(all).not.toContain('test-api-key-0123456789');
      d.terminate();
    } finally {
      await t.close();
    }
  });
});

describe('device authentication over WebSocket', () => {
  it('hmac mode: a minted token passes, a missing or foreign one gets 401 at the upgrade', async () => {
    const t = await startTestGateway({ deviceAuth: 'hmac', deviceSecret: 'device-secret-0123456789' });
    try {
      const { mintDeviceToken } = await import('@voxgate/protocol');
      const d = new ReferenceDevice({ deviceId: nextMac() });
      await expect(d.connectWebSocket(t.wsUrl)).rejects.toMatchObject({ statusCode: 401 });
      const foreign = mintDeviceToken('device-secret-0123456789', d.clientId, '02:00:00:00:00:fe', Date.now() / 1000);
      await expect(d.connectWebSocket(t.wsUrl, { token: foreign })).rejects.toMatchObject({ statusCode: 401 });
      const expired = mintDeviceToken('device-secret-0123456789', d.clientId, d.deviceId, Date.now() / 1000 - 40 * 24 * 3600);
      await expect(d.connectWebSocket(t.wsUrl, { token: expired })).rejects.toMatchObject({ statusCode: 401 });
      expect(await t.metric('voxgate_device_auth_refused_total', { transport: 'websocket' })).toBe(3);
      const ready = t.nextEvent('device.ready', d.deviceId);
      await d.connectWebSocket(t.wsUrl, { token: mintDeviceToken('device-secret-0123456789', d.clientId, d.deviceId, Date.now() / 1000), useQuery: true });
      await ready;
      d.terminate();
    } finally {
      await t.close();
    }
  });

  it('token mode: only configured tokens pass', async () => {
    const t = await startTestGateway({ deviceAuth: 'token', deviceTokens: ['tok-a', 'tok-b'] });
    try {
      const d = new ReferenceDevice({ deviceId: nextMac() });
      await expect(d.connectWebSocket(t.wsUrl, { token: 'tok-c' })).rejects.toMatchObject({ statusCode: 401 });
      const ready = t.nextEvent('device.ready', d.deviceId);
      await d.connectWebSocket(t.wsUrl, { token: 'tok-b' });
      await ready;
      d.terminate();
      expect(JSON.stringify(t.logs)).not.toContain('tok-b');
    } finally {
      await t.close();
    }
  });
});
