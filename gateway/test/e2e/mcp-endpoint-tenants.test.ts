import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WebSocket } from 'ws';
import { startTestGateway, TEST_API_KEY, type TestGateway } from '../../../test/support/gateway-harness.js';
import { untilHub } from '../../../test/support/hub.js';

/**
 * MCP endpoint names are each tenant's own: two tenants may both host a "weather" server, neither learns of the
 * other's (no refusal), neither can block or shadow the other's tools, and each sees its tools under the names a
 * single-tenant gateway gives them (mcp__weather__now).
 */
const ACME_KEY = 'acme-key-0123456789abcdef';
const GLOBEX_KEY = 'globex-key-0123456789abcdef';

type Rpc = { jsonrpc: '2.0'; id?: number | string; method?: string; params?: Record<string, unknown> };

/** A tool process on a raw WebSocket (frames with a trailing newline, as mcp_pipe.py sends them): one tool, `now`, one resource. */
function toolProcess(url: string, answer: string): Promise<WebSocket> {
  const ws = new WebSocket(url);
  const send = (m: Record<string, unknown>) => ws.send(JSON.stringify({ jsonrpc: '2.0', ...m }) + '\n');
  ws.on('message', (data) => {
    const m = JSON.parse(data.toString()) as Rpc;
    if (m.method === 'initialize')
      send({
        id: m.id,
        result: {
          protocolVersion: (m.params as { protocolVersion: string }).protocolVersion,
          capabilities: { tools: {}, resources: {} },
          serverInfo: { name: answer, version: '1' },
        },
      });
    else if (m.method === 'tools/list')
      send({ id: m.id, result: { tools: [{ name: 'now', description: 'the weather now', inputSchema: { type: 'object' } }] } });
    else if (m.method === 'ping') send({ id: m.id, result: {} });
    else if (m.method === 'resources/list') send({ id: m.id, result: { resources: [{ uri: 'weather://today', name: 'today' }] } });
    else if (m.method === 'resources/read') send({ id: m.id, result: { contents: [{ uri: 'weather://today', text: answer }] } });
    else if (m.method === 'tools/call') send({ id: m.id, result: { content: [{ type: 'text', text: answer }] } });
  });
  return new Promise((resolve, reject) => {
    ws.once('open', () => resolve(ws));
    ws.once('error', reject);
  });
}

