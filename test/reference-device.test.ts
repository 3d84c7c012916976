/**
 * Tests of the reference-firmware simulator itself, without the gateway: a tiny ws server and an aedes
 * broker on 127.0.0.1 play the server side.
 */
import type { IncomingMessage } from 'node:http';
import { createServer, type AddressInfo, type Server } from 'node:net';
import { Aedes, type AuthenticateError, type Client as AedesClient } from 'aedes';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { WebSocketServer, type WebSocket } from 'ws';
import { cjsonParse, getItem } from './support/cjson.js';
import { ReferenceDevice, toolJson, type RefTool, type ReferenceDeviceOptions } from './support/reference-device.js';
import { AsyncQueue, deferred, once } from './support/wait.js';

const MAC = 'aa:bb:cc:dd:ee:ff';
const SID = 'sess-1';
const WS_HELLO = {
  type: 'hello',
  version: 1,
  features: { mcp: true },
  transport: 'websocket',
  audio_params: { format: 'opus', sample_rate: 16000, channels: 1, frame_duration: 60 },
};

// ------------------------------------------------------------------ a fake server side

interface Reply {
  raw: string;
  id: number | undefined;
  /** The payload text exactly as the device built it. */
  payloadText: string;
  /** JSON.parse of the frame, or undefined when the device sent invalid JSON. */
  frame: Record<string, unknown> | undefined;
  payload: Record<string, unknown> | undefined;
}

