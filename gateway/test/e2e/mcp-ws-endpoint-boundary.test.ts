import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WebSocket } from 'ws';
import { startTestGateway, type TestGateway } from '../../../test/support/gateway-harness.js';
import { untilHub } from '../../../test/support/hub.js';
import { until } from '../../../test/support/wait.js';

/**
 * The inbound MCP endpoint as a boundary: a hand-written tool process on a raw WebSocket (frames with a
 * trailing newline, as mcp_pipe.py sends them) that lists, changes its list, or misbehaves.
 */
type Rpc = { jsonrpc: '2.0'; id?: number | string; method?: string; params?: Record<string, unknown>; result?: unknown };

interface FakeTool {
  ws: WebSocket;
  tools: Array<{ name: string; description: string; inputSchema: Record<string, unknown> }>;
  /** Listed on prompts/list (the prompts capability is declared only when given). */
  prompts?: Array<{ name: string; description: string }>;
  /** Answer tools/call (undefined: never answer). */
  onCall?: (name: string, args: Record<string, unknown>) => string | undefined;
  /** Answer initialize at all. */
  answersInitialize: boolean;
  closed: Promise<{ code: number; reason: string }>;
  send(msg: Rpc | string): void;
}

function fakeTool(url: string, o: Partial<Pick<FakeTool, 'tools' | 'prompts' | 'onCall' | 'answersInitialize'>> = {}): Promise<FakeTool> {
  const ws = new WebSocket(url);
  const fake: FakeTool = {
    ws,
    tools: o.tools ?? [{ name: 'hello', description: 'says hello', inputSchema: { type: 'object', properties: { who: { type: 'string' } } } }],
    answersInitialize: o.answersInitialize ?? true,
    closed: new Promise((resolve) => ws.once('close', (code, reason) => resolve({ code, reason: reason.toString() }))),
    send: (msg) => ws.send(typeof msg === 'string' ? msg : JSON.stringify(msg) + '\n'),
    ...(o.onCall ? { onCall: o.onCall } : {}),
    ...(o.prompts ? { prompts: o.prompts } : {}),
  };
  ws.on('message', (data) => {
    const m = JSON.parse(data.toString()) as Rpc;
    if (m.method === 'initialize' && fake.answersInitialize)
      fake.send({
        jsonrpc: '2.0',
        id: m.id!,
        result: {
          protocolVersion: (m.params as { protocolVersion: string }).protocolVersion,
          capabilities: { tools: { listChanged: true }, ...(fake.prompts ? { prompts: {} } : {}) },
          serverInfo: { name: 'fake', version: '1' },
        },
      });
    else if (m.method === 'tools/list') fake.send({ jsonrpc: '2.0', id: m.id!, result: { tools: fake.tools } });
    else if (m.method === 'prompts/list') fake.send({ jsonrpc: '2.0', id: m.id!, result: { prompts: fake.prompts ?? [] } });
    else if (m.method === 'ping') fake.send({ jsonrpc: '2.0', id: m.id!, result: {} });
    else if (m.method === 'tools/call') {
      const p = m.params as { name: string; arguments: Record<string, unknown> };
      const text = fake.onCall?.(p.name, p.arguments);
      if (text !== undefined) fake.send({ jsonrpc: '2.0', id: m.id!, result: { content: [{ type: 'text', text }] } });
    }
  });
  return new Promise((resolve, reject) => {
    ws.once('open', () => resolve(fake));
    ws.once('unexpected-response', (_req, res) => reject(new Error(`HTTP ${res.statusCode}`)));
    ws.once('error', reject);
  });
}

