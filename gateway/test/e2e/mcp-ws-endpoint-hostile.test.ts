import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WebSocket } from 'ws';
import { startTestGateway, TEST_API_KEY, type TestGateway } from '../../../test/support/gateway-harness.js';
import { untilHub } from '../../../test/support/hub.js';

/**
 * Hostile tool processes dialed in on the MCP endpoint (red team 6): a raw WebSocket that answers as it likes.
 */
type Rpc = { jsonrpc: '2.0'; id?: number | string; method?: string; params?: Record<string, unknown> };
type Answer = (m: Rpc) => Record<string, unknown> | undefined;

interface Hostile {
  ws: WebSocket;
  /** Requests the gateway sent, by method. */
  asked: Map<string, number>;
  send(msg: Record<string, unknown>): void;
}

/** A tool process that answers initialize (tools with listChanged) and ping, and everything else through `answer`. */
function hostile(
  url: string,
  answer: Answer,
  serverInfo = { name: 'hostile', version: '1' },
  capabilities: Record<string, unknown> = { tools: { listChanged: true } },
): Promise<Hostile> {
  const ws = new WebSocket(url);
  const h: Hostile = { ws, asked: new Map(), send: (msg) => ws.send(JSON.stringify(msg) + '\n') };
  ws.on('message', (data) => {
    const m = JSON.parse(data.toString()) as Rpc;
    if (m.method) h.asked.set(m.method, (h.asked.get(m.method) ?? 0) + 1);
    if (m.id === undefined) return;
    if (m.method === 'initialize')
      return h.send({
        jsonrpc: '2.0',
        id: m.id,
        result: {
          protocolVersion: (m.params as { protocolVersion: string }).protocolVersion,
          capabilities,
          serverInfo,
        },
      });
    if (m.method === 'ping') return h.send({ jsonrpc: '2.0', id: m.id, result: {} });
    const result = answer(m);
    if (result) h.send({ jsonrpc: '2.0', id: m.id, result });
  });
  return new Promise((resolve, reject) => {
    ws.once('open', () => resolve(h));
    ws.once('unexpected-response', (_req, res) => reject(new Error(`HTTP ${res.statusCode}`)));
    ws.once('error', reject);
  });
}

/** tools/list pages without end: `perPage` new tools each, every description `descBytes` long. */
const endlessPages =
  (perPage: number, descBytes: number): Answer =>
  (m) => {
    if (m.method !== 'tools/list') return undefined;
    const page = Number((m.params?.['cursor'] as string | undefined) ?? '0');
    const tools = Array.from({ length: perPage }, (_, i) => ({
      name: `t${page * perPage + i}`,
      description: 'x'.repeat(descBytes),
      inputSchema: { type: 'object' },
    }));
    return { tools, nextCursor: String(page + 1) };
  };