function parseReply(raw: string): Reply {
  const at = raw.indexOf('"payload":');
  const payloadText = at === -1 ? '' : raw.slice(at + '"payload":'.length, -1);
  const m = /"payload":\{"jsonrpc":"2\.0","id":(-?\d+)/.exec(raw);
  let frame: Record<string, unknown> | undefined;
  try {
    frame = JSON.parse(raw) as Record<string, unknown>;
  } catch {
    frame = undefined;
  }
  return { raw, id: m ? Number(m[1]) : undefined, payloadText, frame, payload: frame?.['payload'] as Record<string, unknown> | undefined };
}

class ServerConn {
  readonly frames = new AsyncQueue<string>();
  readonly all: string[] = [];
  readonly closed = deferred<number>();
  private nextId = 1;

  constructor(
    readonly ws: WebSocket,
    readonly req: IncomingMessage,
    public sid = SID,
  ) {
    ws.on('message', (d, binary) => {
      if (binary) return;
      const t = Buffer.isBuffer(d) ? d.toString('utf8') : String(d);
      this.all.push(t);
      this.frames.push(t);
    });
    ws.on('close', (code) => this.closed.resolve(code));
  }

  send(x: unknown): void {
    this.ws.send(typeof x === 'string' ? x : JSON.stringify(x));
  }

  request(method: string, params?: unknown, id: unknown = this.nextId++): unknown {
    const payload: Record<string, unknown> = { jsonrpc: '2.0', id, method };
    if (params !== undefined) payload['params'] = params;
    this.send({ session_id: this.sid, type: 'mcp', payload });
    return id;
  }

  async next(timeoutMs = 5000): Promise<Reply> {
    return parseReply(await this.frames.next(timeoutMs, 'a device frame'));
  }

  /** Send a request and return the next frame, asserting it answers this request. */
  async call(method: string, params?: unknown): Promise<Reply> {
    const id = this.request(method, params);
    const r = await this.next();
    expect(r.id).toBe(id);
    return r;
  }
}

async function startWsServer(
  verifyClient?: (info: { req: IncomingMessage }, cb: (ok: boolean, code?: number, msg?: string) => void) => void,
): Promise<{ url: string; conns: AsyncQueue<ServerConn>; close(): Promise<void> }> {
  const wss = new WebSocketServer({ host: '127.0.0.1', port: 0, ...(verifyClient ? { verifyClient } : {}) });
  await once(wss, 'listening');
  const conns = new AsyncQueue<ServerConn>();
  wss.on('connection', (ws, req) => conns.push(new ServerConn(ws, req)));
  const { port } = wss.address() as AddressInfo;
  return {
    url: `ws://127.0.0.1:${port}/xiaozhi/v1/`,
    conns,
    close: () =>
      new Promise<void>((resolve) => {
        for (const c of wss.clients) c.terminate();
        wss.close(() => resolve());
      }),
  };
}

const serverHello = (sid = SID): Record<string, unknown> => ({
  type: 'hello',
  transport: 'websocket',
  session_id: sid,
  audio_params: { format: 'opus', sample_rate: 24000, channels: 1, frame_duration: 60 },
});

let server: Awaited<ReturnType<typeof startWsServer>>;
const devices: ReferenceDevice[] = [];

function newDevice(opts: Partial<ReferenceDeviceOptions> = {}): ReferenceDevice {
  const d = new ReferenceDevice({ deviceId: MAC, ...opts });
  devices.push(d);
  return d;
}

async function connected(opts: Partial<ReferenceDeviceOptions> = {}): Promise<{ device: ReferenceDevice; c: ServerConn; hello: string }> {
  const device = newDevice(opts);
  const p = device.connectWebSocket(server.url, { token: 'secret-token' });
  const c = await server.conns.next();
  const hello = await c.frames.next();
  c.send(serverHello());
  await p;
  return { device, c, hello };
}

beforeEach(async () => {
  server = await startWsServer();
});

afterEach(async () => {
  for (const d of devices.splice(0)) d.terminate();
  await server.close();
});

// ------------------------------------------------------------------ WebSocket transport

describe('WebSocket handshake', () => {
  it('sends the firmware headers and hello, and takes the session id from the server hello', async () => {
    const { device, c, hello } = await connected();
    expect(c.req.headers['authorization']).toBe('Bearer secret-token');
    expect(c.req.headers['protocol-version']).toBe('1');
    expect(c.req.headers['device-id']).toBe(MAC);
    expect(c.req.headers['client-id']).toBe(device.clientId);
    expect(device.clientId).toMatch(/^[0-9a-f-]{36}$/);
    expect(JSON.parse(hello)).toEqual(WS_HELLO);
    expect(device.sessionId).toBe(SID);
    expect(device.transport).toBe('websocket');
    expect(device.connected).toBe(true);
    expect(device.received[0]).toMatchObject({ type: 'hello', session_id: SID });
  });

  it('keeps a token that has a space, omits an empty one, and can use query parameters', async () => {
    const d1 = newDevice();
    const p1 = d1.connectWebSocket(server.url, { token: 'Token abc', skipHello: true });
    const c1 = await server.conns.next();
    await p1;
    expect(c1.req.headers['authorization']).toBe('Token abc');

    const d2 = newDevice({ deviceId: '11:22:33:44:55:66' });
    const p2 = d2.connectWebSocket(server.url, { skipHello: true });
    const c2 = await server.conns.next();
    await p2;
    expect(c2.req.headers['authorization']).toBeUndefined();

    const d3 = newDevice({ clientId: 'c0ffee00-0000-4000-8000-000000000001' });
    const p3 = d3.connectWebSocket(server.url, { token: 'tok', useQuery: true, skipHello: true, headers: { 'X-Extra': '1' } });
    const c3 = await server.conns.next();
    await p3;
    const q = new URL(c3.req.url ?? '', 'http://x').searchParams;
    expect(q.get('device-id')).toBe(MAC);
    expect(q.get('client-id')).toBe('c0ffee00-0000-4000-8000-000000000001');
    expect(q.get('authorization')).toBe('Bearer tok');
    expect(c3.req.headers['device-id']).toBeUndefined();
    expect(c3.req.headers['authorization']).toBeUndefined();
    expect(c3.req.headers['x-extra']).toBe('1');
  });

  it('rejects with statusCode when the upgrade is refused', async () => {
    const strict = await startWsServer((_info, cb) => cb(false, 401, 'Unauthorized'));
    try {
      const d = newDevice();
      const err = await d.connectWebSocket(strict.url, { token: 'bad' }).then(
        () => undefined,
        (e: unknown) => e as Error & { statusCode?: number },
      );
      expect(err?.statusCode).toBe(401);
      expect(d.connected).toBe(false);
    } finally {
      await strict.close();
    }
  });

  it('rejects when no server hello arrives in time', async () => {
    const d = newDevice();
    const p = d.connectWebSocket(server.url, { helloTimeoutMs: 150 });
    await server.conns.next();
    await expect(p).rejects.toThrow(/server hello/);
  });

  it('crashes (drops the socket) on a server hello without transport, as the firmware dereferences NULL', async () => {
    const d = newDevice();
    const p = d.connectWebSocket(server.url);
    const c = await server.conns.next();
    await c.frames.next();
    c.send({ type: 'hello', session_id: 'x' });
    await expect(p).rejects.toThrow(/restarted/);
    expect(d.crashes).toHaveLength(1);
    expect((await d.closed()).code).toBe(1006);
    expect(await c.closed.promise).toBe(1006);
  });

  it('ignores a server hello with another transport (and keeps waiting)', async () => {
    const d = newDevice();
    const p = d.connectWebSocket(server.url, { helloTimeoutMs: 3000 });
    const c = await server.conns.next();
    await c.frames.next();
    c.send({ type: 'hello', transport: 'udp', session_id: 'wrong' });
    c.send(serverHello('right'));
    await p;
    expect(d.sessionId).toBe('right');
    expect(d.log).toContain('WS: Unsupported transport: udp');
  });

  it('holds replies to requests that arrive before the server hello until the hello (main task blocked)', async () => {
    const d = newDevice();
    const p = d.connectWebSocket(server.url);
    const c = await server.conns.next();
    await c.frames.next(); // device hello
    c.sid = '';
    c.request('initialize', { protocolVersion: '2024-11-05', capabilities: { vision: { url: 'http://v/explain' } } });
    await d.waitForMcp((m) => m['method'] === 'initialize');
    expect(d.vision).toEqual({ url: 'http://v/explain' }); // parsed at once...
    expect(d.sent).toHaveLength(1); // ...but the reply waits: only the device hello went out
    c.send(serverHello('late-session'));
    await p;
    const r = await c.next();
    expect(r.id).toBe(1);
    expect(r.frame?.['session_id']).toBe('late-session');
  });

  it('close() closes with 1000; closed() reports the code the server closed with', async () => {
    const a = await connected();
    await a.device.close();
    expect(await a.device.closed()).toEqual({ code: 1000, reason: '' });
    expect(a.device.connected).toBe(false);

    const b = await connected();
    b.c.ws.close(4000, 'kicked');
    expect(await b.device.closed()).toEqual({ code: 4000, reason: 'kicked' });
  });
});

describe('MCP over WebSocket', () => {
  it('initialize: records vision and answers the hard-coded result whatever version was asked', async () => {
    const { device, c } = await connected({ boardName: 'atk-dnesp32s3', firmwareVersion: '1.7.6' });
    const r = await c.call('initialize', {
      protocolVersion: '2025-06-18',
      capabilities: { vision: { url: 'http://gw/vision/explain', token: 't0k' } },
      clientInfo: { name: 'voxgate', version: '0' },
    });
    expect(r.raw).toBe(
      `{"session_id":"${SID}","type":"mcp","payload":{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"2024-11-05","capabilities":{"tools":{}},"serverInfo":{"name":"atk-dnesp32s3","version":"1.7.6"}}}}`,
    );
    expect(device.vision).toEqual({ url: 'http://gw/vision/explain', token: 't0k' });
    expect(device.mcpReceived[0]).toMatchObject({ method: 'initialize', id: 1 });
  });

  it('tools/list paginates by bytes with the tool name as cursor; every tool exactly once', async () => {
    const { device, c } = await connected({ extraTools: 60 });
    const visible = device.tools.filter((t) => !t.userOnly).map((t) => t.name);
    expect(visible).toHaveLength(64);
    const listed: string[] = [];
    let cursor: string | undefined;
    let pages = 0;
    let last: Record<string, unknown> = {};
    do {
      const r = await c.call('tools/list', cursor === undefined ? undefined : { cursor });
      pages++;
      expect(Buffer.byteLength(r.payloadText)).toBeLessThanOrEqual(8000);
      const result = r.payload?.['result'] as { tools: Array<{ name: string }>; nextCursor?: string };
      // the firmware's own guarantee: the tools array part stays within 8000 - 30 bytes
      const arrayPart = JSON.stringify(result).replace(/\],"nextCursor":".*"\}$|\]\}$/, '');
      expect(Buffer.byteLength(arrayPart)).toBeLessThanOrEqual(7970);
      listed.push(...result.tools.map((t) => t.name));
      if (result.nextCursor !== undefined) {
        expect(result.tools.map((t) => t.name)).not.toContain(result.nextCursor);
        expect(visible).toContain(result.nextCursor);
      }
      cursor = result.nextCursor;
      last = result;
    } while (cursor !== undefined);
    expect(pages).toBeGreaterThanOrEqual(3);
    expect('nextCursor' in last).toBe(false);
    expect(listed).toEqual(visible);
    expect(new Set(listed).size).toBe(listed.length);
  });

  it('tool JSON: no property descriptions, default/minimum/maximum, required only when non-empty', async () => {
    const tools: RefTool[] = [
      { name: 'a.none', description: 'no args', run: () => true },
      {
        name: 'a.mixed',
        description: 'd',
        properties: {
          n: { type: 'integer', default: 80, minimum: 1, maximum: 100 },
          s: { type: 'string' },
          b: { type: 'boolean', default: false },
        },
        run: () => true,
      },
    ];
    const { c } = await connected({ tools });
    const r = await c.call('tools/list');
    expect(r.payloadText).toBe(
      '{"jsonrpc":"2.0","id":1,"result":{"tools":[' +
        '{"name":"a.none","description":"no args","inputSchema":{"type":"object","properties":{}}},' +
        '{"name":"a.mixed","description":"d","inputSchema":{"type":"object","properties":{"n":{"type":"integer","default":80,"minimum":1,"maximum":100},"s":{"type":"string"},"b":{"type":"boolean","default":false}},"required":["s"]}}' +
        ']}}',
    );
  });

  it('a page can exceed the budget: the 30-byte slack does not cover a long nextCursor', async () => {
    const longName = 'self.board.a_rather_long_tool_name_for_the_cursor_quirk_0001';
    const filler: RefTool = { name: 'self.board.filler', description: '', run: () => true };
    filler.description = 'x'.repeat(7959 - toolJson(filler).length); // '{"tools":[' + json + ',' == 7970 bytes
    const tools: RefTool[] = [filler, { name: longName, description: 'second', run: () => true }];
    const { c } = await connected({ tools });
    const r = await c.call('tools/list');
    const result = r.payload?.['result'] as { nextCursor?: string };
    expect(result.nextCursor).toBe(longName);
    const resultText = r.payloadText.slice('{"jsonrpc":"2.0","id":1,"result":'.length, -1);
    expect(Buffer.byteLength(resultText)).toBe(7969 + '],"nextCursor":"'.length + longName.length + 2);
    expect(Buffer.byteLength(resultText)).toBeGreaterThan(8000);
  });

  it('tools/list errors: unknown cursor, only user-only tools; an empty list is fine', async () => {
    const { c } = await connected();
    const r1 = await c.call('tools/list', { cursor: 'no.such.tool' });
    expect(r1.payload?.['error']).toEqual({ message: 'Failed to add tool  because of payload size limit' });

    const onlyUser = await connected({ tools: [{ name: 'u.x', description: '', userOnly: true, run: () => 1 }] });
    const r2 = await onlyUser.c.call('tools/list');
    expect(r2.payload?.['error']).toEqual({ message: 'Failed to add tool  because of payload size limit' });
    const r3 = await onlyUser.c.call('tools/list', { withUserTools: true });
    expect((r3.payload?.['result'] as { tools: unknown[] }).tools).toHaveLength(1);

    const none = await connected({ tools: [] });
    expect((await none.c.call('tools/list')).payloadText).toBe('{"jsonrpc":"2.0","id":1,"result":{"tools":[]}}');

    const tiny = await connected({ pageBudget: 100 });
    const r4 = await tiny.c.call('tools/list');
    expect(r4.payload?.['error']).toEqual({ message: 'Failed to add tool self.get_device_status because of payload size limit' });
  });

  it('user-only tools are listed (last, annotated) only withUserTools, but callable either way', async () => {
    const { c } = await connected();
    const plain = await c.call('tools/list');
    const names = (plain.payload?.['result'] as { tools: Array<{ name: string }> }).tools.map((t) => t.name);
    expect(names).toEqual(['self.get_device_status', 'self.audio_speaker.set_volume', 'self.screen.set_brightness', 'self.camera.take_photo']);

    const all = await c.call('tools/list', { withUserTools: true });
    const tools = (all.payload?.['result'] as { tools: Array<Record<string, unknown>> }).tools;
    expect(tools.map((t) => t['name']).slice(-2)).toEqual(['self.get_system_info', 'self.reboot']);
    expect(tools.at(-1)?.['annotations']).toEqual({ audience: ['user'] });
    expect(tools[0]?.['annotations']).toBeUndefined();

    const info = await c.call('tools/call', { name: 'self.get_system_info' });
    const text = (info.payload?.['result'] as { content: Array<{ text: string }> }).content[0]?.text ?? '';
    expect(JSON.parse(text)).toMatchObject({ mac_address: MAC });
  });

  it('drops bad requests silently: string/absent id, wrong jsonrpc, non-object params, notifications', async () => {
    const { device, c } = await connected();
    c.request('tools/list', undefined, 'abc');
    c.send({ session_id: SID, type: 'mcp', payload: { jsonrpc: '2.0', method: 'tools/list' } });
    c.send({ session_id: SID, type: 'mcp', payload: { jsonrpc: '1.0', id: 50, method: 'tools/list' } });
    c.send({ session_id: SID, type: 'mcp', payload: { jsonrpc: '2.0', id: 51, method: 'tools/list', params: [1] } });
    c.send({ session_id: SID, type: 'mcp', payload: { jsonrpc: '2.0', id: 52, method: 'notifications/initialized' } });
    c.send({ session_id: SID, type: 'mcp', payload: { jsonrpc: '2.0', id: 53 } });
    c.send({ session_id: SID, type: 'mcp', payload: 'not an object' });
    const r = await c.call('ping');
    expect(r.raw).toBe(`{"session_id":"${SID}","type":"mcp","payload":{"jsonrpc":"2.0","id":1,"error":{"message":"Method not implemented: ping"}}}`);
    expect(r.payload?.['error']).not.toHaveProperty('code');
    expect(device.log).toEqual(
      expect.arrayContaining([
        'MCP: Invalid id for method: tools/list',
        'MCP: Invalid JSONRPC version: 1.0',
        'MCP: Invalid params for method: tools/list',
        'MCP: Missing method',
      ]),
    );
    expect(device.mcpReceived).toHaveLength(7); // the non-object payload is not an MCP payload
  });

  it('unknown tool: the error has no code and the name is pasted unescaped (invalid JSON)', async () => {
    const { c } = await connected();
    const r = await c.call('tools/call', { name: 'self.say "hi"', arguments: {} });
    expect(r.raw).toBe(`{"session_id":"${SID}","type":"mcp","payload":{"jsonrpc":"2.0","id":1,"error":{"message":"Unknown tool: self.say "hi""}}}`);
    expect(() => JSON.parse(r.raw) as unknown).toThrow(SyntaxError);
    expect(r.raw).not.toContain('"code"');
  });

  it('tools/call envelope errors', async () => {
    const { c } = await connected();
    expect((await c.call('tools/call')).payload?.['error']).toEqual({ message: 'Missing params' });
    expect((await c.call('tools/call', {})).payload?.['error']).toEqual({ message: 'Missing name' });
    expect((await c.call('tools/call', { name: 5 })).payload?.['error']).toEqual({ message: 'Missing name' });
    expect((await c.call('tools/call', { name: 'self.reboot', arguments: [1] })).payload?.['error']).toEqual({ message: 'Invalid arguments' });
    expect((await c.call('tools/call', { name: 'self.reboot', arguments: null })).payload?.['error']).toEqual({ message: 'Invalid arguments' });
  });

  it('argument validation: range, missing, wrong type, truncation, extra arguments', async () => {
    const { device, c } = await connected();
    const vol = (args: unknown): Promise<Reply> => c.call('tools/call', { name: 'self.audio_speaker.set_volume', arguments: args });
    expect((await vol({ volume: 101 })).payload?.['error']).toEqual({ message: 'Value exceeds maximum allowed: 100' });
    expect((await vol({ volume: -1 })).payload?.['error']).toEqual({ message: 'Value is below minimum allowed: 0' });
    expect((await vol({ volume: '50' })).payload?.['error']).toEqual({ message: 'Missing valid argument: volume' });
    expect((await vol({})).payload?.['error']).toEqual({ message: 'Missing valid argument: volume' });
    expect((await vol({ volume: 1e12 })).payload?.['error']).toEqual({ message: 'Value exceeds maximum allowed: 100' });
    const ok = await vol({ volume: 55.9, extra: 'ignored' });
    expect(ok.payload?.['result']).toEqual({ content: [{ type: 'text', text: 'true' }], isError: false });
    expect(device.volume).toBe(55);
    expect(device.log).toContain('MCP: tools/call: Missing valid argument: volume');
  });

  it('a wrong-typed value for a property with a default is replaced by the default; ranges still apply', async () => {
    const echo: RefTool = {
      name: 't.echo',
      description: '',
      properties: {
        mode: { type: 'string', default: 'auto' },
        n: { type: 'integer', default: 5, minimum: 0, maximum: 10 },
        on: { type: 'boolean', default: true },
      },
      run: (args) => args,
    };
    const { c } = await connected({ tools: [echo] });
    const text = (r: Reply): unknown => JSON.parse((r.payload?.['result'] as { content: Array<{ text: string }> }).content[0]?.text ?? '');
    expect(text(await c.call('tools/call', { name: 't.echo', arguments: { mode: 3, n: 'x', on: 'yes' } }))).toEqual({ mode: 'auto', n: 5, on: true });
    expect(text(await c.call('tools/call', { name: 't.echo' }))).toEqual({ mode: 'auto', n: 5, on: true });
    expect(text(await c.call('tools/call', { name: 't.echo', arguments: { mode: 'm', n: 7, on: false } }))).toEqual({ mode: 'm', n: 7, on: false });
    expect((await c.call('tools/call', { name: 't.echo', arguments: { n: 11 } })).payload?.['error']).toEqual({ message: 'Value exceeds maximum allowed: 10' });
  });

  it('return values become one text item; thrown errors become raw unescaped messages', async () => {
    const tools: RefTool[] = [
      { name: 'r.bool', description: '', run: () => false },
      { name: 'r.int', description: '', run: () => 3.9 },
      { name: 'r.str', description: '', run: () => 'plain "text"' },
      { name: 'r.obj', description: '', run: () => ({ a: [1, 'b'] }) },
      { name: 'r.throw', description: '', run: () => Promise.reject(new Error('bad "thing" happened')) },
    ];
    const { c } = await connected({ tools });
    const text = async (name: string): Promise<string> =>
      ((await c.call('tools/call', { name })).payload?.['result'] as { content: Array<{ text: string }> }).content[0]?.text ?? '';
    expect(await text('r.bool')).toBe('false');
    expect(await text('r.int')).toBe('3');
    expect(await text('r.str')).toBe('plain "text"');
    expect(await text('r.obj')).toBe('{"a":[1,"b"]}');
    const r = await c.call('tools/call', { name: 'r.throw' });
    expect(r.payloadText).toBe('{"jsonrpc":"2.0","id":5,"error":{"message":"bad "thing" happened"}}');
    expect(r.frame).toBeUndefined();
  });

  it('take_photo needs the vision URL from initialize', async () => {
    const { c } = await connected();
    const photo = (): Promise<Reply> => c.call('tools/call', { name: 'self.camera.take_photo', arguments: { question: 'what is this?' } });
    expect((await photo()).payload?.['error']).toEqual({ message: 'Image explain URL or token is not set' });
    await c.call('initialize', { capabilities: { vision: { url: 'http://gw/explain' } } });
    const ok = await photo();
    const text = (ok.payload?.['result'] as { content: Array<{ text: string }> }).content[0]?.text ?? '';
    expect(JSON.parse(text)).toMatchObject({ success: true, action: 'RESPONSE' });
    expect(text).toContain('what is this?');
  });

  it('calls run one at a time on the main task; every reply, even an error, waits behind a running tool', async () => {
    let active = 0;
    let maxActive = 0;
    const gates = [deferred(), deferred()];
    const started = [deferred(), deferred()];
    const slow = (i: 0 | 1): RefTool => ({
      name: `slow.${i}`,
      description: '',
      run: async () => {
        active++;
        maxActive = Math.max(maxActive, active);
        started[i]!.resolve();
        await gates[i]!.promise;
        active--;
        return `done ${i}`;
      },
    });
    const { device, c } = await connected({ tools: [slow(0), slow(1)] });
    c.request('tools/call', { name: 'slow.0' }); // 1
    c.request('tools/call', { name: 'slow.1' }); // 2
    c.request('tools/call', { name: 'no.such' }); // 3: fails validation at once, but its send is queued
    c.request('tools/list'); // 4
    await started[0]!.promise;
    await device.waitForMcp((m) => m['id'] === 4);
    expect(device.sent).toHaveLength(1); // only the hello: nothing is sent while slow.0 runs
    expect(started[1]!.settled).toBe(false);

    gates[0]!.resolve();
    await started[1]!.promise; // slow.1 runs before slow.0's reply is sent (it was queued first)
    expect(device.sent).toHaveLength(1);

    gates[1]!.resolve();
    const ids = [];
    for (let i = 0; i < 4; i++) ids.push((await c.next()).id);
    expect(ids).toEqual([3, 4, 1, 2]);
    expect(maxActive).toBe(1);
  });

  it('errors reply at once when the main task is idle', async () => {
    const { device, c } = await connected();
    c.request('tools/call', { name: 'nope' });
    await device.waitForMcp((m) => m['id'] === 1);
    expect(device.sent).toHaveLength(2);
    expect(device.sent[1]).toContain('Unknown tool: nope');
  });

  it('holdReplies queues tools/call replies (results and errors) until releaseReplies', async () => {
    const { device, c } = await connected();
    device.holdReplies();
    c.request('tools/call', { name: 'self.audio_speaker.set_volume', arguments: { volume: 30 } }); // 1
    expect((await c.call('tools/list')).id).toBe(2); // not held, and it overtakes the held reply to 1
    expect(device.volume).toBe(30);
    c.request('tools/call', { name: 'nope' }); // 3: a validation error is a tools/call reply too
    expect((await c.call('tools/list')).id).toBe(4);
    expect(device.heldReplies).toBe(2);
    device.releaseReplies();
    expect((await c.next()).id).toBe(1);
    const err = await c.next();
    expect(err.id).toBe(3);
    expect(err.payload?.['error']).toEqual({ message: 'Unknown tool: nope' });
  });

  it('self.reboot never answers (its reboot job is queued ahead of the reply) and drops the link 1 s later', async () => {
    const { device, c } = await connected();
    c.request('tools/call', { name: 'self.reboot' });
    const info = await device.closed();
    expect(info.code).toBe(1006);
    expect(device.rebootCount).toBe(1);
    expect(c.all).toHaveLength(1); // just the hello
    expect(device.sessionId).toBe('');
  });

  it('a system reboot command reboots the device', async () => {
    const { device, c } = await connected();
    c.send({ session_id: SID, type: 'system', command: 'reboot' });
    await device.closed();
    expect(device.rebootCount).toBe(1);
  });

  it('reads frames like cJSON: case-insensitive keys, first duplicate wins, trailing garbage, int saturation', async () => {
    const { device, c } = await connected();
    c.send(
      `{"session_id":"x","TYPE":"mcp","payload":{"JSONRPC":"2.0","Id":7.9,"method":"tools/call","method":"ignored",` +
        `"params":{"name":"self.audio_speaker.set_volume","arguments":{"VOLUME":12}}}} trailing garbage`,
    );
    const r = await c.next();
    expect(r.id).toBe(7);
    expect(device.volume).toBe(12);
    expect(device.received.at(-1)).toMatchObject({ TYPE: 'mcp' });
    c.request('tools/list', undefined, 1e12);
    expect((await c.next()).id).toBe(2147483647);
  });

  it('sendRaw, sendMcp and notify put frames on the wire as given', async () => {
    const { device, c } = await connected();
    device.sendRaw('not json');
    expect(await c.frames.next()).toBe('not json');
    device.notify('notifications/state_changed', { state: 'idle' });
    expect(JSON.parse(await c.frames.next())).toEqual({
      session_id: SID,
      type: 'mcp',
      payload: { jsonrpc: '2.0', method: 'notifications/state_changed', params: { state: 'idle' } },
    });
    const frame = await device.waitForFrame((f) => f['type'] === 'hello');
    expect(frame['session_id']).toBe(SID);
    await expect(device.waitForMcp(() => true, 50)).rejects.toThrow(/no matching MCP payload/);
  });
});

