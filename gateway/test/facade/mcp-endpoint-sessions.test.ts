import type { FastifyInstance } from 'fastify';
import pino from 'pino';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { afterEach, describe, expect, it, vi } from 'vitest';
import type { McpEndpoint, McpEndpointOptions } from '../../src/facade/mcp-endpoint.js';
import type { McpHub } from '../../src/hub/hub.js';
import { buildHub } from '../hub/support.js';
import { serveEndpoint } from './serve-endpoint.js';
import { pingSession } from './session-ping.js';

const KEY = 'sessions-test-key-0123456789abcdef';

/** Subscriptions each session takes on the hub (logs, resource updates), counted as they come and go. */
function countSubscriptions(hub: McpHub): () => number {
  let live = 0;
  for (const method of ['onLog', 'onResourceUpdated'] as const) {
    const original = hub[method].bind(hub) as (fn: unknown) => () => void;
    vi.spyOn(hub as unknown as Record<typeof method, (fn: unknown) => () => void>, method).mockImplementation((fn: unknown) => {
      const off = original(fn);
      live++;
      let done = false;
      return () => {
        if (!done) live--;
        done = true;
        return off();
      };
    });
  }
  return () => live;
}

let app: FastifyInstance | undefined;
let built: ReturnType<typeof buildHub> | undefined;
afterEach(async () => {
  await app?.close();
  await built?.hub.close();
  vi.restoreAllMocks();
  vi.useRealTimers();
});

async function start(options: Partial<McpEndpointOptions> = {}): Promise<{ url: URL; endpoint: McpEndpoint; subscriptions: () => number }> {
  built = buildHub({});
  const subscriptions = countSubscriptions(built.hub);
  const served = await serveEndpoint(built, { apiKeys: () => [KEY], ...options });
  app = served.app;
  return { url: served.url, endpoint: served.endpoint, subscriptions };
}