describe('MCP endpoint: a hostile tool list', { timeout: 60_000 }, () => {
  let t: TestGateway;
  beforeAll(async () => {
    t = await startTestGateway({ mcp: { connectTimeoutMs: 10_000, maxToolsPerServer: 12, maxToolBytesPerServer: 64 * 1024 } });
  });
  afterAll(async () => {
    await t.close();
  });
  const hub = () => t.gw.hub;
  const create = async (name: string) => (await t.api<{ id: string; url: string; token: string }>('POST', '/v1/mcp/endpoints', { name })).body;
  const cut = async (reason: string) => (await t.gw.metrics.hubToolListsCut.get()).values.find((v) => v.labels['reason'] === reason)?.value ?? 0;
  const listed = async (server: string) =>
    (await t.api<{ tools: Array<{ name: string; description: string }> }>('GET', '/v1/tools')).body.tools.filter((x) => x.name.startsWith(`mcp__${server}__`));

  it('pages without end: the walk stops at maxToolsPerServer and the endpoint serves what it kept', async () => {
    const ep = await create('endless');
    const h = await hostile(ep.url, endlessPages(5, 10));
    // Before: the SDK's walk asked 64 pages, then failed the connect (pagination did not terminate).
    await untilHub(hub(), () => hub().upstreams.get('endless')?.state === 'ready', 'the endpoint to be ready');
    expect(h.asked.get('tools/list')).toBeLessThanOrEqual(3);
    expect((await listed('endless')).length).toBe(12);
    expect(await cut('tools')).toBe(1);
    expect(t.logs.some((l) => l['msg'] === 'upstream tool list over a bound; the rest left out' && l['cut'] === 'tools')).toBe(true);
    h.ws.close();
  });

  it('big descriptions: the tools kept stay within maxToolBytesPerServer, on connect and on every list_changed', async () => {
    const ep = await create('fat');
    const h = await hostile(ep.url, endlessPages(2, 20_000));
    await untilHub(hub(), () => hub().upstreams.get('fat')?.state === 'ready', 'the endpoint to be ready');
    const kept = await listed('fat');
    // 64 KiB holds three tools of ~20 KB; before, the first 12 of 64 pages' tools (~240 KB) were served and all 128 held.
    expect(kept.length).toBe(3);
    expect(h.asked.get('tools/list')).toBe(2);
    expect(await cut('bytes')).toBe(1);

    for (let i = 0; i < 20; i++) h.send({ jsonrpc: '2.0', method: 'notifications/tools/list_changed' });
    const cutLines = () => t.logs.filter((l) => l['msg'] === 'upstream tool list over a bound; the rest left out' && l['cut'] === 'bytes').length;
    await untilHub(hub(), () => cutLines() >= 2, 'a relisting');
    expect(await cut('bytes')).toBeGreaterThanOrEqual(2);
    expect((await listed('fat')).length).toBe(3);
    h.ws.close();
  });

  it("several processes on one token share the bound: a second one's tools fit in what the first left", async () => {
    const ep = await create('fats');
    // Two tools of ~20 KB each (then no more pages), from processes that name themselves apart.
    const twoFat: Answer = (m) =>
      m.method === 'tools/list'
        ? { tools: [0, 1].map((i) => ({ name: `f${i}`, description: 'x'.repeat(20_000), inputSchema: { type: 'object' } })) }
        : undefined;
    const otherFat: Answer = (m) =>
      m.method === 'tools/list'
        ? { tools: [0, 1].map((i) => ({ name: `g${i}`, description: 'x'.repeat(20_000), inputSchema: { type: 'object' } })) }
        : undefined;
    const first = await hostile(ep.url, twoFat, { name: 'first', version: '1' });
    await untilHub(hub(), () => hub().upstreams.get('fats')?.state === 'ready', 'the first process');
    expect((await listed('fats')).length).toBe(2);
    const bytesCut = await cut('bytes');
    const second = await hostile(ep.url, otherFat, { name: 'second', version: '1' });
    await untilHub(hub(), () => hub().upstreams.get('fats')!.tools.length === 3, 'the second process to be served');
    expect(await cut('bytes')).toBe(bytesCut + 1);
    // 64 KiB for the endpoint: the first's two tools and one of the second's; before, each process had 64 KiB of its own.
    expect((await listed('fats')).map((x) => x.name).sort()).toEqual(['mcp__fats__f0', 'mcp__fats__f1', 'mcp__fats__g0']);
    first.ws.close();
    second.ws.close();
  });
  it('processes naming themselves alike share the bound too: past it with a newer one, the older goes (4000)', async () => {
    const ep = await create('twins');
    // Two tools of ~20 KB each, under one serverInfo name, tool names apart: no newer one lists every tool of the older.
    const fat =
      (prefix: string): Answer =>
      (m) =>
        m.method === 'tools/list'
          ? { tools: [0, 1].map((i) => ({ name: `${prefix}${i}`, description: 'x'.repeat(20_000), inputSchema: { type: 'object' } })) }
          : undefined;
    const first = await hostile(ep.url, fat('a'), { name: 'twin', version: '1' });
    await untilHub(hub(), () => hub().upstreams.get('twins')?.state === 'ready', 'the first process');
    const closed = new Promise<number>((resolve) => first.ws.once('close', (code) => resolve(code)));
    const second = await hostile(ep.url, fat('b'), { name: 'twin', version: '1' });
    const names = () =>
      hub()
        .upstreams.get('twins')!
        .tools.map((x) => x.name);
    await untilHub(hub(), () => names().includes('b0'), 'the second process to be served');
    // Before: each listed into a whole share of its own (the other counted as its old self), and the endpoint kept
    // both, ~80 KB over its 64 KiB; eight such sockets held eight times the bound.
    expect(names().sort()).toEqual(['b0', 'b1']);
    expect(await closed).toBe(4000);
    second.ws.close();
  });
});

