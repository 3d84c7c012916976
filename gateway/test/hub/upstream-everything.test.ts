import type { ChildProcess } from 'node:child_process';
import { createServer, request, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { CallToolResult } from '@modelcontextprotocol/client';
import { afterEach, describe, expect, it } from 'vitest';
import { EVERYTHING_BIN, startEverything } from '../../../test/support/hub.js';
import type { McpHub } from '../../src/hub/hub.js';
import { buildHub, facadeClient } from './support.js';

const text = (r: CallToolResult) => r.content.map((c) => (c.type === 'text' ? c.text : '')).join('');
const stop = (child: ChildProcess) =>
  new Promise<void>((resolve) =>
    child.exitCode !== null || child.signalCode !== null ? resolve() : (child.once('exit', () => resolve()), child.kill('SIGKILL')),
  );

// Child processes on a loaded machine: only the test's own timeout bounds them (events, never sleeps).
const PROCESS_TEST_MS = 60_000;
let hubs: McpHub[] = [];
let children: ChildProcess[] = [];
afterEach(async () => {
  await Promise.all(hubs.map((h) => h.close()));
  await Promise.all(children.map(stop));
  hubs = [];
  children = [];
}, PROCESS_TEST_MS);

describe('the official server-everything over Streamable HTTP, restarted (issue 24 item 14)', { timeout: PROCESS_TEST_MS }, () => {
  it('answers 400 to our stale session: the hub re-initializes, its resources and prompts stay listed, and a server that is gone shows as failed', async () => {
    const first = await startEverything('streamableHttp');
    children.push(first.child);
    const { hub, logs } = buildHub({ everything: { type: 'http', url: `http://127.0.0.1:${first.port}/mcp`, allow_private_network: true } });
    hubs.push(hub);
    await hub.start();
    expect(hub.servers({})[0]!.state).toBe('ready');
    const resources = (await hub.resources({})).length;
    const prompts = (await hub.prompts({})).length;
    expect(resources).toBeGreaterThan(0);
    expect(prompts).toBeGreaterThan(0);

    // Restarted on the same port: it has forgotten every session and answers them 400.
    await stop(first.child);
    const second = await startEverything('streamableHttp', first.port);
    children.push(second.child);

    // A listing (no tool call first) finds the lost session, initializes a new one and lists again.
    expect((await hub.resources({})).length).toBe(resources);
    expect((await hub.prompts({})).length).toBe(prompts);
    expect(logs.some((l) => String(l['msg']).includes('forgot our session') && String(l['why']).includes('HTTP 400'))).toBe(true);
    const sum = await hub.call('mcp__everything__get-sum', { a: 20, b: 22 }, {});
    expect(sum.isError).toBeFalsy();
    expect(text(sum)).toContain('42');
    expect(hub.servers({})[0]).toMatchObject({ state: 'ready', lastError: null });

    // Gone for good: the call is an error result, and the server's status says so.
    await stop(second.child);
    const down = await hub.call('mcp__everything__get-sum', { a: 1, b: 2 }, {});
    expect(down.isError).toBe(true);
    expect(down._meta?.['voxgate/code']).toBe('UPSTREAM_UNAVAILABLE');
    const status = hub.servers({})[0]!;
    expect(status.state).toBe('failed');
    expect(status.lastError).toMatch(/fetch failed|ECONNREFUSED/);
  });
});

/** A pass-through HTTP proxy to `port` that can be told to answer every request 500 itself. */
async function faultyProxy(port: number): Promise<{ server: Server; url: string; broken: { on: boolean } }> {
  const broken = { on: false };
  const server = createServer((req, res) => {
    if (broken.on) return void res.writeHead(500, { 'content-type': 'text/plain' }).end('proxy broken on purpose');
    const up = request({ host: '127.0.0.1', port, method: req.method, path: req.url, headers: req.headers }, (r) => {
      res.writeHead(r.statusCode ?? 502, r.headers);
      r.pipe(res);
    });
    up.on('error', () => res.destroy());
    req.pipe(up);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { server, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/mcp`, broken };
}

describe('a Streamable HTTP server that answers 500 (issue 24 item 14)', { timeout: PROCESS_TEST_MS }, () => {
  it('shows as failed with its error, its listings are retried, and it is ready again once it answers', async () => {
    const everything = await startEverything('streamableHttp');
    children.push(everything.child);
    const proxy = await faultyProxy(everything.port);
    try {
      // A failed remote server is tried again by a request at most once per restartBaseDelayMs: 0 lets the
      // request right after the repair retry it even in the millisecond the failure was recorded.
      const { hub } = buildHub({ flaky: { type: 'http', url: proxy.url, allow_private_network: true } }, { restartBaseDelayMs: 0 });
      hubs.push(hub);
      await hub.start();
      const prompts = (await hub.prompts({})).length;
      expect(prompts).toBeGreaterThan(0);
      proxy.broken.on = true;
      expect(await hub.prompts({})).toEqual([]);
      expect(hub.servers({})[0]).toMatchObject({ state: 'failed', lastError: expect.stringMatching(/proxy broken on purpose/) });
      proxy.broken.on = false;
      expect((await hub.prompts({})).length).toBe(prompts);
      expect(hub.servers({})[0]).toMatchObject({ state: 'ready', lastError: null });
    } finally {
      proxy.server.closeAllConnections();
      await new Promise((resolve) => proxy.server.close(resolve));
    }
  });
});

describe('roots of two /mcp clients with different tenants (issue 20 item 5)', { timeout: PROCESS_TEST_MS }, () => {
  it('never reach the shared upstream session: no client is asked, so none can see another’s', async () => {
    const { hub } = buildHub({ everything: { command: process.execPath, args: [EVERYTHING_BIN, 'stdio'] } });
    hubs.push(hub);
    await hub.start();
    const asked: string[] = [];
    const clients = await Promise.all(
      (['tenant-a', 'tenant-b'] as const).map(async (tenant) => {
        const c = await facadeClient(hub, { tenant }, { roots: {} });
        c.setRequestHandler('roots/list', async () => (asked.push(tenant), { roots: [{ uri: `file:///srv/${tenant}-secret`, name: tenant }] }));
        return c;
      }),
    );
    // Each client calls the server (server-everything asks for roots after initialize and on its roots tool).
    for (const c of clients) {
      const tools = (await c.listTools()).tools.map((t) => t.name);
      expect(tools).toContain('mcp__everything__echo');
      // The roots tool exists only for a client that declared roots: the hub declares none upstream.
      expect(tools).not.toContain('mcp__everything__get-roots-list');
      const r = (await c.callTool({ name: 'mcp__everything__echo', arguments: { message: 'hi' } })) as CallToolResult;
      expect(text(r)).toContain('hi');
      expect(JSON.stringify(r)).not.toMatch(/secret/);
    }
    expect(asked).toEqual([]);
    await Promise.all(clients.map((c) => c.close()));
  });
});
