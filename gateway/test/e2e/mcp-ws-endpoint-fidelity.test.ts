import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { WebSocket } from 'ws';
import { startTestGateway, type TestGateway } from '../../../test/support/gateway-harness.js';
import { untilHub } from '../../../test/support/hub.js';

/**
 * The inbound MCP endpoint against tool processes that are not the SDK's: hand-written JSON-RPC loops (no `ping`),
 * servers that ask their client things, and a gateway whose wall clock is stepped. Each is a raw WebSocket that
 * answers initialize and tools/list (one tool, `hello`) and hands every other message to the test.
 */
type Rpc = { jsonrpc: '2.0'; id?: number | string; method?: string; params?: Record<string, unknown>; result?: unknown; error?: unknown };

interface Fake {
  ws: WebSocket;
  send(msg: unknown): void;
  closed: Promise<{ code: number; reason: string }>;
  /** Resolves at the n-th message with this method the gateway sent (counted from the start). */
  nth(method: string, n: number): Promise<Rpc>;
}

function fakeTool(url: string, onMessage: (m: Rpc, f: Fake) => void): Promise<Fake> {
  const ws = new WebSocket(url);
  const seen = new Map<string, Rpc[]>();
  const waiters: Array<() => boolean> = [];
  const f: Fake = {
    ws,
    send: (msg) => ws.send(typeof msg === 'string' ? msg : JSON.stringify(msg) + '\n'),
    closed: new Promise((resolve) => ws.once('close', (code, reason) => resolve({ code, reason: reason.toString() }))),
    nth: (method, n) =>
      new Promise((resolve) => {
        const check = () => {
          const m = seen.get(method)?.[n - 1];
          if (m) resolve(m);
          return m !== undefined;
        };
        if (!check()) waiters.push(check);
      }),
  };
  ws.on('message', (data) => {
    const m = JSON.parse(data.toString()) as Rpc;
    if (m.method) seen.set(m.method, [...(seen.get(m.method) ?? []), m]);
    if (m.method === 'initialize')
      f.send({
        jsonrpc: '2.0',
        id: m.id,
        result: {
          protocolVersion: (m.params as { protocolVersion: string }).protocolVersion,
          capabilities: { tools: {} },
          serverInfo: { name: 'hand-written', version: '1' },
        },
      });
    else if (m.method === 'tools/list') f.send({ jsonrpc: '2.0', id: m.id, result: { tools: [{ name: 'hello', inputSchema: { type: 'object' } }] } });
    else onMessage(m, f);
    for (let i = waiters.length - 1; i >= 0; i--) if (waiters[i]!()) waiters.splice(i, 1);
  });
  return new Promise((resolve, reject) => {
    ws.once('open', () => resolve(f));
    ws.once('unexpected-response', (_req, res) => reject(new Error(`HTTP ${res.statusCode}`)));
    ws.once('error', reject);
  });
}

const answerCalls = (m: Rpc, f: Fake) => {
  if (m.method === 'tools/call') f.send({ jsonrpc: '2.0', id: m.id, result: { content: [{ type: 'text', text: 'hello back' }] } });
};