describe('/mcp sessions release what they hold when they end', () => {
  async function openSession(url: URL): Promise<{ client: Client; transport: StreamableHTTPClientTransport }> {
    const transport = new StreamableHTTPClientTransport(url, { requestInit: { headers: { authorization: `Bearer ${KEY}` } } });
    const client = new Client({ name: 'sessions-test', version: '0.0.0' });
    await client.connect(transport);
    await client.listTools();
    // A batch on the session (answered on an SSE stream, a lone request's answer is plain JSON), so that its event
    // store holds what the stream sent.
    const batch = await fetch(url, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${KEY}`,
        accept: 'application/json, text/event-stream',
        'content-type': 'application/json',
        'mcp-session-id': transport.sessionId!,
        'mcp-protocol-version': transport.protocolVersion!,
      },
      body: JSON.stringify([
        { jsonrpc: '2.0', id: 'a', method: 'ping' },
        { jsonrpc: '2.0', id: 'b', method: 'ping' },
      ]),
    });
    expect(batch.headers.get('content-type')).toBe('text/event-stream');
    await batch.text();
    return { client, transport };
  }

  it('N sessions opened and deleted leave no session, event store, key count or hub subscription behind', async () => {
    const { url, endpoint, subscriptions } = await start();
    const open = await Promise.all(Array.from({ length: 20 }, () => openSession(url)));
    expect(endpoint.state()).toMatchObject({ sessions: 20, eventStores: 20, keysHolding: 1, reserved: 0 });
    expect(endpoint.state().eventBytes).toBeGreaterThan(0);
    expect(subscriptions()).toBe(40);

    for (const { client, transport } of open) {
      await transport.terminateSession();
      await client.close();
    }
    expect(endpoint.state()).toEqual({ sessions: 0, streaming: 0, eventStores: 0, eventBytes: 0, keysHolding: 0, reserved: 0, listening: 0 });
    // The hub subscriptions are released when the session's server has closed (after the DELETE is answered).
    await vi.waitFor(() => expect(subscriptions()).toBe(0));
  });

  it('notifications/initialized sent again (and again) subscribes the session to the hub once', async () => {
    const { url, subscriptions } = await start();
    const { client, transport } = await openSession(url);
    expect(subscriptions()).toBe(2);
    for (let i = 0; i < 5; i++) await transport.send({ jsonrpc: '2.0', method: 'notifications/initialized' });
    // Handlers run a microtask after the 202: a ping on the session answers after them.
    await client.ping();
    expect(subscriptions()).toBe(2);
    await transport.terminateSession();
    await client.close();
    await vi.waitFor(() => expect(subscriptions()).toBe(0));
  });

  it('sessions abandoned without DELETE are swept when idle, and release the same', async () => {
    // The clock stands still while the sessions open (a busy machine cannot make them look idle), then jumps.
    vi.useFakeTimers({ toFake: ['Date'] });
    const { url, endpoint, subscriptions } = await start({ sessionIdleMs: 1000 });
    const open = await Promise.all(Array.from({ length: 5 }, () => openSession(url)));
    expect(endpoint.sessionCount()).toBe(5);
    // The clients go away without DELETE (a CLI run that exits): their GET streams end with them.
    for (const { client } of open) await client.close();
    await vi.waitFor(() => expect(endpoint.state().streaming).toBe(0), { timeout: 30_000 });
    vi.setSystemTime(Date.now() + 5000);
    await vi.waitFor(
      () => expect(endpoint.state()).toEqual({ sessions: 0, streaming: 0, eventStores: 0, eventBytes: 0, keysHolding: 0, reserved: 0, listening: 0 }),
      {
        timeout: 30_000,
      },
    );
    await vi.waitFor(() => expect(subscriptions()).toBe(0));
  });

  it('a session whose client holds its GET stream is not swept however long it sends nothing; once the stream ends it is', async () => {
    vi.useFakeTimers({ toFake: ['Date'] });
    const { url, endpoint } = await start({ sessionIdleMs: 1000 });
    const listening = await openSession(url);
    const gone = await openSession(url);
    await vi.waitFor(() => expect(endpoint.state().streaming).toBe(2), { timeout: 30_000 });
    await gone.client.close();
    await vi.waitFor(() => expect(endpoint.state().streaming).toBe(1), { timeout: 30_000 });
    vi.setSystemTime(Date.now() + 5000);
    // One sweep looks at every session with one clock: the pass that took the stream-less session passed the listening one.
    await vi.waitFor(() => expect(endpoint.sessionCount()).toBe(1), { timeout: 30_000 });
    expect(await listening.client.ping()).toEqual({});
    await listening.client.close();
    vi.setSystemTime(Date.now() + 5000);
    await vi.waitFor(() => expect(endpoint.sessionCount()).toBe(0), { timeout: 30_000 });
  });

  it('a refused initialize (over the per-key cap) holds nothing', async () => {
    const { url, endpoint, subscriptions } = await start({ maxSessionsPerKey: 2 });
    const open = await Promise.all([openSession(url), openSession(url)]);
    await expect(openSession(url)).rejects.toThrow();
    expect(endpoint.state()).toMatchObject({ sessions: 2, eventStores: 2, keysHolding: 1, reserved: 0 });
    for (const { client, transport } of open) {
      await transport.terminateSession();
      await client.close();
    }
    expect(endpoint.state()).toEqual({ sessions: 0, streaming: 0, eventStores: 0, eventBytes: 0, keysHolding: 0, reserved: 0, listening: 0 });
    await vi.waitFor(() => expect(subscriptions()).toBe(0));
  });
});

describe('/mcp: at a cap, a key gives up its least recently used session that no client holds a stream of', () => {
  const OTHER = 'sessions-test-other-key-0123456789';

  /** A session as the Inspector CLI or mcp-remote opens one: initialize, the SDK client's GET stream, a request. */
  async function connect(url: URL, key = KEY) {
    const transport = new StreamableHTTPClientTransport(url, { requestInit: { headers: { authorization: `Bearer ${key}` } } });
    const client = new Client({ name: 'eviction-test', version: '0.0.0' });
    await client.connect(transport);
    await client.listTools();
    return { client, transport, sessionId: transport.sessionId! };
  }

  const ping = (url: URL, sessionId: string, key = KEY) => pingSession(url, sessionId, key);

  const evicted = async (reason: string) => (await built!.metrics.mcpSessionsEvicted.get()).values.find((v) => v.labels['reason'] === reason)?.value ?? 0;

  /** Moves the clock past the time a session just used or let go of is kept (session-table.ts). */
  const later = () => vi.setSystemTime(Date.now() + 60_000);

  it('a client that left without DELETE gives its slot to the new session; its id then gets 404; sessions with a stream are kept', async () => {
    vi.useFakeTimers({ toFake: ['Date'] });
    const lines: Array<Record<string, unknown>> = [];
    const log = pino({ level: 'info' }, { write: (line: string) => void lines.push(JSON.parse(line) as Record<string, unknown>) });
    const { url, endpoint } = await start({ maxSessionsPerKey: 2, log });
    const a = await connect(url);
    const b = await connect(url);
    await vi.waitFor(() => expect(endpoint.state().streaming).toBe(2));
    later();
    // Every session of the key has a client on its GET stream, however long unused: the cap holds.
    await expect(connect(url)).rejects.toThrow(/Too many MCP sessions for this API key/);

    // a's client exits without DELETE (what the Inspector CLI and mcp-remote do): its GET stream ends.
    await a.client.close();
    await vi.waitFor(() => expect(endpoint.state().streaming).toBe(1));
    // Just let go of (its client may be reconnecting after a drop): kept for a moment.
    await expect(connect(url)).rejects.toThrow(/Too many MCP sessions for this API key/);
    later();
    const c = await connect(url);
    expect(endpoint.state()).toMatchObject({ sessions: 2, keysHolding: 1, reserved: 0 });
    expect(await evicted('key_limit')).toBe(1);
    expect(lines.some((l) => String(l['msg']).startsWith('mcp session evicted') && l['reason'] === 'key_limit')).toBe(true);

    // The evicted id gets the answer clients re-initialize on; b (with its stream) and c are served.
    expect(await ping(url, a.sessionId)).toMatchObject({ status: 404, body: { error: { message: 'Session not found: initialize again' } } });
    expect((await ping(url, b.sessionId)).status).toBe(200);
    expect((await c.client.listTools()).tools).toBeDefined();
    for (const s of [b, c]) {
      await s.transport.terminateSession();
      await s.client.close();
    }
    expect(endpoint.state()).toMatchObject({ sessions: 0, eventStores: 0, keysHolding: 0, reserved: 0 });
  });

  it("never evicts another key's session, though it be the least recently used of all", async () => {
    vi.useFakeTimers({ toFake: ['Date'] });
    const { url, endpoint } = await start({ maxSessionsPerKey: 2, apiKeys: () => [KEY, OTHER] });
    const theirs = await connect(url, OTHER);
    await theirs.client.close();
    const a = await connect(url);
    const b = await connect(url);
    await vi.waitFor(() => expect(endpoint.state().streaming).toBe(2));
    later();
    await a.client.close();
    await vi.waitFor(() => expect(endpoint.state().streaming).toBe(1));
    later();

    const c = await connect(url);
    expect(await ping(url, a.sessionId)).toMatchObject({ status: 404 });
    expect((await ping(url, theirs.sessionId, OTHER)).status).toBe(200);
    expect(endpoint.state()).toMatchObject({ sessions: 3, keysHolding: 2 });
    for (const s of [b, c]) await s.client.close();
  });

  it('at the total cap a key gives up only a session of its own; a key with none to give up gets 503', async () => {
    vi.useFakeTimers({ toFake: ['Date'] });
    const { url, endpoint } = await start({ maxSessions: 2, maxSessionsPerKey: 2, apiKeys: () => [KEY, OTHER] });
    const theirs = await connect(url, OTHER);
    await theirs.client.close();
    const a = await connect(url);
    await vi.waitFor(() => expect(endpoint.state().streaming).toBe(1));
    later();
    // The gateway is full; the other key's session is stream-less and the oldest, but not this key's to take.
    await expect(connect(url)).rejects.toThrow(/Too many MCP sessions;/);
    expect((await ping(url, theirs.sessionId, OTHER)).status).toBe(200);

    await a.client.close();
    await vi.waitFor(() => expect(endpoint.state().streaming).toBe(0));
    later();
    const b = await connect(url);
    expect(await evicted('gateway_limit')).toBe(1);
    expect(await ping(url, a.sessionId)).toMatchObject({ status: 404 });
    expect((await ping(url, theirs.sessionId, OTHER)).status).toBe(200);
    await b.client.close();
  });
});
