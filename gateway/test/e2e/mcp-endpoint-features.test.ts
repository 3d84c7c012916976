import { fileURLToPath } from 'node:url';
import { Client, StreamableHTTPClientTransport, type CallToolResult, type LoggingMessageNotificationParams } from '@modelcontextprotocol/client';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startTestGateway, TEST_API_KEY, type TestGateway } from '../../../test/support/gateway-harness.js';
import { nodeServer } from '../../../test/support/hub.js';

const FEATURES_SERVER = fileURLToPath(new URL('../fixtures/mcp-features-server.mjs', import.meta.url));
const text = (r: CallToolResult) => r.content.map((c) => (c.type === 'text' ? c.text : '')).join('');

describe('/mcp passes on the protocol features of hosted servers', () => {
  let t: TestGateway;
  const clients: Client[] = [];
  const connect = async (capabilities: Record<string, unknown> = {}) => {
    const client = new Client({ name: 'features-test', version: '1.0.0' }, { capabilities });
    const transport = new StreamableHTTPClientTransport(new URL(`${t.baseUrl}/mcp`), { requestInit: { headers: { authorization: `Bearer ${TEST_API_KEY}` } } });
    await client.connect(transport);
    clients.push(client);
    return client;
  };

  beforeAll(async () => {
    t = await startTestGateway({ mcp: { servers: { features: nodeServer(FEATURES_SERVER) } } });
    await t.gw.hubStarted;
  });
  afterEach(async () => {
    for (const c of clients.splice(0)) await c.close().catch(() => undefined);
  });
  afterAll(() => t.close());

  it("keeps a tool's title, outputSchema and structured result intact", async () => {
    const client = await connect();
    const tool = (await client.listTools()).tools.find((x) => x.name === 'mcp__features__weather')!;
    expect(tool.title).toBe('Current weather');
    expect(tool.outputSchema).toMatchObject({ type: 'object', properties: { city: { type: 'string' }, celsius: { type: 'number' } } });
    const r = (await client.callTool({ name: 'mcp__features__weather', arguments: { city: 'Osaka' } })) as CallToolResult;
    expect(r.structuredContent).toEqual({ city: 'Osaka', celsius: 21 });
    const http = await t.api<{ tools: Array<{ name: string; title?: string; outputSchema?: unknown }> }>('GET', '/v1/tools');
    expect(http.body.tools.find((x) => x.name === 'mcp__features__weather')).toMatchObject({ title: 'Current weather', outputSchema: { type: 'object' } });
  });

  it('forwards log messages at the level the session asked for (logging/setLevel)', async () => {
    const client = await connect();
    const got: LoggingMessageNotificationParams[] = [];
    client.setNotificationHandler('notifications/message', (n) => void got.push(n.params));
    await client.setLoggingLevel('warning');
    // The session's GET stream opens in the background: log until a message arrives on it.
    await expect
      .poll(
        async () => {
          await client.callTool({ name: 'mcp__features__log', arguments: { level: 'error', text: 'ping' } });
          return got.length;
        },
        { timeout: 10_000 },
      )
      .toBeGreaterThan(0);
    got.length = 0;
    await client.callTool({ name: 'mcp__features__log', arguments: { level: 'info', text: 'quiet' } });
    await client.callTool({ name: 'mcp__features__log', arguments: { level: 'error', text: 'loud' } });
    await expect.poll(() => got.some((m) => m.data === 'loud'), { timeout: 10_000 }).toBe(true);
    expect(got.find((m) => m.data === 'loud')).toMatchObject({ level: 'error', logger: 'mcp__features/fixture-logger' });
    expect(got.some((m) => m.data === 'quiet')).toBe(false);
  });

  it('answers completion/complete for namespaced prompts and resource templates', async () => {
    const client = await connect();
    const prompt = await client.complete({ ref: { type: 'ref/prompt', name: 'mcp__features__greet' }, argument: { name: 'name', value: 'al' } });
    expect(prompt.completion.values).toEqual(['alice', 'albert']);
    const tpl = await client.complete({ ref: { type: 'ref/resource', uri: 'notes://{id}' }, argument: { name: 'id', value: 'n' } });
    expect(tpl.completion.values).toEqual(['n1', 'n2']);
  });

  it('lists resource templates and reads templated resources', async () => {
    const client = await connect();
    const { resourceTemplates } = await client.listResourceTemplates();
    expect(resourceTemplates.map((x) => x.uriTemplate)).toContain('notes://{id}');
    const read = await client.readResource({ uri: 'notes://n2' });
    expect(read.contents[0]).toMatchObject({ uri: 'notes://n2', text: 'note n2' });
  });

  it('subscribes to resources once upstream for any number of sessions, and passes updates on', async () => {
    const a = await connect();
    const b = await connect();
    const calls = async () =>
      JSON.parse(text((await a.callTool({ name: 'mcp__features__subscribe_calls', arguments: {} })) as CallToolResult)) as {
        subscribe: number;
        unsubscribe: number;
      };
    const updates: string[] = [];
    a.setNotificationHandler('notifications/resources/updated', (n) => void updates.push(n.params.uri));
    await a.subscribeResource({ uri: 'counter://value' });
    await b.subscribeResource({ uri: 'counter://value' });
    expect(await calls()).toEqual({ subscribe: 1, unsubscribe: 0 });
    await expect
      .poll(
        async () => {
          await a.callTool({ name: 'mcp__features__bump', arguments: {} });
          return updates.length;
        },
        { timeout: 10_000 },
      )
      .toBeGreaterThan(0);
    expect(updates[0]).toBe('counter://value');
    // The upstream subscription ends with the last session that holds it.
    await b.unsubscribeResource({ uri: 'counter://value' });
    expect(await calls()).toEqual({ subscribe: 1, unsubscribe: 0 });
    await a.unsubscribeResource({ uri: 'counter://value' });
    expect(await calls()).toEqual({ subscribe: 1, unsubscribe: 1 });
  });

  it('forwards sampling and elicitation requests to the client whose call is running; never roots (issue 20 item 5)', async () => {
    const client = await connect({ sampling: {}, elicitation: { form: {} }, roots: {} });
    client.setRequestHandler('sampling/createMessage', async () => ({
      model: 'test-model',
      role: 'assistant' as const,
      content: { type: 'text' as const, text: 'hi there' },
    }));
    client.setRequestHandler('elicitation/create', async () => ({ action: 'accept' as const, content: { name: 'Ada' } }));
    let rootsAsked = 0;
    client.setRequestHandler('roots/list', async () => (rootsAsked++, { roots: [{ uri: 'file:///work', name: 'work' }] }));
    expect(text((await client.callTool({ name: 'mcp__features__ask_sampling', arguments: {} })) as CallToolResult)).toBe('sampled: hi there');
    expect(text((await client.callTool({ name: 'mcp__features__ask_elicit', arguments: {} })) as CallToolResult)).toBe('elicited: accept {"name":"Ada"}');
    // The upstream session is shared by every caller and a server keeps its roots answer: roots are not declared upstream.
    const roots = (await client.callTool({ name: 'mcp__features__ask_roots', arguments: {} })) as CallToolResult;
    expect(roots.isError).toBe(true);
    expect(rootsAsked).toBe(0);
  });

  it("passes on a hosted server's cancellation of its request to the client", async () => {
    const client = await connect({ sampling: {} });
    let cancelled!: () => void;
    const wasCancelled = new Promise<void>((resolve) => (cancelled = resolve));
    client.setRequestHandler('sampling/createMessage', async (_req, ctx) => {
      await new Promise<void>((resolve) => ctx.mcpReq.signal.addEventListener('abort', () => resolve(), { once: true }));
      cancelled();
      return { model: 'test-model', role: 'assistant' as const, content: { type: 'text' as const, text: 'too late' } };
    });
    const r = (await client.callTool({ name: 'mcp__features__ask_sampling_then_cancel', arguments: {} })) as CallToolResult;
    expect(text(r)).toBe('cancelled the sampling request');
    await wasCancelled;
  });

  it('refuses them clearly when the calling client cannot answer', async () => {
    const client = await connect();
    const r = (await client.callTool({ name: 'mcp__features__ask_sampling', arguments: {} })) as CallToolResult;
    expect(r.isError).toBe(true);
    expect(text(r)).toMatch(/refused by the Voxgate gateway: the calling MCP client does not support sampling/);
  });

  it("never hands a server's request to an /mcp client while a call through the HTTP API runs there too (red team 3)", async () => {
    // The client holds a call on the server (its own elicitation, answered last); a call through the HTTP API,
    // which can answer no request, asks for sampling meanwhile. It used to reach the client: it read the
    // other caller's request and wrote the sampled text into that caller's result.
    const client = await connect({ sampling: {}, elicitation: { form: {} } });
    let sampled = 0;
    client.setRequestHandler(
      'sampling/createMessage',
      async () => (sampled++, { model: 'evil', role: 'assistant' as const, content: { type: 'text' as const, text: 'injected' } }),
    );
    let answer!: () => void;
    const asked = new Promise<void>((resolve) => {
      client.setRequestHandler('elicitation/create', async () => {
        resolve();
        await new Promise<void>((r) => (answer = r));
        return { action: 'decline' as const };
      });
    });
    const held = client.callTool({ name: 'mcp__features__ask_elicit', arguments: {} });
    await asked;
    const r = await t.api<CallToolResult>('POST', '/v1/tools/mcp__features__ask_sampling/call', { arguments: {} });
    expect(r.body.isError).toBe(true);
    expect(text(r.body)).toMatch(/sampling\/createMessage refused by the Voxgate gateway/);
    expect(sampled).toBe(0);
    answer();
    expect(text((await held) as CallToolResult)).toBe('elicited: decline {}');
  });

  it('drops what a hosted server logs beyond mcp.upstreamLogRatePerSecond, and counts it', async () => {
    const client = await connect();
    const before = await t.metric('voxgate_mcp_server_logs_dropped_total');
    // 200 at once against a bucket of 20 (+20/s): some of them must be dropped.
    await client.callTool({ name: 'mcp__features__log_burst', arguments: { n: 200 } });
    await expect.poll(() => t.metric('voxgate_mcp_server_logs_dropped_total'), { timeout: 10_000 }).toBeGreaterThan(before);
  });
});