describe('MCP endpoint boundary', { timeout: 60_000 }, () => {
  let t: TestGateway;
  beforeAll(async () => {
    t = await startTestGateway({ mcp: { connectTimeoutMs: 1500, endpoints: { unknownTokenBurst: 3, unknownTokenPerSecond: 0.01 } } });
  });
  afterAll(async () => {
    await t.close();
  });
  const hub = () => t.gw.hub;
  const create = async (name: string) => (await t.api<{ id: string; url: string; token: string }>('POST', '/v1/mcp/endpoints', { name })).body;
  const ready = (name: string) => () => hub().upstreams.get(name)?.state === 'ready';
  const call = (tool: string, args: Record<string, unknown>, timeoutMs?: number) =>
    t.api<{ content: Array<{ text: string }>; isError: boolean }>('POST', `/v1/tools/${tool}/call`, { arguments: args, ...(timeoutMs ? { timeoutMs } : {}) });

  it('relists on tools/list_changed; a newer connection listing every tool of an older one replaces it (4000): the same process reconnected', async () => {
    const ep = await create('fake');
    const first = await fakeTool(ep.url, { onCall: (_n, a) => `first ${String(a['who'])}` });
    await untilHub(hub(), ready('fake'), 'the fake to be ready');
    expect((await call('mcp__fake__hello', { who: 'x' })).body.content[0]!.text).toBe('first x');

    first.tools = [...first.tools, { name: 'bye', description: 'says bye', inputSchema: { type: 'object' } }];
    first.send({ jsonrpc: '2.0', method: 'notifications/tools/list_changed' });
    await untilHub(
      hub(),
      () =>
        hub()
          .tools({})
          .some((x) => x.name === 'mcp__fake__bye'),
      'the new tool',
    );

    const second = await fakeTool(ep.url, { tools: first.tools, onCall: (_n, a) => `second ${String(a['who'])}` });
    expect(await first.closed).toEqual({ code: 4000, reason: 'replaced by a newer connection with the same token' });
    await untilHub(hub(), ready('fake'), 'the second connection to be ready');
    expect((await call('mcp__fake__hello', { who: 'y' })).body.content[0]!.text).toBe('second y');
    second.ws.close();
    await second.closed;
    await untilHub(hub(), () => hub().upstreams.get('fake')?.state === 'failed', 'the endpoint to wait again');
  });

  it("serves several tool processes on one token together, as mcp_pipe.py's config mode dials them: each tool called on its own process", async () => {
    const ep = await create('multi');
    const tool = (name: string) => ({ name, description: name, inputSchema: { type: 'object' } });
    const calc = await fakeTool(ep.url, { tools: [tool('add'), tool('shared')], onCall: (n) => `calc ${n}` });
    await untilHub(hub(), ready('multi'), 'the first process to be ready');
    const weather = await fakeTool(ep.url, { tools: [tool('forecast'), tool('shared')], onCall: (n) => `weather ${n}` });
    const names = () =>
      hub()
        .tools({})
        .filter((x) => x.name.startsWith('mcp__multi__'))
        .map((x) => x.name)
        .sort();
    await untilHub(hub(), () => names().length === 3, 'the tools of both processes');
    expect(names()).toEqual(['mcp__multi__add', 'mcp__multi__forecast', 'mcp__multi__shared']);
    expect((await call('mcp__multi__add', {})).body.content[0]!.text).toBe('calc add');
    expect((await call('mcp__multi__forecast', {})).body.content[0]!.text).toBe('weather forecast');
    // A name both list: the newer connection's.
    expect((await call('mcp__multi__shared', {})).body.content[0]!.text).toBe('weather shared');
    const view = async () =>
      (await t.api<{ endpoints: Array<{ id: string; state: string; tools: string[] }> }>('GET', '/v1/mcp/endpoints')).body.endpoints.find(
        (e) => e.id === ep.id,
      )!;
    expect(await view()).toMatchObject({ state: 'connected' });
    expect((await view()).tools.sort()).toEqual(['add', 'forecast', 'shared']);

    // One leaves: its tools go, the other's stay (the shared name back to the one still there).
    weather.ws.close();
    await weather.closed;
    await untilHub(hub(), () => names().length === 2, 'the leaving process to take its tools');
    expect(names()).toEqual(['mcp__multi__add', 'mcp__multi__shared']);
    expect((await call('mcp__multi__shared', {})).body.content[0]!.text).toBe('calc shared');
    expect(hub().upstreams.get('multi')?.state).toBe('ready');
    calc.ws.close();
    await calc.closed;
  });

  it('a tool name listed twice keeps its first definition: one name in GET /v1/tools and in the hub list', async () => {
    const ep = await create('twice');
    const fake = await fakeTool(ep.url, {
      tools: [
        { name: 'echo', description: 'the first echo', inputSchema: { type: 'object', properties: { who: { type: 'string' } } } },
        { name: 'other', description: 'another tool', inputSchema: { type: 'object' } },
        { name: 'echo', description: 'the second echo', inputSchema: { type: 'object', properties: { n: { type: 'number' } } } },
      ],
      onCall: (n, a) => `${n} ${String(a['who'])}`,
      prompts: [
        { name: 'greet', description: 'the first greeting' },
        { name: 'greet', description: 'the second greeting' },
      ],
    });
    await untilHub(hub(), ready('twice'), 'the tool process to be ready');
    const listed = (await t.api<{ tools: Array<{ name: string; description: string }> }>('GET', '/v1/tools')).body.tools.filter((x) =>
      x.name.startsWith('mcp__twice__'),
    );
    expect(listed.map((x) => x.name).sort()).toEqual(['mcp__twice__echo', 'mcp__twice__other']);
    expect(listed.find((x) => x.name === 'mcp__twice__echo')!.description).toBe('the first echo');
    const names = hub()
      .tools({})
      .map((x) => x.name);
    expect(new Set(names).size).toBe(names.length);
    expect((await call('mcp__twice__echo', { who: 'z' })).body.content[0]!.text).toBe('echo z');
    expect(t.logs.some((l) => l['msg'] === 'upstream server listed a tool name more than once; its first definition is kept' && l['repeated'] === 1)).toBe(
      true,
    );
    const prompts = (await t.api<{ prompts: Array<{ name: string; description: string }> }>('GET', '/v1/mcp/prompts')).body.prompts;
    expect(prompts.filter((x) => x.name.startsWith('mcp__twice__'))).toEqual([
      expect.objectContaining({ name: 'mcp__twice__greet', description: 'the first greeting' }),
    ]);
    fake.ws.close();
  });

  it('times out a call the tool process never answers, and cuts one that never answers initialize (4002)', async () => {
    const ep = await create('mute');
    const mute = await fakeTool(ep.url, { onCall: () => undefined });
    await untilHub(hub(), ready('mute'), 'the mute fake to be ready');
    const r = await call('mcp__mute__hello', {}, 300);
    expect(r.body.isError).toBe(true);
    expect(r.body.content[0]!.text).toMatch(/did not answer/);
    mute.ws.close();

    const silent = await fakeTool(ep.url, { answersInitialize: false });
    expect((await silent.closed).code).toBe(4002);
  });

  it('closes on a frame nested too deep (1008), a frame over the size bound (1009), and a flood (1008)', async () => {
    const ep = await create('hostile');
    const deep = await fakeTool(ep.url);
    await untilHub(hub(), ready('hostile'), 'the hostile fake to be ready');
    deep.send('['.repeat(100_000) + ']'.repeat(100_000));
    expect((await deep.closed).code).toBe(1008);

    const big = await fakeTool(ep.url);
    await untilHub(hub(), ready('hostile'), 'ready again');
    big.send(JSON.stringify({ jsonrpc: '2.0', method: 'notifications/message', params: { level: 'info', data: 'x'.repeat(4 * 1024 * 1024) } }));
    expect((await big.closed).code).toBe(1009);

    const flood = await fakeTool(ep.url);
    await untilHub(hub(), ready('hostile'), 'ready again');
    for (let i = 0; i < 20_000 && flood.ws.readyState === WebSocket.OPEN; i++)
      flood.send({ jsonrpc: '2.0', method: 'notifications/progress', params: { progressToken: 1, progress: i } });
    expect((await flood.closed).code).toBe(1008);
    expect(await t.metric('voxgate_frames_rejected_total', { reason: 'flood' })).toBeGreaterThan(0);
  });

  it('refuses unknown tokens with 401, then 429 once an address has tried too many', async () => {
    const base = `ws://127.0.0.1:${t.gw.httpPort}/mcp_endpoint/mcp/`;
    const statuses: string[] = [];
    for (let i = 0; i < 5; i++)
      statuses.push(
        await fakeTool(`${base}?token=wrong${i}`).then(
          () => 'open',
          (e: Error) => e.message,
        ),
      );
    expect(statuses.slice(0, 3)).toEqual(['HTTP 401', 'HTTP 401', 'HTTP 401']);
    expect(statuses.slice(3)).toEqual(['HTTP 429', 'HTTP 429']);
  });
});

