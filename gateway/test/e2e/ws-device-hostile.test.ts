import { connect } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WebSocket } from 'ws';
import { startTestGateway, type TestGateway } from '../../../test/support/gateway-harness.js';
import { ReferenceDevice } from '../../../test/support/reference-device.js';
import { ScriptedWsDevice, type ScriptedTool } from '../../../test/support/scripted-device.js';
import { once, withTimeout } from '../../../test/support/wait.js';

const TOOLS: ScriptedTool[] = [{ name: 'self.echo', inputSchema: { type: 'object', properties: { v: { type: 'integer' } } } }];

describe('hostile WebSocket devices: frames no firmware sends', () => {
  let t: TestGateway;
  const devices: ScriptedWsDevice[] = [];
  let mac = 0;

  const join = async (): Promise<{ d: ScriptedWsDevice; id: string }> => {
    const deviceId = `02:00:00:00:0d:${(mac++).toString(16).padStart(2, '0')}`;
    const ready = t.nextEvent('device.ready', deviceId);
    const d = await ScriptedWsDevice.connect(t.wsUrl, deviceId, TOOLS);
    devices.push(d);
    await ready;
    return { d, id: deviceId };
  };
  const call = (deviceId: string, v: number) => t.api('POST', `/v1/devices/${deviceId}/tools/self.echo/call`, { arguments: { v } });

  beforeAll(async () => {
    t = await startTestGateway({ frames: { devicePerSecond: 100, deviceBurst: 20 } });
  });
  afterAll(async () => {
    for (const d of devices) d.close();
    await t.close();
  });

  it('a ping flood spends from the read budget like any unsolicited frame: reading pauses, every ping is still answered', async () => {
    const { d: flooder, id: flooderId } = await join();
    const other = await join();
    const pausedBefore = await t.metric('voxgate_device_reads_paused_total', { transport: 'websocket', budget: 'device' });
    // In rounds of 40, each awaited: ws itself cuts a peer with more than 60 pongs not yet written (maxPendingAutoPongs).
    let pongs = 0;
    let round: (() => void) | undefined;
    flooder.ws.on('pong', () => {
      if (++pongs % 40 === 0) round?.();
    });
    for (let r = 0; r < 5; r++) {
      const done = new Promise<void>((resolve) => (round = resolve));
      for (let i = 0; i < 40; i++) flooder.ws.ping();
      await withTimeout(done, 15_000, `pongs of round ${r}`);
    }
    expect((await call(other.id, 1)).status).toBe(200);
    expect(await t.metric('voxgate_device_reads_paused_total', { transport: 'websocket', budget: 'device' })).toBeGreaterThan(pausedBefore);
    expect(t.logs.some((l) => l['reason'] === 'frame_rate' && l['deviceId'] === flooderId)).toBe(true);
  });

  it('a message in more pieces than esp_websocket_client would cut it into ends that connection, counted and logged; the others go on', async () => {
    const { d: fragmenter, id: fragmenterId } = await join();
    const { d: chunked, id: chunkedId } = await join();
    const other = await join();
    // esp_websocket_client cuts a message into pieces of its buffer (1 KiB by default): 60 KiB arrives in 60 of them.
    const text = JSON.stringify({ type: 'mcp', payload: { jsonrpc: '2.0', method: 'notifications/big', params: { pad: 'x'.repeat(60 * 1024) } } });
    const published = t.nextEvent('device.notification', chunkedId);
    for (let at = 0; at < text.length; at += 1024) chunked.ws.send(text.slice(at, at + 1024), { fin: at + 1024 >= text.length });
    expect(((await published).data as { method: string }).method).toBe('notifications/big');
    // One byte a piece: parsing each piece costs what a whole frame does, and the read budget counts messages.
    const rejectedBefore = await t.metric('voxgate_frames_rejected_total', { reason: 'ws_protocol' });
    const closed = new Promise<number>((resolve) => fragmenter.ws.once('close', (code: number) => resolve(code)));
    for (let i = 0; i < 2000; i++) fragmenter.ws.send('x', { fin: false });
    expect(await withTimeout(closed, 15_000, 'the close')).toBe(1008);
    expect(await t.metric('voxgate_frames_rejected_total', { reason: 'ws_protocol' })).toBe(rejectedBefore + 1);
    expect(t.logs.some((l) => l['deviceId'] === fragmenterId && String(l['err']).includes('fragments'))).toBe(true);
    expect((await call(other.id, 2)).status).toBe(200);
  });
});