describe('MCP endpoint: what a tool process says reaches our log bounded', { timeout: 60_000 }, () => {
  let t: TestGateway;
  beforeAll(async () => {
    t = await startTestGateway({});
  });
  afterAll(async () => {
    await t.close();
  });

  it('a huge serverInfo and a page of refused tools with huge names: a few short lines, a cut serverInfo', async () => {
    const ep = (await t.api<{ url: string }>('POST', '/v1/mcp/endpoints', { name: 'loud' })).body;
    let deep: Record<string, unknown> = { type: 'object' };
    for (let i = 0; i < 20; i++) deep = { type: 'object', properties: { a: deep } };
    const tools = Array.from({ length: 40 }, (_, i) => ({ name: `${'n'.repeat(10_000)}${i}`, inputSchema: deep }));
    const h = await hostile(ep.url, (m) => (m.method === 'tools/list' ? { tools: [...tools, { name: 'ok', inputSchema: { type: 'object' } }] } : undefined), {
      name: 'big'.repeat(100_000),
      version: '1',
    });
    await untilHub(t.gw.hub, () => t.gw.hub.upstreams.get('loud')?.state === 'ready', 'the endpoint to be ready');
    const servers = (await t.api<{ servers: Array<{ name: string; serverInfo: { name: string } | null }> }>('GET', '/v1/mcp/servers')).body.servers;
    expect(servers.find((x) => x.name === 'loud')?.serverInfo?.name).toHaveLength(256);
    // Before: 40 lines with a 10 KB name each, and the ready line with the 300 KB server name.
    expect(t.logs.filter((l) => l['msg'] === 'upstream tool schema over the bounds; tool left out')).toHaveLength(5);
    expect(t.logs.find((l) => l['msg'] === 'more upstream tool schemas over the bounds; those tools left out')?.['more']).toBe(35);
    expect(Math.max(...t.logs.map((l) => JSON.stringify(l).length))).toBeLessThan(4096);
    expect(await t.metric('voxgate_schemas_refused_total', { source: 'server' })).toBe(40);
    h.ws.close();
  });
});