describe('MCP endpoint fidelity with tool processes not built on an SDK', { timeout: 60_000 }, () => {
  let t: TestGateway;
  beforeAll(async () => {
    t = await startTestGateway({ mcp: { connectTimeoutMs: 5000, endpoints: { pingIntervalMs: 1000 } } });
  });
  afterAll(async () => {
    await t.close();
  });
  const create = async (name: string) => (await t.api<{ id: string; url: string; token: string }>('POST', '/v1/mcp/endpoints', { name })).body;
  const ready = (name: string) => () => t.gw.hub.upstreams.get(name)?.state === 'ready';
  const call = (tool: string) => t.api<{ content: Array<{ text: string }>; isError: boolean }>('POST', `/v1/tools/${tool}/call`, { arguments: {} });

  it('keeps a tool process that answers ping with an error: an error is an answer (hand-written servers lack ping)', async () => {
    const ep = await create('noping');
    const f = await fakeTool(ep.url, (m, fake) => {
      if (m.method === 'ping') fake.send({ jsonrpc: '2.0', id: m.id, error: { code: -32601, message: 'Method not found' } });
      answerCalls(m, fake);
    });
    await untilHub(t.gw.hub, ready('noping'), 'the ping-less fake to be ready');
    // The second keepalive ping comes a full interval after the first was answered with an error: not cut for it.
    const second = await Promise.race([f.nth('ping', 2).then(() => 'second ping'), f.closed.then((c) => `closed ${c.code} ${c.reason}`)]);
    expect(second).toBe('second ping');
    expect(f.ws.readyState).toBe(WebSocket.OPEN);
    const r = await call('mcp__noping__hello');
    expect(r.body).toMatchObject({ isError: false, content: [{ text: 'hello back' }] });
    f.ws.close();
  });

  it('refuses sampling, elicitation and roots asked by a tool process with no caller to answer: each answered, counted, a few log lines', async () => {
    const ep = await create('asker');
    const f = await fakeTool(ep.url, (m, fake) => {
      if (m.method === 'ping') fake.send({ jsonrpc: '2.0', id: m.id, result: {} });
      answerCalls(m, fake);
    });
    await untilHub(t.gw.hub, ready('asker'), 'the asking fake to be ready');
    const answers = new Map<string, Rpc>();
    const all = new Promise<void>((resolve) =>
      f.ws.on('message', (data) => {
        const m = JSON.parse(data.toString()) as Rpc;
        if (typeof m.id === 'string' && m.id.startsWith('ask') && m.method === undefined) answers.set(m.id, m);
        if (answers.size === 301) resolve();
      }),
    );
    const refusedBefore = await t.metric('voxgate_tool_calls_total', { kind: 'peer_request', outcome: 'refused' });
    const linesBefore = t.logs.filter((l) => l.msg === 'request from an MCP server refused').length;
    for (let i = 0; i < 150; i++) {
      f.send({ jsonrpc: '2.0', id: `ask-s${i}`, method: 'sampling/createMessage', params: { messages: [], maxTokens: 1 } });
      f.send({
        jsonrpc: '2.0',
        id: `ask-e${i}`,
        method: 'elicitation/create',
        params: { message: 'name?', requestedSchema: { type: 'object', properties: {} } },
      });
    }
    f.send({ jsonrpc: '2.0', id: 'ask-roots', method: 'roots/list' });
    await all;
    expect(answers.get('ask-s0')?.error).toMatchObject({ message: expect.stringMatching(/refused by the Voxgate gateway: no MCP client is waiting/) });
    expect(answers.get('ask-e149')?.error).toMatchObject({ message: expect.stringMatching(/refused by the Voxgate gateway/) });
    expect(answers.get('ask-roots')?.error).toMatchObject({ code: -32601 });
    expect((await t.metric('voxgate_tool_calls_total', { kind: 'peer_request', outcome: 'refused' })) - refusedBefore).toBe(300);
    // A line for the operator, not one per request: the requests are the tool process's to send, 500 a second.
    const lines = t.logs.filter((l) => l.msg === 'request from an MCP server refused').length - linesBefore;
    expect(lines).toBeGreaterThanOrEqual(1);
    expect(lines).toBeLessThanOrEqual(2);
    // Still served.
    expect((await call('mcp__asker__hello')).body).toMatchObject({ isError: false });
    f.ws.close();
  });

  it('skips and counts a frame that is not one JSON-RPC message (a batch of 10 000, a stray line); a flood of them is still cut', async () => {
    const ep = await create('batcher');
    const f = await fakeTool(ep.url, (m, fake) => {
      if (m.method === 'ping') fake.send({ jsonrpc: '2.0', id: m.id, result: {} });
      answerCalls(m, fake);
    });
    await untilHub(t.gw.hub, ready('batcher'), 'the fake to be ready');
    const skipped = () => t.metric('voxgate_frames_rejected_total', { reason: 'not_json' });
    const before = await skipped();
    f.send(JSON.stringify(Array.from({ length: 10_000 }, (_, i) => ({ jsonrpc: '2.0', method: 'notifications/message', params: { level: 'info', data: i } }))));
    f.send('DEBUG: computing...\n');
    // Frames are read in order: the call's answer comes after both were skipped.
    expect((await call('mcp__batcher__hello')).body).toMatchObject({ isError: false, content: [{ text: 'hello back' }] });
    expect((await skipped()) - before).toBe(2);
    for (let i = 0; i < 20_000 && f.ws.readyState === WebSocket.OPEN; i++) f.send('not json');
    expect(await f.closed).toMatchObject({ code: 1008 });
  });

  it('tells the caller of a tool whose answer was over the frame bound that it was too large, not to try again', async () => {
    const ep = await create('huge');
    const f = await fakeTool(ep.url, (m, fake) => {
      if (m.method === 'ping') fake.send({ jsonrpc: '2.0', id: m.id, result: {} });
      if (m.method === 'tools/call') fake.send({ jsonrpc: '2.0', id: m.id, result: { content: [{ type: 'text', text: 'x'.repeat(3_000_000) }] } });
    });
    await untilHub(t.gw.hub, ready('huge'), 'the fake to be ready');
    const r = await call('mcp__huge__hello');
    expect(r.body.isError).toBe(true);
    expect(r.body.content[0]!.text).toMatch(/^The tool server "huge" answered with a result too large to pass on: .*over the limit of \d+ bytes/);
    expect(r.body.content[0]!.text).not.toMatch(/Try again/);
    expect((await f.closed).code).toBe(1009);
  });

  it('still cuts a tool process that never answers ping (4002)', async () => {
    const ep = await create('deaf');
    const f = await fakeTool(ep.url, () => undefined);
    await untilHub(t.gw.hub, ready('deaf'), 'the deaf fake to be ready');
    expect(await f.closed).toEqual({ code: 4002, reason: 'no answer to ping' });
  });
});

