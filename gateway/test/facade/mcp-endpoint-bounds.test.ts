import { connect as connectTcp, type Socket } from 'node:net';
import type { FastifyInstance } from 'fastify';
import pino from 'pino';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { afterEach, describe, expect, it, vi } from 'vitest';
import type { McpEndpointOptions } from '../../src/facade/mcp-endpoint.js';
import { parseServers } from '../../src/hub/config.js';
import { buildHub } from '../hub/support.js';
import { serveEndpoint } from './serve-endpoint.js';
import { pingSession } from './session-ping.js';

// Two keys of tenant acme, one of tenant other.
const A1 = 'bounds-test-acme-key-1-0123456789';
const A2 = 'bounds-test-acme-key-2-0123456789';
const B1 = 'bounds-test-other-key-0123456789';
const TENANTS: Record<string, string> = { [A1]: 'acme', [A2]: 'acme', [B1]: 'other' };

let app: FastifyInstance | undefined;
let built: ReturnType<typeof buildHub> | undefined;
const clients: Client[] = [];
const sockets: Socket[] = [];
afterEach(async () => {
  for (const s of sockets.splice(0)) s.destroy();
  for (const c of clients.splice(0)) await c.close().catch(() => undefined);
  await app?.close();
  await built?.hub.close();
  vi.useRealTimers();
});

async function start(options: Partial<McpEndpointOptions> = {}) {
  built = buildHub({});
  const lines: Array<Record<string, unknown>> = [];
  const log = pino({ level: 'info' }, { write: (line: string) => void lines.push(JSON.parse(line) as Record<string, unknown>) });
  const { metrics } = built;
  const served = await serveEndpoint(built, {
    apiKeys: () => Object.keys(TENANTS),
    tenantOf: (key: string) => TENANTS[key],
    log,
    maxSessions: 4,
    maxSessionsPerKey: 4,
    ...options,
  });
  app = served.app;
  const outcome = async (name: string) => (await metrics.mcpRequests.get()).values.find((v) => v.labels['outcome'] === name)?.value ?? 0;
  const logged = (msg: string) => lines.filter((l) => String(l['msg']).startsWith(msg));
  return { url: served.url, endpoint: served.endpoint, outcome, logged };
}

/** A session as the SDK client opens one (initialize, its GET stream, a request). */
async function session(url: URL, key: string) {
  const transport = new StreamableHTTPClientTransport(url, { requestInit: { headers: { authorization: `Bearer ${key}` } } });
  const client = new Client({ name: 'bounds-test', version: '0.0.0' });
  clients.push(client);
  await client.connect(transport);
  await client.listTools();
  return { client, sessionId: transport.sessionId! };
}

/** A 2026-07-28 client's `subscriptions/listen` stream, held open. */
async function listen(url: URL, key: string) {
  const client = new Client({ name: 'bounds-test', version: '0.0.0' }, { versionNegotiation: { mode: { pin: '2026-07-28' } } });
  clients.push(client);
  await client.connect(new StreamableHTTPClientTransport(url, { requestInit: { headers: { authorization: `Bearer ${key}` } } }));
  await client.listen({ toolsListChanged: true });
  return client;
}