describe('cjson reader', () => {
  it('matches cJSON on edge cases', () => {
    expect(cjsonParse('{"a":1} xyz')).toBeDefined();
    expect(cjsonParse('[1,]')).toBeUndefined();
    expect(cjsonParse('{"a":"x\u0001y"}')).toBeDefined(); // raw control characters are accepted
    const n = cjsonParse('{"a":-.5,"b":1.,"c":007,"d":"ab\\u0000cd","e":"\\uZZZZtail"}');
    expect(getItem(n, 'A')).toMatchObject({ kind: 'number', value: -0.5, valueint: 0 });
    expect(getItem(n, 'b')).toMatchObject({ value: 1 });
    expect(getItem(n, 'c')).toMatchObject({ value: 7 });
    expect(getItem(n, 'd')).toEqual({ kind: 'string', value: 'ab' });
    expect(getItem(n, 'e')).toEqual({ kind: 'string', value: '' });
    expect(cjsonParse('"\\udc00"')).toBeUndefined();
    expect(cjsonParse('['.repeat(1000) + ']'.repeat(1000))).toBeDefined();
    expect(cjsonParse('['.repeat(1001) + ']'.repeat(1001))).toBeUndefined();
  });
});

// ------------------------------------------------------------------ MQTT transport (aedes)