describe('MCP endpoint names per tenant', { timeout: 60_000 }, () => {
  let t: TestGateway;
  const sockets: WebSocket[] = [];
  beforeAll(async () => {
    t = await startTestGateway({ apiKeys: [TEST_API_KEY, ACME_KEY, GLOBEX_KEY], apiKeyTenants: { [ACME_KEY]: 'acme', [GLOBEX_KEY]: 'globex' } });
  });
  afterAll(async () => {
    for (const ws of sockets) ws.close();
    await t.close();
  });

  const create = (name: string, apiKey: string) =>
    t.api<{ id: string; url: string; code?: string; detail?: string }>('POST', '/v1/mcp/endpoints', { name }, { apiKey });
  const tools = async (apiKey: string) =>
    (await t.api<{ tools: Array<{ name: string }> }>('GET', '/v1/tools', undefined, { apiKey })).body.tools
      .map((x) => x.name)
      .filter((n) => n.startsWith('mcp__'));
  const call = async (name: string, apiKey: string) =>
    (await t.api<{ content: Array<{ text: string }> }>('POST', `/v1/tools/${name}/call`, { arguments: {} }, { apiKey })).body.content[0]!.text;
  const ready = () =>
    t.gw.hub.servers({ tenant: 'acme' }).some((s) => s.state === 'ready') && t.gw.hub.servers({ tenant: 'globex' }).some((s) => s.state === 'ready');

  it('two tenants each host a "weather": no refusal, no leak, each calls its own under today\'s names', async () => {
    const acme = await create('weather', ACME_KEY);
    expect(acme.status).toBe(201);
    // Before: 400 "a server named "weather" exists" — globex learned of acme's server and could not have its own.
    const globex = await create('weather', GLOBEX_KEY);
    expect([globex.status, globex.body.detail]).toEqual([201, undefined]);
    sockets.push(await toolProcess(acme.body.url, 'sunny at acme'), await toolProcess(globex.body.url, 'rain at globex'));
    await untilHub(t.gw.hub, ready, 'both endpoints ready');

    // Each tenant sees one weather server, by its own name, and its tool under the single-tenant name.
    expect(await tools(ACME_KEY)).toEqual(['mcp__weather__now']);
    const listed = (await t.api<{ tools: Array<{ name: string; source: unknown }> }>('GET', '/v1/tools', undefined, { apiKey: ACME_KEY })).body.tools;
    expect(listed.find((x) => x.name === 'mcp__weather__now')!.source).toEqual({ kind: 'server', server: 'weather', tool: 'now' });
    expect(await tools(GLOBEX_KEY)).toEqual(['mcp__weather__now']);
    expect(await call('mcp__weather__now', ACME_KEY)).toBe('sunny at acme');
    expect(await call('mcp__weather__now', GLOBEX_KEY)).toBe('rain at globex');
    for (const key of [ACME_KEY, GLOBEX_KEY]) {
      const servers = (await t.api<{ servers: Array<{ name: string }> }>('GET', '/v1/mcp/servers', undefined, { apiKey: key })).body.servers;
      expect(servers.map((s) => s.name)).toEqual(['weather']);
      const endpoints = (
        await t.api<{ endpoints: Array<{ name: string; tenant: string; state: string }> }>('GET', '/v1/mcp/endpoints', undefined, { apiKey: key })
      ).body.endpoints;
      expect(endpoints).toEqual([expect.objectContaining({ name: 'weather', tenant: key === ACME_KEY ? 'acme' : 'globex', state: 'connected' })]);
    }

    // Resources too: listed under the tenant's server name, read by it (or found by their URI) from its own server.
    for (const [key, answer] of [
      [ACME_KEY, 'sunny at acme'],
      [GLOBEX_KEY, 'rain at globex'],
    ]) {
      const listed = (await t.api<{ resources: Array<{ server: string; uri: string }> }>('GET', '/v1/mcp/resources', undefined, { apiKey: key })).body
        .resources;
      expect(listed).toEqual([expect.objectContaining({ server: 'weather', uri: 'weather://today' })]);
      for (const q of ['uri=weather://today&server=weather', 'uri=weather://today']) {
        const read = await t.api<{ server: string; contents: Array<{ text: string }> }>('GET', `/v1/mcp/resources/read?${q}`, undefined, { apiKey: key });
        expect([read.body.server, read.body.contents[0]!.text]).toEqual(['weather', answer]);
      }
    }

    // A tenant's own name is taken for itself only; the operators' view is as before (tenant-limited servers hidden from
    // their tool list; every endpoint listed, by its name and tenant).
    expect((await create('weather', ACME_KEY)).status).toBe(400);
    expect(await tools(TEST_API_KEY)).toEqual([]);
    const all = (await t.api<{ endpoints: Array<{ name: string; tenant: string }> }>('GET', '/v1/mcp/endpoints')).body.endpoints;
    expect(all.map((e) => `${e.tenant}:${e.name}`).sort()).toEqual(['acme:weather', 'globex:weather']);
    // A server open to all with that name would sit beside both tenants' own: refused for the operator, who sees both.
    expect((await create('weather', TEST_API_KEY)).status).toBe(400);

    // Revoking acme's leaves globex's serving.
    await t.api('DELETE', `/v1/mcp/endpoints/${acme.body.id}`, undefined, { apiKey: ACME_KEY });
    expect(await tools(ACME_KEY)).toEqual([]);
    expect(await call('mcp__weather__now', GLOBEX_KEY)).toBe('rain at globex');
  });
});

describe('/mcp sessions per tenant', { timeout: 60_000 }, () => {
  it("mcp.endpoint.maxSessionsPerTenant bounds a tenant's keys together; another tenant is still served", async () => {
    const ACME_2 = 'acme-key-2-0123456789abcdef';
    const t = await startTestGateway({
      apiKeys: [TEST_API_KEY, ACME_KEY, ACME_2, GLOBEX_KEY],
      apiKeyTenants: { [ACME_KEY]: 'acme', [ACME_2]: 'acme', [GLOBEX_KEY]: 'globex' },
      mcp: { endpoint: { maxSessionsPerTenant: 1 } },
    });
    const held: Client[] = [];
    const open = async (key: string) => {
      const client = new Client({ name: 'tenant-cap-test', version: '1.0.0' });
      await client.connect(new StreamableHTTPClientTransport(new URL(`${t.baseUrl}/mcp`), { requestInit: { headers: { authorization: `Bearer ${key}` } } }));
      held.push(client);
    };
    try {
      await open(ACME_KEY);
      await expect(open(ACME_2)).rejects.toThrow(/Too many MCP sessions for this tenant \(1, all its API keys together\)/);
      expect(await t.metric('voxgate_mcp_endpoint_requests_total', { outcome: 'session_limit_tenant' })).toBe(1);
      await open(GLOBEX_KEY);
    } finally {
      for (const c of held) await c.close().catch(() => undefined);
      await t.close();
    }
  });
});