describe('/mcp: one tenant, whatever its number of keys, holds at most maxSessionsPerTenant', () => {
  it('a tenant at its share (3/4 of maxSessions by default) is refused 429; another tenant is still served; a key evicts only its own', async () => {
    vi.useFakeTimers({ toFake: ['Date'] });
    const later = () => vi.setSystemTime(Date.now() + 60_000);
    const { url, endpoint, outcome, logged } = await start();
    // maxSessions 4: acme may hold 3, with its two keys together, though each key may hold 4.
    const a = await session(url, A1);
    await session(url, A1);
    await session(url, A2);
    await vi.waitFor(() => expect(endpoint.state().streaming).toBe(3));
    later();
    await expect(session(url, A2)).rejects.toThrow(/Too many MCP sessions for this tenant \(3, all its API keys together\)/);
    expect(await outcome('session_limit_tenant')).toBe(1);
    expect(logged('mcp session refused: this API key').at(-1)).toMatchObject({ tenant: 'acme', limit: 3 });
    // The other tenant gets the gateway's last slot.
    await session(url, B1);
    expect(endpoint.sessionCount()).toBe(4);

    // a's client exits without DELETE: A1 may give it up, A2 may not (never another key's session).
    await a.client.close();
    await vi.waitFor(() => expect(endpoint.state().streaming).toBe(3));
    later();
    await expect(session(url, A2)).rejects.toThrow(/for this tenant/);
    expect(await outcome('session_limit_tenant')).toBe(2);
    later();
    await session(url, A1);
    expect((await built!.metrics.mcpSessionsEvicted.get()).values.find((v) => v.labels['reason'] === 'tenant_limit')?.value).toBe(1);
    expect((await pingSession(url, a.sessionId, A1)).status).toBe(404);
    expect(endpoint.state()).toMatchObject({ sessions: 4, reserved: 0 });
  });

  it('mcp.endpoint.maxSessionsPerTenant sets the share; keys without a tenant count as one tenant', async () => {
    const { url, outcome } = await start({ maxSessionsPerTenant: 1, tenantOf: () => undefined });
    await session(url, A1);
    // B1 has no tenant here either: the same share as A1's.
    await expect(session(url, B1)).rejects.toThrow(/Too many MCP sessions for this tenant \(1,/);
    expect(await outcome('session_limit_tenant')).toBe(1);
  });

  it('the default share binds only where there is another tenant: a gateway whose keys are all one tenant (or none) keeps every session', async () => {
    for (const tenantOf of [() => undefined, () => 'acme']) {
      const { url, endpoint, outcome } = await start({ tenantOf });
      for (const key of [A1, A2, B1, A1]) await session(url, key);
      expect(endpoint.sessionCount()).toBe(4);
      expect(await outcome('session_limit_tenant')).toBe(0);
      for (const c of clients.splice(0)) await c.close().catch(() => undefined);
      await app?.close();
      await built?.hub.close();
    }
  });

  it('bounds the stateless subscriptions/listen streams per tenant too', async () => {
    const { url, endpoint, outcome } = await start();
    await listen(url, A1);
    const second = await listen(url, A1);
    await listen(url, A2);
    await expect(listen(url, A2)).rejects.toThrow(/Too many subscriptions\/listen streams for this tenant \(3,/);
    expect(await outcome('listen_limit_tenant')).toBe(1);
    await listen(url, B1);
    expect(endpoint.state().listening).toBe(4);
    // A closed stream gives the tenant its place back.
    await second.close();
    await vi.waitFor(() => expect(endpoint.state().listening).toBe(3));
    await listen(url, A2);
  });
});

describe('/mcp: a stateless subscriptions/listen stream whose client stopped reading', () => {
  it('is cut once a MiB waits unread (counted, logged once), and its slot is free again', async () => {
    // One stream at most, per key and in all (the SDK's own bound): a listen after the cut shows both were freed.
    const { url, endpoint, logged } = await start({ maxSessions: 1, maxSessionsPerKey: 1 });
    // The stream's id comes back in every notification: a long one (the client's choice) makes each notification
    // large, so few changes fill what the kernel's buffers take for a reader that reads nothing (a few MiB).
    const id = `listen-${'x'.repeat(256 * 1024)}`;
    const body = JSON.stringify({
      jsonrpc: '2.0',
      id,
      method: 'subscriptions/listen',
      params: {
        _meta: {
          'io.modelcontextprotocol/protocolVersion': '2026-07-28',
          'io.modelcontextprotocol/clientInfo': { name: 'stalled', version: '0.0.0' },
          'io.modelcontextprotocol/clientCapabilities': {},
        },
        notifications: { toolsListChanged: true },
      },
    });
    const socket = connectTcp(Number(url.port), '127.0.0.1');
    sockets.push(socket);
    socket.write(
      'POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: application/json, text/event-stream\r\nContent-Type: application/json\r\n' +
        `Authorization: Bearer ${A1}\r\nMcp-Method: subscriptions/listen\r\nMcp-Protocol-Version: 2026-07-28\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
    );
    const head = await new Promise<string>((ok) => socket.once('data', (b: Buffer) => ok(b.toString('latin1'))));
    expect(head.slice(0, 300)).toMatch(/^HTTP\/1\.1 200[^]*content-type: text\/event-stream/);
    // It reads nothing more: its TCP window closes, the connection stays up.
    socket.pause();
    expect(endpoint.state().listening).toBe(1);

    // Tools come and go (a hosted server added and removed), one change notification each, until the stream is cut:
    // 64 of them are 16 MiB, far past the kernel's buffers and the bound.
    const [server] = parseServers({ churn: { url: 'http://127.0.0.1:9/mcp' } });
    for (let i = 0; i < 64 && endpoint.state().listening > 0; i++) {
      const notified = new Promise<void>((ok) => {
        const off = built!.hub.onToolsChanged(() => (off(), ok()));
      });
      built!.hub.addServer(server!);
      await built!.hub.removeServer('churn');
      await notified;
    }
    await vi.waitFor(() => expect(endpoint.state().listening).toBe(0), { timeout: 10_000 });
    expect(await built!.metrics.mcpStreamsCut.get()).toMatchObject({ values: [{ value: 1, labels: { stream: 'stateless' } }] });
    expect(logged('mcp stream cut')).toMatchObject([{ stream: 'stateless', tenant: 'acme' }]);
    socket.destroy();

    // The key's slot and the SDK's are free: a new listen is served.
    await listen(url, A1);
    expect(endpoint.state().listening).toBe(1);
  });
});