describe('hostile WebSocket devices: an initialize answer as large as a frame (red team 11)', () => {
  let t: TestGateway;
  beforeAll(async () => {
    t = await startTestGateway();
  });
  afterAll(() => t.close());

  /** A device that answers initialize with `result`, then lists TOOLS: its device.ready event. */
  const setUp = async (deviceId: string, result: Record<string, unknown>) => {
    const ready = t.nextEvent('device.ready', deviceId);
    const d = await ScriptedWsDevice.connect(t.wsUrl, deviceId);
    d.reply((await d.next('initialize')).id, JSON.stringify(result));
    d.reply((await d.next('tools/list')).id, JSON.stringify({ tools: TOOLS }));
    return { d, ready: await ready };
  };

  it('keeps and publishes the MCP fields of the answer only: what else it carries is held by no connection and no event', async () => {
    // Members MCP does not define, at the top and in serverInfo, and capabilities of 20 KiB: the frame is ~60 KiB.
    const pad = 'p'.repeat(20 * 1024);
    const deviceId = '02:00:00:00:0d:f0';
    const { d, ready } = await setUp(deviceId, {
      protocolVersion: '2024-11-05',
      capabilities: { tools: {}, pad },
      serverInfo: { name: 'fw', version: '1.0', pad },
      pad,
    });
    // Before, device.ready carried the whole serverInfo (every SSE stream, MQTT backend, the event ring of 1000 and the
    // history held it), and the session kept the whole answer for its connection.
    expect(ready.data['server']).toEqual({ name: 'fw', version: '1.0' });
    expect(JSON.stringify(ready.data).length).toBeLessThan(512);
    expect(t.gw.registry.find(deviceId)?.initialize).toEqual({ protocolVersion: '2024-11-05', capabilities: {}, serverInfo: { name: 'fw', version: '1.0' } });
    d.close();

    // A real firmware's answer is kept as it came, its capabilities and instructions included.
    const plain = {
      protocolVersion: '2024-11-05',
      capabilities: { tools: {}, experimental: { x: 1 } },
      serverInfo: { name: 'fw', version: '2' },
      instructions: 'hi',
    };
    const other = await setUp('02:00:00:00:0d:f1', plain);
    expect(t.gw.registry.find('02:00:00:00:0d:f1')?.initialize).toEqual(plain);
    expect(other.ready.data['server']).toEqual({ name: 'fw', version: '2' });
    other.d.close();
  });
});

describe('hostile WebSocket devices: what holds', () => {
  let t: TestGateway;
  beforeAll(async () => {
    t = await startTestGateway();
  });
  afterAll(() => t.close());

  it('frames before the hello, and replies to ids never sent or of another type, are dropped and counted; the device then sets up', async () => {
    const deviceId = '02:00:00:00:0d:e0';
    const ws = new WebSocket(t.wsUrl, { headers: { 'Device-Id': deviceId, 'Client-Id': 'c' }, perMessageDeflate: false });
    await once(ws, 'open');
    const late = await t.metric('voxgate_late_replies_total');
    const badRpc = await t.metric('voxgate_frames_rejected_total', { reason: 'bad_jsonrpc' });
    const reply = (id: unknown) => ws.send(JSON.stringify({ session_id: 'x', type: 'mcp', payload: { jsonrpc: '2.0', id, result: {} } }));
    for (const id of [0, 1, '1', 1e300, -1, null]) reply(id);
    ws.send(Buffer.from([0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff]), { binary: true });
    const ready = t.nextEvent('device.ready', deviceId);
    const requests: Array<{ id: number; method: string }> = [];
    ws.on('message', (data, binary) => {
      if (binary) return;
      const f = JSON.parse(String(data)) as { type: string; payload?: { id: number; method: string } };
      if (f.type === 'mcp' && f.payload?.method) requests.push(f.payload);
      const p = f.payload;
      if (p?.method === 'initialize') reply2(p.id, '{"protocolVersion":"2024-11-05","capabilities":{"tools":{}},"serverInfo":{"name":"x","version":"1"}}');
      if (p?.method === 'tools/list') {
        // An answer to an id already answered, and one of the right number as a string, before the real one.
        reply(1);
        reply(String(p.id));
        reply2(p.id, '{"tools":[{"name":"self.x","inputSchema":{"type":"object"}}]}');
      }
    });
    const reply2 = (id: number, result: string) => ws.send(`{"session_id":"x","type":"mcp","payload":{"jsonrpc":"2.0","id":${id},"result":${result}}}`);
    ws.send(JSON.stringify({ type: 'hello', version: 1, transport: 'websocket', features: { mcp: true } }));
    await ready;
    expect(requests.map((r) => r.method)).toEqual(['initialize', 'tools/list']);
    // A result with a null id is no response at all (JSON-RPC 2.0): refused as such, not matched.
    expect(await t.metric('voxgate_late_replies_total')).toBe(late + 7);
    expect(await t.metric('voxgate_frames_rejected_total', { reason: 'bad_jsonrpc' })).toBe(badRpc + 1);
    ws.terminate();
  });

  it('a Device-Id header sent twice, or one that is not a MAC, is refused at the upgrade (400)', async () => {
    const port = Number(new URL(t.baseUrl).port);
    const upgrade = async (deviceIdLines: string, path = '/xiaozhi/v1/'): Promise<string> => {
      const sock = connect(port, '127.0.0.1');
      await once(sock, 'connect');
      sock.write(
        `GET ${path} HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n${deviceIdLines}\r\n`,
      );
      let text = '';
      sock.on('data', (c: Buffer) => (text += c.toString('latin1')));
      await once(sock, 'close');
      return text.split('\r\n')[0]!;
    };
    expect(await upgrade('Device-Id: 02:00:00:00:0d:e1\r\nDevice-Id: 02:00:00:00:0d:e2\r\n')).toBe('HTTP/1.1 400 Bad Request');
    expect(await upgrade('Device-Id: 02:00:00:00:0d:\xe9\xe9\r\n')).toBe('HTTP/1.1 400 Bad Request');
    expect(await upgrade('Device-Id: ../../02:00:00:00:0d:e1\r\n')).toBe('HTTP/1.1 400 Bad Request');
    // A client id the API and the console would show with a terminal's escape, or reordered by a right-to-left override
    // (red team 11): percent-escaped in the query string, which reaches it decoded.
    const before = await t.metric('voxgate_device_auth_refused_total', { transport: 'websocket', reason: 'bad_client_id' });
    expect(await upgrade('Device-Id: 02:00:00:00:0d:e3\r\n', '/xiaozhi/v1/?client-id=%1B%5B2J%1B%5D0%3Bowned%07')).toBe('HTTP/1.1 400 Bad Request');
    expect(await upgrade('Device-Id: 02:00:00:00:0d:e3\r\n', '/xiaozhi/v1/?client_id=uuid-%E2%80%AEfdp.exe')).toBe('HTTP/1.1 400 Bad Request');
    expect(await t.metric('voxgate_device_auth_refused_total', { transport: 'websocket', reason: 'bad_client_id' })).toBe(before + 2);
    // A UUID, as the firmware sends, in the same place: upgraded.
    expect(await upgrade('Device-Id: 02:00:00:00:0d:e3\r\n', '/xiaozhi/v1/?client-id=8f3c2a1e-1b2c-4d5e-9f00-0123456789ab')).toBe(
      'HTTP/1.1 101 Switching Protocols',
    );
  });
});