interface Broker {
  url: string;
  broker: Aedes;
  clients: AsyncQueue<AedesClient>;
  fromDevices: AsyncQueue<{ topic: string; text: string; clientId: string }>;
  subscriptions: string[];
  close(): Promise<void>;
}

async function startBroker(authenticate?: Aedes['authenticate']): Promise<Broker> {
  const broker = await Aedes.createBroker(authenticate ? { authenticate } : {});
  const tcp: Server = createServer(broker.handle);
  await new Promise<void>((resolve) => tcp.listen(0, '127.0.0.1', resolve));
  const { port } = tcp.address() as AddressInfo;
  const clients = new AsyncQueue<AedesClient>();
  const fromDevices = new AsyncQueue<{ topic: string; text: string; clientId: string }>();
  const subscriptions: string[] = [];
  broker.on('clientReady', (client) => clients.push(client));
  broker.on('publish', (packet, client) => {
    if (client) fromDevices.push({ topic: packet.topic, text: packet.payload.toString(), clientId: client.id });
  });
  broker.on('subscribe', (subs) => subscriptions.push(...subs.map((s) => s.topic)));
  return {
    url: `mqtt://127.0.0.1:${port}`,
    broker,
    clients,
    fromDevices,
    subscriptions,
    close: async () => {
      await new Promise<void>((resolve) => broker.close(() => resolve()));
      await new Promise<void>((resolve) => tcp.close(() => resolve()));
    },
  };
}