describe("MCP endpoint: one tenant's tool process announcing changes without end", { timeout: 60_000 }, () => {
  const ACME_KEY = 'acme-key-0123456789abcdef';
  const GLOBEX_KEY = 'globex-key-0123456789abcdef';
  let t: TestGateway;
  beforeAll(async () => {
    t = await startTestGateway({ apiKeys: [TEST_API_KEY, ACME_KEY, GLOBEX_KEY], apiKeyTenants: { [ACME_KEY]: 'acme', [GLOBEX_KEY]: 'globex' } });
  });
  afterAll(async () => {
    await t.close();
  });

  it("reaches another tenant's /mcp session at most once per second, however often it says its prompts changed", async () => {
    const ep = (await t.api<{ url: string }>('POST', '/v1/mcp/endpoints', { name: 'noisy' }, { apiKey: ACME_KEY })).body;
    const h = await hostile(ep.url, (m) => (m.method === 'tools/list' ? { tools: [] } : undefined));
    await untilHub(t.gw.hub, () => t.gw.hub.upstreams.get('acme/noisy')?.state === 'ready', 'the endpoint to be ready');

    const watcher = new Client({ name: 'globex-watcher', version: '1' });
    const heard = { prompts: 0, resources: 0, tools: 0 };
    watcher.setNotificationHandler('notifications/prompts/list_changed', () => void heard.prompts++);
    watcher.setNotificationHandler('notifications/resources/list_changed', () => void heard.resources++);
    watcher.setNotificationHandler('notifications/tools/list_changed', () => void heard.tools++);
    await watcher.connect(
      new StreamableHTTPClientTransport(new URL(`${t.baseUrl}/mcp`), { requestInit: { headers: { authorization: `Bearer ${GLOBEX_KEY}` } } }),
    );
    await watcher.listPrompts(); // opens the session's notification stream

    // Each announcement in its own turn of the gateway's event loop: the ping answer comes after it was handled.
    const pinged = new Map<string, () => void>();
    h.ws.on('message', (data) => {
      const m = JSON.parse(data.toString()) as { id?: string };
      if (typeof m.id === 'string') pinged.get(m.id)?.();
    });
    for (let i = 0; i < 40; i++) {
      h.send({ jsonrpc: '2.0', method: 'notifications/prompts/list_changed' });
      await new Promise<void>((resolve) => {
        pinged.set(`p${i}`, resolve);
        h.send({ jsonrpc: '2.0', id: `p${i}`, method: 'ping' });
      });
    }
    // A change of the operator's (a new endpoint) is told after everything the flood caused: the stream keeps order.
    await expect.poll(() => heard.prompts, { timeout: 10_000 }).toBeGreaterThan(0);
    const tools = heard.tools;
    await t.api('POST', '/v1/mcp/endpoints', { name: 'marker' });
    await expect.poll(() => heard.tools, { timeout: 10_000 }).toBeGreaterThan(tools);
    // Before: one prompts/list_changed and one resources/list_changed per announcement (40 each).
    expect(heard.prompts).toBeLessThanOrEqual(4);
    expect(heard.resources).toBeLessThanOrEqual(4);
    expect(await t.metric('voxgate_mcp_server_changes_held_total')).toBeGreaterThanOrEqual(30);
    expect(t.logs.filter((l) => l['msg'] === 'MCP server announces changes faster than mcp.changeWindowMs; passed on once per window')).toHaveLength(1);
    await watcher.close();
    h.ws.close();
  });
});

describe('MCP endpoint: a tool process reconnecting in a loop', { timeout: 60_000 }, () => {
  let t: TestGateway;
  beforeAll(async () => {
    t = await startTestGateway({ mcp: { endpoints: { connectBurst: 3, connectsPerSecond: 0.01 } } });
  });
  afterAll(async () => {
    await t.close();
  });

  it('is refused with 429 past connectBurst connections with one token; another token is not held back', async () => {
    const ep = (await t.api<{ url: string }>('POST', '/v1/mcp/endpoints', { name: 'looper' })).body;
    const other = (await t.api<{ url: string }>('POST', '/v1/mcp/endpoints', { name: 'calm' })).body;
    const tools: Answer = (m) => (m.method === 'tools/list' ? { tools: [] } : undefined);
    for (let i = 0; i < 3; i++) {
      const h = await hostile(ep.url, tools);
      await untilHub(t.gw.hub, () => t.gw.hub.upstreams.get('looper')?.state === 'ready', 'the endpoint to be ready');
      h.ws.close();
    }
    // Before: every reconnect was a new MCP session, with its log lines and a namespace rebuild.
    await expect(hostile(ep.url, tools)).rejects.toThrow('HTTP 429');
    expect(await t.metric('voxgate_mcp_inbound_endpoint_refused_total', { reason: 'token_rate' })).toBe(1);
    expect(t.logs.some((l) => l['msg'] === 'MCP endpoint refused: one token reconnecting too often' && l['endpoint'] === 'looper')).toBe(true);
    const calm = await hostile(other.url, tools);
    await untilHub(t.gw.hub, () => t.gw.hub.upstreams.get('calm')?.state === 'ready', 'the other endpoint to be ready');
    calm.ws.close();
  });
});