describe('MCP endpoint caps and allowed_tools', { timeout: 60_000 }, () => {
  let t: TestGateway;
  beforeAll(async () => {
    t = await startTestGateway({ mcp: { endpoints: { maxConnections: 2, maxConnectionsPerToken: 1 } } });
  });
  afterAll(async () => {
    await t.close();
  });
  const hub = () => t.gw.hub;
  const create = async (body: Record<string, unknown>) => (await t.api<{ id: string; url: string; token: string }>('POST', '/v1/mcp/endpoints', body)).body;
  const ready = (name: string) => () => hub().upstreams.get(name)?.state === 'ready';
  const refused = (reason: string) => t.metric('voxgate_mcp_inbound_endpoint_refused_total', { reason });
  const TWO = [
    { name: 'hello', description: 'says hello', inputSchema: { type: 'object' } },
    { name: 'bye', description: 'says bye', inputSchema: { type: 'object' } },
  ];

  it('refuses a second socket with one token past maxConnectionsPerToken (503), and any past maxConnections; the first keeps serving', async () => {
    const a = await create({ name: 'capa' });
    const b = await create({ name: 'capb' });
    const c = await create({ name: 'capc' });
    const first = await fakeTool(a.url, { onCall: () => 'a' });
    await untilHub(hub(), ready('capa'), 'capa to be ready');
    const tokenFull = await refused('token_full');
    await expect(fakeTool(a.url)).rejects.toThrow('HTTP 503');
    expect(await refused('token_full')).toBe(tokenFull + 1);

    const second = await fakeTool(b.url);
    await untilHub(hub(), ready('capb'), 'capb to be ready');
    expect(await t.metric('voxgate_mcp_inbound_endpoint_connections')).toBe(2);
    const totalFull = await refused('total_full');
    await expect(fakeTool(c.url)).rejects.toThrow('HTTP 503');
    expect(await refused('total_full')).toBe(totalFull + 1);

    // The refusals took nothing from the connections that were in.
    const calls = await t.metric('voxgate_mcp_inbound_endpoint_tool_calls_total', { outcome: 'ok' });
    const r = await t.api<{ content: Array<{ text: string }> }>('POST', '/v1/tools/mcp__capa__hello/call', { arguments: {} });
    expect(r.body.content[0]!.text).toBe('a');
    expect(await t.metric('voxgate_mcp_inbound_endpoint_tool_calls_total', { outcome: 'ok' })).toBe(calls + 1);

    // A place frees when a connection leaves.
    second.ws.close();
    await second.closed;
    await until(async () => (await t.gw.metrics.inboundEndpointConnections.get()).values[0]?.value === 1, 'the count to drop');
    const third = await fakeTool(c.url);
    await untilHub(hub(), ready('capc'), 'capc to be ready');
    first.ws.close();
    third.ws.close();
    await Promise.all([first.closed, third.closed]);
  });

  it("no server name can make another server's tool names: '__' inside a name, or '_' at its end, is refused", async () => {
    const ep = await create({ name: 'carve' });
    const tool = await fakeTool(ep.url, { tools: [{ name: 'x__y.z', description: 'd', inputSchema: { type: 'object' } }], onCall: (n) => n });
    try {
      await untilHub(hub(), ready('carve'), 'carve to be ready');
      const mine = () => t.api<{ content: Array<{ text: string }> }>('POST', '/v1/tools/mcp__carve__x__y_z/call', { arguments: {} });
      expect((await mine()).body.content[0]!.text).toBe('x__y.z');
      // `carve__x` with a tool `y_z` would have made the same name, and won it (it needed no cleaning).
      for (const name of ['carve__x', 'carve_', 'a__b']) {
        const r = await t.api<{ code: string; detail: string }>('POST', '/v1/mcp/endpoints', { name });
        expect([name, r.status, r.body.code]).toEqual([name, 400, 'INVALID_REQUEST']);
        expect(r.body.detail).toMatch(/^body\/name must match pattern/);
      }
      for (const name of ['carve_x', '_lead', 'a-b_c']) expect((await t.api('POST', '/v1/mcp/endpoints', { name })).status).toBe(201);
      expect((await mine()).body.content[0]!.text).toBe('x__y.z');
    } finally {
      tool.ws.close();
      await tool.closed;
    }
  });

  it('offers only allowed_tools of a tool process; the others are not callable', async () => {
    const ep = await create({ name: 'picky', allowed_tools: ['hello'] });
    const tool = await fakeTool(ep.url, { tools: TWO, onCall: (n) => n });
    try {
      await untilHub(hub(), ready('picky'), 'picky to be ready');
      const names = hub()
        .tools({})
        .map((x) => x.name)
        .filter((n) => n.startsWith('mcp__picky__'));
      expect(names).toEqual(['mcp__picky__hello']);
      expect((await t.api<{ content: Array<{ text: string }> }>('POST', '/v1/tools/mcp__picky__hello/call', { arguments: {} })).body.content[0]!.text).toBe(
        'hello',
      );
      expect((await t.api<{ code: string }>('POST', '/v1/tools/mcp__picky__bye/call', { arguments: {} })).status).toBe(404);
      const listed = await t.api<{ endpoints: Array<{ name: string; allowed_tools?: string[] | null; tools: string[] }> }>('GET', '/v1/mcp/endpoints');
      expect(listed.body.endpoints.find((e) => e.name === 'picky')).toMatchObject({ tools: ['hello'] });
    } finally {
      tool.ws.close();
      await tool.closed;
    }
  });
});