/** Push to a client that never subscribed: write a PUBLISH straight to its socket. */
function push(client: AedesClient, topic: string, body: unknown): Promise<void> {
  return new Promise<void>((resolve, reject) =>
    client.publish(
      { cmd: 'publish', topic, payload: Buffer.from(typeof body === 'string' ? body : JSON.stringify(body)), qos: 0, retain: false, dup: false },
      (err) => (err ? reject(err) : resolve()),
    ),
  );
}

const MQTT_CLIENT_ID = 'GID_test@@@aa_bb_cc_dd_ee_ff@@@c0ffee00-0000-4000-8000-000000000001';
const P2P = 'devices/p2p/aa_bb_cc_dd_ee_ff';

describe('MQTT transport (aedes broker)', () => {
  let b: Broker;
  afterEach(async () => {
    for (const d of devices.splice(0)) d.terminate();
    await b.close();
  });

  it('receives a push on its p2p topic without subscribing, and answers on device-server', async () => {
    b = await startBroker((_client, username, password, done) => done(null, username === 'u' && password?.toString() === 'p'));
    const d = newDevice();
    await d.connectMqtt(b.url, { clientId: MQTT_CLIENT_ID, username: 'u', password: 'p' });
    expect(d.transport).toBe('mqtt');
    expect(d.connected).toBe(true);
    const client = await b.clients.next();
    expect(client.id).toBe(MQTT_CLIENT_ID);

    await push(client, P2P, { session_id: '', type: 'mcp', payload: { jsonrpc: '2.0', id: 1, method: 'tools/list' } });
    const reply = await b.fromDevices.next();
    expect(reply.topic).toBe('device-server');
    expect(reply.clientId).toBe(MQTT_CLIENT_ID);
    expect(parseReply(reply.text).id).toBe(1);
    expect(d.receivedTopics).toEqual([P2P]);
    expect(b.subscriptions).toEqual([]);

    // any topic is handled; a goodbye is recorded and not answered
    await push(client, 'whatever/topic', { session_id: '', type: 'goodbye' });
    await d.waitForFrame((f) => f['type'] === 'goodbye');
    await push(client, P2P, { session_id: '', type: 'mcp', payload: { jsonrpc: '2.0', id: 2, method: 'ping' } });
    expect(parseReply((await b.fromDevices.next()).text).id).toBe(2); // the next thing it published
  });

  it('rejects with the CONNACK return code', async () => {
    b = await startBroker((_client, username, _password, done) => {
      if (username === 'bad') {
        const err = Object.assign(new Error('bad user name or password'), { returnCode: 4 }) as AuthenticateError;
        return done(err, null);
      }
      done(null, false);
    });
    const d = newDevice();
    const e4 = await d.connectMqtt(b.url, { clientId: MQTT_CLIENT_ID, username: 'bad', password: 'x' }).catch((e: unknown) => e as { code?: number });
    expect(e4?.code).toBe(4);
    const e5 = await d.connectMqtt(b.url, { clientId: MQTT_CLIENT_ID, username: 'other', password: 'x' }).catch((e: unknown) => e as { code?: number });
    expect(e5?.code).toBe(5);
    expect(d.connected).toBe(false);
  });

  it('sendHello: a goodbye answer leaves the main task blocked until the hello timeout; a udp hello opens the channel', async () => {
    b = await startBroker();
    const d = newDevice();
    await d.connectMqtt(b.url, { clientId: MQTT_CLIENT_ID, sendHello: true, helloTimeoutMs: 300 });
    const client = await b.clients.next();
    const hello = await b.fromDevices.next();
    expect(JSON.parse(hello.text)).toEqual({
      type: 'hello',
      version: 3,
      transport: 'udp',
      features: { mcp: true },
      audio_params: { format: 'opus', sample_rate: 16000, channels: 1, frame_duration: 60 },
    });
    await push(client, P2P, { type: 'goodbye', session_id: '' });
    await push(client, P2P, { session_id: '', type: 'mcp', payload: { jsonrpc: '2.0', id: 1, method: 'tools/list' } });
    await d.waitForMcp((m) => m['id'] === 1);
    expect(d.sent).toHaveLength(1); // the reply waits for the hello timeout
    expect(parseReply((await b.fromDevices.next()).text).id).toBe(1);
    expect(d.log.some((l) => l.startsWith('MQTT: Failed to receive server hello'))).toBe(true);
    expect(d.networkErrors).toEqual(['SERVER_TIMEOUT']); // the error alert
    expect(d.lastAudioChannelFailure).toBe('server_hello_timeout');

    const opened = d.openAudioChannel(2000);
    await b.fromDevices.next(); // the second hello
    await push(client, P2P, {
      type: 'hello',
      transport: 'udp',
      session_id: 'mqtt-sess',
      audio_params: { format: 'opus', sample_rate: 24000, channels: 1, frame_duration: 60 },
      udp: { server: '127.0.0.1', port: 8884, key: '00'.repeat(16), nonce: '01'.repeat(16), encryption: 'aes-128-ctr' },
    });
    expect(await opened).toBe(true);
    expect(d.sessionId).toBe('mqtt-sess');
    expect(d.udp).toEqual({ server: '127.0.0.1', port: 8884, key: '00'.repeat(16), nonce: '01'.repeat(16) });
    await push(client, P2P, { session_id: 'mqtt-sess', type: 'mcp', payload: { jsonrpc: '2.0', id: 2, method: 'tools/list' } });
    expect(parseReply((await b.fromDevices.next()).text).frame?.['session_id']).toBe('mqtt-sess');

    await push(client, P2P, { session_id: 'mqtt-sess', type: 'goodbye' });
    await d.waitForFrame((f) => f['type'] === 'goodbye' && f['session_id'] === 'mqtt-sess');
    await push(client, P2P, { session_id: 'mqtt-sess', type: 'mcp', payload: { jsonrpc: '2.0', id: 3, method: 'ping' } });
    expect(parseReply((await b.fromDevices.next()).text).id).toBe(3); // no goodbye was sent back
    expect(d.udp).toBeUndefined();
  });

  it('close() ends the session; closed() reports code 0', async () => {
    b = await startBroker();
    const d = newDevice();
    await d.connectMqtt(b.url, { clientId: MQTT_CLIENT_ID });
    const client = await b.clients.next();
    const gone = once(b.broker, 'clientDisconnect');
    await d.close();
    expect(await d.closed()).toEqual({ code: 0, reason: '' });
    expect((await gone)[0]).toBe(client);
  });
});