describe('MCP endpoint: a tool process sending what nobody asked for', { timeout: 90_000 }, () => {
  let t: TestGateway;
  beforeAll(async () => {
    // A window long enough that every update of the flood but the first falls in it, however slow the machine.
    t = await startTestGateway({ mcp: { changeWindowMs: 60_000 } });
  });
  afterAll(async () => {
    await t.close();
  });

  /** Every frame the tool process sent before this has been handled: the gateway answers its ping after them. */
  const handled = (h: Hostile, id: string) =>
    new Promise<void>((resolve) => {
      h.ws.on('message', (data) => {
        if ((JSON.parse(data.toString()) as { id?: string }).id === id) resolve();
      });
      h.send({ jsonrpc: '2.0', id, method: 'ping' });
    });
  const echo: Answer = (m) => {
    if (m.method === 'tools/list') return { tools: [{ name: 'echo', inputSchema: { type: 'object' } }] };
    if (m.method === 'tools/call') return { content: [{ type: 'text', text: 'still here' }] };
    return undefined;
  };

  it('responses to ids never asked are dropped, counted and logged once per server; the process is still served', async () => {
    const ep = (await t.api<{ url: string }>('POST', '/v1/mcp/endpoints', { name: 'liar' })).body;
    const h = await hostile(ep.url, echo);
    await untilHub(t.gw.hub, () => t.gw.hub.upstreams.get('liar')?.state === 'ready', 'the endpoint to be ready');
    const unknown = () => t.metric('voxgate_frames_rejected_total', { reason: 'unknown_id' });
    const before = await unknown();
    // Made-up ids: numbers the gateway never used (one in its tool-call lane's range), a string, an error answer.
    const ids = [999_999, 2 ** 30 + 77, 'nobody-asked', 123_456];
    for (let i = 0; i < 50; i++) {
      const id = ids[i % ids.length]!;
      h.send(i % 5 === 4 ? { jsonrpc: '2.0', id, error: { code: -32000, message: 'made up' } } : { jsonrpc: '2.0', id, result: { made: 'up' } });
    }
    await handled(h, 'sync-1');
    // Before: each went to the SDK's onerror, a debug line each, counted nowhere.
    await expect.poll(unknown).toBe(before + 50);
    const lines = t.logs.filter((l) => l['msg'] === 'MCP server sent responses to requests nobody made (late, repeated or made up); dropped');
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatchObject({ server: 'liar', level: 40 });
    const r = await t.api<{ content: Array<{ text: string }> }>('POST', '/v1/tools/mcp__liar__echo/call', { arguments: {} });
    expect(r.status).toBe(200);
    expect(h.ws.readyState).toBe(WebSocket.OPEN);
    h.ws.close();
  });

  it('a flood of resources/updated reaches a subscribed /mcp session once per window, counted; the process is not cut', async () => {
    const ep = (await t.api<{ url: string }>('POST', '/v1/mcp/endpoints', { name: 'chatty' })).body;
    const resources: Answer = (m) => {
      if (m.method === 'tools/list') return { tools: [] };
      if (m.method === 'resources/list') return { resources: [{ uri: 'chatty://r', name: 'r' }] };
      if (m.method === 'resources/subscribe') return {};
      return undefined;
    };
    const h = await hostile(ep.url, resources, { name: 'chatty', version: '1' }, { tools: {}, resources: { subscribe: true } });
    await untilHub(t.gw.hub, () => t.gw.hub.upstreams.get('chatty')?.state === 'ready', 'the endpoint to be ready');

    const watcher = new Client({ name: 'watcher', version: '1' });
    const updates: string[] = [];
    let toolsChanged = 0;
    watcher.setNotificationHandler('notifications/resources/updated', (n) => void updates.push(n.params.uri));
    watcher.setNotificationHandler('notifications/tools/list_changed', () => void toolsChanged++);
    await watcher.connect(
      new StreamableHTTPClientTransport(new URL(`${t.baseUrl}/mcp`), { requestInit: { headers: { authorization: `Bearer ${TEST_API_KEY}` } } }),
    );
    await watcher.subscribeResource({ uri: 'chatty://r' });
    const held = () => t.metric('voxgate_mcp_server_changes_held_total');
    const heldBefore = await held();

    // 200 updates of the subscribed resource, 200 of one nobody subscribed to: within the frame rate, so never cut.
    for (let i = 0; i < 200; i++) {
      h.send({ jsonrpc: '2.0', method: 'notifications/resources/updated', params: { uri: 'chatty://r' } });
      h.send({ jsonrpc: '2.0', method: 'notifications/resources/updated', params: { uri: 'chatty://other' } });
      if (i % 50 === 49) await handled(h, `sync-${i}`);
    }
    // Before: every one of the 200 went on to the session (and each of the others to every session's listener).
    await expect.poll(held).toBeGreaterThanOrEqual(heldBefore + 199);
    await expect.poll(() => updates.length).toBe(1);
    // A change after the flood is told after everything it caused: the session's stream keeps order.
    const marker = toolsChanged;
    await t.api('POST', '/v1/mcp/endpoints', { name: 'marker2' });
    await expect.poll(() => toolsChanged).toBeGreaterThan(marker);
    expect(updates).toEqual(['chatty://r']);
    expect(h.ws.readyState).toBe(WebSocket.OPEN);
    expect(t.gw.hub.upstreams.get('chatty')?.state).toBe('ready');
    await watcher.close();
    h.ws.close();
  });
});