describe('MCP endpoint tokens are bounded in number (red team 3)', () => {
  it("caps a tenant's endpoints and the gateway's, counts the refusals, and frees a place on revocation", async () => {
    // Any key, a tenant's included, made endpoints without end: each a server in the hub and a stored record.
    const KEY_A = 'key-tenant-acme-0123456789';
    const KEY_B = 'key-tenant-globex-0123456789';
    const t = await startTestGateway({
      apiKeys: ['test-api-key-0123456789', KEY_A, KEY_B],
      apiKeyTenants: { [KEY_A]: 'acme', [KEY_B]: 'globex' },
      mcp: { endpoints: { maxEndpoints: 5, maxEndpointsPerTenant: 3 } },
    });
    try {
      const create = (name: string, apiKey: string) => t.api<{ id: string; code?: string; detail?: string }>('POST', '/v1/mcp/endpoints', { name }, { apiKey });
      for (const n of ['a1', 'a2', 'a3']) expect((await create(n, KEY_A)).status).toBe(201);
      const over = await create('a4', KEY_A);
      expect([over.status, over.body.code]).toEqual([409, 'TOO_MANY_ENDPOINTS']);
      expect(over.body.detail).toMatch(/tenant "acme" holds its maximum of 3/);
      expect(t.gw.hub.upstreams.has('a4')).toBe(false);
      // Another tenant still has room, up to the gateway's total.
      expect((await create('b1', KEY_B)).status).toBe(201);
      expect((await create('b2', KEY_B)).status).toBe(201);
      const total = await create('b3', KEY_B);
      expect([total.status, total.body.code]).toEqual([409, 'TOO_MANY_ENDPOINTS']);
      expect(total.body.detail).toMatch(/mcp\.endpoints\.maxEndpoints/);
      expect(await t.metric('voxgate_mcp_inbound_endpoint_refused_total', { reason: 'tenant_endpoints' })).toBe(1);
      expect(await t.metric('voxgate_mcp_inbound_endpoint_refused_total', { reason: 'total_endpoints' })).toBe(1);
      // Revoking one makes room again.
      const listed = (await t.api<{ endpoints: Array<{ id: string; name: string }> }>('GET', '/v1/mcp/endpoints', undefined, { apiKey: KEY_A })).body.endpoints;
      expect((await t.api('DELETE', `/v1/mcp/endpoints/${listed.find((e) => e.name === 'a1')!.id}`, undefined, { apiKey: KEY_A })).status).toBe(204);
      expect((await create('a4', KEY_A)).status).toBe(201);
    } finally {
      await t.close();
    }
  });
});