describe("MCP endpoint when the gateway's wall clock steps back (NTP)", { timeout: 60_000 }, () => {
  let t: TestGateway;
  const realNow = Date.now.bind(Date);
  let offset = 0;
  beforeAll(async () => {
    // Installed before the gateway starts: what it captures as its clock (a bucket's `now`) is this one too.
    vi.spyOn(Date, 'now').mockImplementation(() => realNow() + offset);
    t = await startTestGateway({ mcp: { connectTimeoutMs: 5000 } });
  });
  afterAll(async () => {
    await t.close();
    vi.restoreAllMocks();
  });

  it('keeps serving a tool process and lets it reconnect: its bounds measure on a monotonic clock', async () => {
    const ep = (await t.api<{ url: string }>('POST', '/v1/mcp/endpoints', { name: 'clock' })).body;
    const f = await fakeTool(ep.url, (m, fake) => {
      if (m.method === 'ping') fake.send({ jsonrpc: '2.0', id: m.id, result: {} });
      answerCalls(m, fake);
    });
    await untilHub(t.gw.hub, () => t.gw.hub.upstreams.get('clock')?.state === 'ready', 'the fake to be ready');
    // An hour back: a bucket refilled by a negative time. The frame-rate bound took the tool process's next frame (its
    // answer) for a flood and cut it (1008); the per-token connect bound answered its reconnect 429 for an hour.
    offset = -3_600_000;
    const r = await t.api<{ content: Array<{ text: string }>; isError: boolean }>('POST', '/v1/tools/mcp__clock__hello/call', { arguments: {} });
    expect(r.body).toMatchObject({ isError: false, content: [{ text: 'hello back' }] });
    expect(f.ws.readyState).toBe(WebSocket.OPEN);
    f.ws.close();
    await f.closed;
    const again = await fakeTool(ep.url, answerCalls);
    expect(again.ws.readyState).toBe(WebSocket.OPEN);
    again.ws.close();
  });
});