describe('MCP endpoint: a tool process that stops reading what it is sent', { timeout: 120_000 }, () => {
  let t: TestGateway;
  beforeAll(async () => {
    t = await startTestGateway({});
  });
  afterAll(async () => {
    await t.close();
  });

  it('is cut once it leaves the bound unread, its call fails clearly, and another endpoint is still served', async () => {
    const echo: Answer = (m) => {
      if (m.method === 'tools/list') return { tools: [{ name: 'echo', inputSchema: { type: 'object' } }] };
      if (m.method === 'tools/call') return { content: [{ type: 'text', text: 'here' }] };
      return undefined;
    };
    const deafEp = (await t.api<{ url: string }>('POST', '/v1/mcp/endpoints', { name: 'deaf' })).body;
    const calmEp = (await t.api<{ url: string }>('POST', '/v1/mcp/endpoints', { name: 'calm' })).body;
    const deaf = await hostile(deafEp.url, echo);
    const calm = await hostile(calmEp.url, echo);
    await untilHub(t.gw.hub, () => t.gw.hub.upstreams.get('deaf')?.state === 'ready' && t.gw.hub.upstreams.get('calm')?.state === 'ready', 'both');

    // It reads nothing more (its TCP window closes), and asks for answers whose ids are ~1.5 MB each: every answer
    // echoes its id. A call to it waits meanwhile.
    deaf.ws.pause();
    const call = t.api<{ content: Array<{ text: string }>; isError?: boolean }>('POST', '/v1/tools/mcp__deaf__echo/call', { arguments: {} });
    const id = 'x'.repeat(1_500_000);
    const cut = () => t.gw.hub.upstreams.get('deaf')?.state !== 'ready';
    // Before: every answer waited in the gateway's memory (~400 MB for 400 such requests, the socket still open).
    // (Its writes fail once it is cut: the connection is reset.)
    for (let i = 0; i < 300 && !cut() && deaf.ws.readyState === WebSocket.OPEN; i++)
      await new Promise<void>((resolve) => deaf.ws.send(JSON.stringify({ jsonrpc: '2.0', id: `${id}${i}`, method: 'ping' }), () => resolve()));
    await untilHub(t.gw.hub, cut, 'the deaf tool process to be cut');
    expect(await t.metric('voxgate_mcp_server_unread_total', { transport: 'endpoint' })).toBe(1);
    expect(t.logs.filter((l) => l['msg'] === 'MCP endpoint: the tool process stopped reading what it is sent; connection cut')).toHaveLength(1);
    const answer = await call;
    expect(answer.status).toBe(200);
    expect(answer.body.isError).toBe(true);
    expect(answer.body.content[0]!.text).toContain('stopped reading what the gateway sends it');

    const r = await t.api<{ content: Array<{ text: string }> }>('POST', '/v1/tools/mcp__calm__echo/call', { arguments: {} });
    expect(r.body.content[0]!.text).toBe('here');
    deaf.ws.terminate();
    calm.ws.close();
  });
});

