import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestGateway, TEST_API_KEY, type TestGateway } from '../../../test/support/gateway-harness.js';
import { descendants } from '../../../test/support/gateway-process.js';
import { EVERYTHING_BIN, untilHub } from '../../../test/support/hub.js';

/**
 * The inbound MCP endpoint driven the way xiaozhi users drive it: a pipe (our own pipe-like client,
 * fixtures/mcp-pipe-like.py, written to behave as 78/mcp-calculator's mcp_pipe.py) spawns
 * server-everything over stdio and dials the gateway with the token the API issued.
 */
const PYTHON = '/usr/bin/python3';
const PIPE = fileURLToPath(new URL('../fixtures/mcp-pipe-like.py', import.meta.url));
const ACME_KEY = 'acme-key-0123456789abcdef';
const GLOBEX_KEY = 'globex-key-0123456789abcdef';

interface Pipe {
  child: ChildProcess;
  lines: string[];
  /** Resolves at the first status line (already written or later) matching. */
  until(re: RegExp): Promise<string>;
}

/** The pipe around `server` (a command and its arguments): server-everything over stdio unless given. */
function startPipe(endpoint: string, server: string[] = [process.execPath, EVERYTHING_BIN, 'stdio']): Pipe {
  const child = spawn(PYTHON, [PIPE, ...server], {
    env: { ...process.env, MCP_ENDPOINT: endpoint, PIPE_INITIAL_BACKOFF: '0.2' },
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  const lines: string[] = [];
  const waiters = new Set<() => void>();
  let buf = '';
  child.stderr!.on('data', (d: Buffer) => {
    buf += d.toString();
    const parts = buf.split('\n');
    buf = parts.pop()!;
    for (const l of parts) if (l.startsWith('PIPE ')) lines.push(l.slice(5));
    for (const w of waiters) w();
  });
  const until = (re: RegExp) =>
    new Promise<string>((resolve) => {
      const check = () => {
        const hit = lines.find((l) => re.test(l));
        if (hit === undefined) return false;
        resolve(hit);
        return true;
      };
      if (check()) return;
      const w = () => check() && waiters.delete(w);
      waiters.add(w);
    });
  return { child, lines, until };
}

const stop = (p: Pipe) =>
  new Promise<void>((resolve) => {
    if (p.child.exitCode !== null || p.child.signalCode !== null) return resolve();
    p.child.once('exit', () => resolve());
    p.child.kill('SIGKILL');
  });

type Endpoint = { id: string; name: string; token: string; url: string };
type EndpointList = { endpoints: Array<{ id: string; name: string; state: string; toolCount: number; tools: string[] }> };

describe.skipIf(!existsSync(PYTHON))('MCP endpoint: a pipe dials in', { timeout: 60_000 }, () => {
  let t: TestGateway;
  beforeAll(async () => {
    t = await startTestGateway({
      apiKeys: [TEST_API_KEY, ACME_KEY, GLOBEX_KEY],
      apiKeyTenants: { [ACME_KEY]: 'acme', [GLOBEX_KEY]: 'globex' },
      mcp: { callTimeoutMs: 20_000 },
    });
  });
  afterAll(async () => {
    await t.close();
  });

  const names = (key: string) =>
    t.api<{ tools: Array<{ name: string }> }>('GET', '/v1/tools', undefined, { apiKey: key }).then((r) => r.body.tools.map((x) => x.name));
  const hub = () => t.gw.hub;
  const ready = (name: string) => () => hub().upstreams.get(name)?.state === 'ready';

  it("issues a token, serves the pipe's tools, and tells /mcp clients their list changed", async () => {
    const created = await t.api<Endpoint>('POST', '/v1/mcp/endpoints', { name: 'pipe' });
    expect(created.status).toBe(201);
    expect(created.body.url).toBe(`ws://127.0.0.1:${t.gw.httpPort}/mcp_endpoint/mcp/?token=${created.body.token}`);
    const listed = await t.api<EndpointList>('GET', '/v1/mcp/endpoints');
    expect(listed.body.endpoints).toEqual([expect.objectContaining({ name: 'pipe', state: 'waiting', toolCount: 0 })]);
    expect(JSON.stringify(listed.body)).not.toContain(created.body.token);

    // A /mcp client connected before the pipe hears tools/list_changed when it connects.
    const client = new Client({ name: 'watcher', version: '1' });
    let changes = 0;
    client.setNotificationHandler('notifications/tools/list_changed', () => void changes++);
    await client.connect(
      new StreamableHTTPClientTransport(new URL(`${t.baseUrl}/mcp`), { requestInit: { headers: { authorization: `Bearer ${TEST_API_KEY}` } } }),
    );
    await client.listTools(); // opens the stateful session's notification stream
    const pipe = startPipe(created.body.url);
    try {
      await pipe.until(/^connected$/);
      await untilHub(hub(), ready('pipe'), 'the endpoint to be ready');
      // server-everything registers its client-dependent tools after initialized.
      await untilHub(
        hub(),
        () =>
          hub()
            .tools({})
            .some((x) => x.name === 'mcp__pipe__trigger-sampling-request'),
        'the relisted tools',
      );
      // (server-everything's list is complete by then; list_changed itself: endpoint-boundary.test.ts)

      const sum = await t.api<{ content: Array<{ text: string }>; isError: boolean }>('POST', '/v1/tools/mcp__pipe__get-sum/call', {
        arguments: { a: 20, b: 22 },
      });
      expect(sum.body.isError).toBe(false);
      expect(sum.body.content[0]!.text).toContain('42');
      const servers = await t.api<{ servers: Array<{ name: string; type: string; state: string }> }>('GET', '/v1/mcp/servers');
      expect(servers.body.servers).toContainEqual(expect.objectContaining({ name: 'pipe', type: 'endpoint', state: 'ready' }));
      const after = await t.api<EndpointList>('GET', '/v1/mcp/endpoints');
      expect(after.body.endpoints[0]).toMatchObject({ state: 'connected' });
      expect(after.body.endpoints[0]!.tools).toContain('echo');

      const viaMcp = (await client.listTools()).tools.map((x) => x.name);
      expect(viaMcp).toContain('mcp__pipe__echo');
      await expect.poll(() => changes, { timeout: 10_000 }).toBeGreaterThan(0);
    } finally {
      await client.close();
      await stop(pipe);
    }
  });

  it('tells /mcp clients their prompts and resources changed when a pipe comes and goes (listChanged is declared for both)', async () => {
    const created = (await t.api<Endpoint>('POST', '/v1/mcp/endpoints', { name: 'lists' })).body;
    const client = new Client({ name: 'lists-watcher', version: '1' });
    const heard = { prompts: 0, resources: 0 };
    client.setNotificationHandler('notifications/prompts/list_changed', () => void heard.prompts++);
    client.setNotificationHandler('notifications/resources/list_changed', () => void heard.resources++);
    await client.connect(
      new StreamableHTTPClientTransport(new URL(`${t.baseUrl}/mcp`), { requestInit: { headers: { authorization: `Bearer ${TEST_API_KEY}` } } }),
    );
    expect(client.getServerCapabilities()).toMatchObject({ prompts: { listChanged: true }, resources: { listChanged: true } });
    const promptNames = async () => (await client.listPrompts()).prompts.map((p) => p.name);
    expect(await promptNames()).not.toContain('mcp__lists__simple-prompt'); // opens the session's notification stream
    const pipe = startPipe(created.url);
    try {
      await untilHub(hub(), ready('lists'), 'the endpoint to be ready');
      await expect.poll(() => heard.prompts, { timeout: 10_000 }).toBeGreaterThan(0);
      await expect.poll(() => heard.resources, { timeout: 10_000 }).toBeGreaterThan(0);
      // A client that re-lists on the notification finds the tool process's prompts and resources.
      expect(await promptNames()).toContain('mcp__lists__simple-prompt');
      const resources = (await client.listResources()).resources;
      expect(resources.some((r) => (r._meta as Record<string, unknown> | undefined)?.['voxgate/server'] === 'lists')).toBe(true);

      const before = { ...heard };
      await stop(pipe);
      await expect.poll(() => heard.prompts, { timeout: 10_000 }).toBeGreaterThan(before.prompts);
      await expect.poll(() => heard.resources, { timeout: 10_000 }).toBeGreaterThan(before.resources);
      expect(await promptNames()).not.toContain('mcp__lists__simple-prompt');
    } finally {
      await client.close();
      await stop(pipe);
      await t.api('DELETE', `/v1/mcp/endpoints/${created.id}`);
    }
  });

  it("fails a call in flight when the pipe's server dies (the pipe keeps its socket open), and serves the pipe again when it reconnects", async () => {
    const ep = (await t.api<EndpointList>('GET', '/v1/mcp/endpoints')).body.endpoints.find((e) => e.name === 'pipe')!;
    await t.api('DELETE', `/v1/mcp/endpoints/${ep.id}`);
    const created = (await t.api<Endpoint>('POST', '/v1/mcp/endpoints', { name: 'pipe' })).body;
    const pipe = startPipe(created.url);
    try {
      await untilHub(hub(), ready('pipe'), 'the endpoint to be ready');
      // A 30 s operation; the server process (the pipe's child) is killed under it. The pipe keeps its socket open
      // (as mcp_pipe.py does) until a message to the dead process fails: the gateway's probe ping while a call is in
      // flight is that message, so the call fails within a probe interval instead of waiting out its timeout.
      const call = t.api<{ content: Array<{ text: string }>; isError: boolean }>('POST', '/v1/tools/mcp__pipe__trigger-long-running-operation/call', {
        arguments: { duration: 30, steps: 3 },
      });
      // In flight: the pipe has written the call to its server's stdin (its server process exists from the start).
      await pipe.until(/^forwarded tools\/call$/);
      const connectedBefore = pipe.lines.filter((l) => l === 'connected').length;
      for (const pid of descendants(pipe.child.pid!)) process.kill(pid, 'SIGKILL');
      const r = await call;
      expect(r.body.isError).toBe(true);
      expect(r.body.content[0]!.text).toMatch(/stopped while handling|not available/);
      expect(r.body.content[0]!.text).not.toMatch(/did not answer within/); // failed by the drop, not by the 20 s call timeout

      // The pipe reconnects with its backoff and a fresh server process; no restart of anything here.
      await expect.poll(() => pipe.lines.filter((l) => l === 'connected').length, { timeout: 15_000 }).toBeGreaterThan(connectedBefore);
      await untilHub(hub(), ready('pipe'), 'the endpoint to be ready again');
      const echo = await t.api<{ content: Array<{ text: string }> }>('POST', '/v1/tools/mcp__pipe__echo/call', { arguments: { message: 'back' } });
      expect(echo.body.content[0]!.text).toContain('back');

      // Revoked: the live connection is cut with 4001, and the pipe's next attempts are refused (401).
      const revoked = await t.api('DELETE', `/v1/mcp/endpoints/${created.id}`);
      expect(revoked.status).toBe(204);
      await pipe.until(/^closed 4001$/);
      await pipe.until(/^refused 401$/);
      expect(await names(TEST_API_KEY)).not.toContain('mcp__pipe__echo');
    } finally {
      await stop(pipe);
    }
  });

  it('serves a server that prints a line of its own to stdout (a banner, a print()): the pipe relays it, the gateway skips it', async () => {
    const created = (await t.api<Endpoint>('POST', '/v1/mcp/endpoints', { name: 'chatty' })).body;
    const before = await t.metric('voxgate_frames_rejected_total', { reason: 'not_json' });
    // The line comes before the server's answer to initialize: the pipe sends it as a frame of its own.
    const banner = `echo 'Starting the calculator server...'; exec "${process.execPath}" "${EVERYTHING_BIN}" stdio`;
    const pipe = startPipe(created.url, ['/bin/sh', '-c', banner]);
    try {
      await untilHub(hub(), ready('chatty'), 'the endpoint to be ready');
      const echo = await t.api<{ content: Array<{ text: string }>; isError: boolean }>('POST', '/v1/tools/mcp__chatty__echo/call', {
        arguments: { message: 'still here' },
      });
      expect(echo.body).toMatchObject({ isError: false, content: [{ text: expect.stringContaining('still here') }] });
      expect(pipe.lines.filter((l) => l.startsWith('closed'))).toEqual([]);
      expect(pipe.lines.filter((l) => l === 'connected')).toHaveLength(1);
      expect((await t.metric('voxgate_frames_rejected_total', { reason: 'not_json' })) - before).toBe(1);
      expect(t.logs.filter((l) => l.msg === 'MCP endpoint frame skipped: not one JSON-RPC message')).toHaveLength(1);
    } finally {
      await stop(pipe);
      await t.api('DELETE', `/v1/mcp/endpoints/${created.id}`);
    }
  });

  it("keeps a tenant's endpoint to that tenant", async () => {
    const created = await t.api<Endpoint>('POST', '/v1/mcp/endpoints', { name: 'acmetools' }, { apiKey: ACME_KEY });
    expect(created.status).toBe(201);
    const other = await t.api('POST', '/v1/mcp/endpoints', { name: 'sneaky', tenant: 'acme' }, { apiKey: GLOBEX_KEY });
    expect(other.status).toBe(400);
    const pipe = startPipe(created.body.url);
    try {
      // A tenant's endpoint is keyed `<tenant>/<name>` in the hub (names.ts serverKey).
      await untilHub(hub(), ready('acme/acmetools'), 'the acme endpoint to be ready');
      expect(await names(ACME_KEY)).toContain('mcp__acmetools__echo');
      expect(await names(GLOBEX_KEY)).not.toContain('mcp__acmetools__echo');
      const denied = await t.api<{ code: string }>('POST', '/v1/tools/mcp__acmetools__echo/call', { arguments: { message: 'x' } }, { apiKey: GLOBEX_KEY });
      expect(denied.body.code).toBe('TOOL_NOT_FOUND');
      expect((await t.api<EndpointList>('GET', '/v1/mcp/endpoints', undefined, { apiKey: GLOBEX_KEY })).body.endpoints).toEqual([]);
      expect((await t.api('DELETE', `/v1/mcp/endpoints/${created.body.id}`, undefined, { apiKey: GLOBEX_KEY })).status).toBe(404);
      expect((await t.api('DELETE', `/v1/mcp/endpoints/${created.body.id}`, undefined, { apiKey: ACME_KEY })).status).toBe(204);
    } finally {
      await stop(pipe);
    }
  });
});