describe('hostile WebSocket devices behind a trusted proxy (http.trustProxy)', () => {
  it("a forwarded IPv6 address with a zone id of kilobytes counts as the proxy's, not as the device's address", async () => {
    const t = await startTestGateway({ http: { trustProxy: ['loopback'] } });
    const d = new ReferenceDevice({ deviceId: '02:00:00:00:0d:f0' });
    try {
      // node's isIP takes any zone id; a real proxy forwards none. The address goes into every log line and the refused list.
      const ready = t.nextEvent('device.ready', d.deviceId);
      await d.connectWebSocket(t.wsUrl, { headers: { 'X-Forwarded-For': `fe80::1%${'a'.repeat(8000)}` } });
      await ready;
      const remotes = t.logs.filter((l) => l['msg'] === 'device connected' && l['deviceId'] === d.deviceId).map((l) => l['remote']);
      expect(remotes).toEqual(['127.0.0.1']);
    } finally {
      d.terminate();
      await t.close();
    }
  });
});

describe('hostile WebSocket devices: one that stops answering pings', () => {
  it('is dropped after a heartbeat round unanswered, counted and logged; a device that answers stays', async () => {
    // Pings every second: a device misses a round when it reads nothing between two.
    const t = await startTestGateway({ ws: { heartbeatMs: 1000 } });
    const devices: ScriptedWsDevice[] = [];
    try {
      const join = async (deviceId: string) => {
        const ready = t.nextEvent('device.ready', deviceId);
        const d = await ScriptedWsDevice.connect(t.wsUrl, deviceId, TOOLS);
        devices.push(d);
        await ready;
        return d;
      };
      const mute = await join('02:00:00:00:0d:a0');
      await join('02:00:00:00:0d:a1');
      const dropped = () => t.metric('voxgate_connections_refused_total', { listener: 'http', reason: 'keepalive' });
      expect(await dropped()).toBe(0);
      const offline = t.nextEvent('device.offline', '02:00:00:00:0d:a0', 30_000);
      // Reads nothing from here on (a half-open socket, a device that lost its network): no pong goes back.
      mute.ws.pause();
      expect((await offline).data).toMatchObject({ reason: 'websocket heartbeat unanswered' });
      // Before: the heartbeat's terminate was counted nowhere.
      expect(await dropped()).toBe(1);
      expect(
        t.logs.some((l) => l['msg'] === 'WebSocket device answered no ping for a heartbeat round; disconnected' && l['deviceId'] === '02:00:00:00:0d:a0'),
      ).toBe(true);
      expect(t.gw.registry.get('02:00:00:00:0d:a1')?.online).toBe(true);
    } finally {
      for (const d of devices) d.close();
      await t.close();
    }
  });
});