describe("MCP endpoint: one tenant's tool processes sending more than the gateway should parse", { timeout: 120_000 }, () => {
  const ACME_KEY = 'acme-key-0123456789abcdef';
  const GLOBEX_KEY = 'globex-key-0123456789abcdef';
  let t: TestGateway;
  beforeAll(async () => {
    t = await startTestGateway({
      apiKeys: [TEST_API_KEY, ACME_KEY, GLOBEX_KEY],
      apiKeyTenants: { [ACME_KEY]: 'acme', [GLOBEX_KEY]: 'globex' },
      mcp: { endpoints: { readBytesPerSecond: 256 * 1024 } },
    });
  });
  afterAll(async () => {
    await t.close();
  });

  it("are read no faster than the tenant's byte budget (TCP backpressure), nothing dropped; another tenant's are read as before", async () => {
    const echo: Answer = (m) => {
      if (m.method === 'tools/list') return { tools: [{ name: 'echo', inputSchema: { type: 'object' } }] };
      if (m.method === 'tools/call') return { content: [{ type: 'text', text: 'here' }] };
      return undefined;
    };
    const acmeEp = (await t.api<{ url: string }>('POST', '/v1/mcp/endpoints', { name: 'chatty' }, { apiKey: ACME_KEY })).body;
    const globexEp = (await t.api<{ url: string }>('POST', '/v1/mcp/endpoints', { name: 'calm' }, { apiKey: GLOBEX_KEY })).body;
    const acme = await hostile(acmeEp.url, echo);
    const globex = await hostile(globexEp.url, echo);
    await untilHub(
      t.gw.hub,
      () => t.gw.hub.upstreams.get('acme/chatty')?.state === 'ready' && t.gw.hub.upstreams.get('globex/calm')?.state === 'ready',
      'both',
    );
    const answered = (h: Hostile, id: string) =>
      new Promise<void>((resolve) => {
        h.ws.on('message', (data) => {
          if ((JSON.parse(data.toString()) as { id?: string }).id === id) resolve();
        });
        h.send({ jsonrpc: '2.0', id, method: 'ping' });
      });

    // Eight messages of ~200 KB of small objects (what costs the most to parse), far within the frame rate and size
    // bounds: 1.6 MB against a budget of 256 KiB a second.
    const big = {
      jsonrpc: '2.0',
      method: 'notifications/message',
      params: { level: 'debug', data: Array.from({ length: 8000 }, (_, i) => ({ i, s: 'yyyyyyyyyy' })) },
    };
    for (let i = 0; i < 8; i++) acme.send(big);
    const paused = () => t.metric('voxgate_device_reads_paused_total', { transport: 'mcp_endpoint', budget: 'tenant' });
    // Before: every frame was parsed as fast as it came; one process at 16 such 2 MB frames a second held the loop.
    await expect.poll(paused).toBeGreaterThanOrEqual(1);
    expect(t.logs.filter((l) => typeof l['msg'] === 'string' && l['msg'].includes('reading paused'))).toHaveLength(1);
    // The other tenant's process is not held back by acme's budget.
    const r = await t.api<{ content: Array<{ text: string }> }>('POST', '/v1/tools/mcp__calm__echo/call', { arguments: {} }, { apiKey: GLOBEX_KEY });
    expect(r.body.content[0]!.text).toBe('here');
    // Nothing was dropped or cut: what acme sent after the flood is answered once the flood was read.
    await answered(acme, 'after-the-flood');
    expect(acme.ws.readyState).toBe(WebSocket.OPEN);
    expect(t.gw.hub.upstreams.get('acme/chatty')?.state).toBe('ready');
    acme.ws.close();
    globex.ws.close();
  });
});
