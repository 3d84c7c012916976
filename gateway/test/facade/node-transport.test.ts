import { randomUUID } from 'node:crypto';
import { createServer, type Server as HttpServer } from 'node:http';
import { connect as connectTcp, type AddressInfo } from 'node:net';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { McpServer, type CallToolResult } from '@modelcontextprotocol/server';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { BoundedEventStores } from '../../src/facade/event-store.js';
import { NodeSessionTransport } from '../../src/facade/node-transport.js';
import { HeldStreams } from '../../src/facade/sse-stream.js';

/**
 * The Node-native session transport behind a plain `node:http` server (no gateway), driven by the MCP SDK's
 * own client and by raw requests for what a client must not be able to do.
 */
describe('NodeSessionTransport', () => {
  /** The `hang` tool waits for this (set by a test) and tells it has started. */
  let hang: { started: () => void; until: Promise<void> } | undefined;
  let http: HttpServer | undefined;
  let held: HeldStreams | undefined;
  afterEach(async () => {
    held?.close();
    http?.closeAllConnections();
    await new Promise((ok) => (http ? http.close(ok) : ok(undefined)));
    http = undefined;
  });

  /** One McpServer per session with three tools: echo, progress (two notifications, then the answer) and drop. */
  function buildServer(): McpServer {
    const mcp = new McpServer({ name: 't', version: '0' }, { capabilities: { tools: { listChanged: true } } });
    mcp.server.setRequestHandler('tools/list', () => ({
      tools: ['echo', 'progress', 'drop'].map((name) => ({ name, inputSchema: { type: 'object' as const } })),
    }));
    mcp.server.setRequestHandler('tools/call', async (req, ctx) => {
      const text = (s: string): CallToolResult => ({ content: [{ type: 'text', text: s }] });
      if (req.params.name === 'progress') {
        const token = ctx.mcpReq._meta?.progressToken;
        if (token !== undefined) {
          await ctx.mcpReq.notify({ method: 'notifications/progress', params: { progressToken: token, progress: 1, total: 2 } });
          await ctx.mcpReq.notify({ method: 'notifications/progress', params: { progressToken: token, progress: 2, total: 2 } });
        }
        return text('done');
      }
      if (req.params.name === 'hang' && hang) {
        hang.started();
        await hang.until;
        return text('late');
      }
      if (req.params.name === 'drop') {
        // The stream closes before the answer: the client resumes it with Last-Event-ID and gets the answer.
        ctx.http?.closeSSE?.();
        await new Promise((ok) => setTimeout(ok, 50));
        return text('after the drop');
      }
      return text(JSON.stringify(req.params.arguments ?? {}));
    });
    return mcp;
  }

  async function start(): Promise<{ url: URL; sessions: Map<string, { transport: NodeSessionTransport; server: McpServer }>; cuts: () => number }> {
    const sessions = new Map<string, { transport: NodeSessionTransport; server: McpServer }>();
    let cut = 0;
    const stores = new BoundedEventStores();
    const h = (held = new HeldStreams(50));
    http = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        const text = Buffer.concat(chunks).toString('utf8');
        let body: unknown;
        try {
          body = text ? JSON.parse(text) : undefined;
        } catch {
          res.writeHead(400).end();
          return;
        }
        const sid = req.headers['mcp-session-id'];
        void (async () => {
          let s = typeof sid === 'string' ? sessions.get(sid) : undefined;
          if (!s && typeof sid === 'string') return void res.writeHead(404).end();
          if (!s) {
            const server = buildServer();
            const transport = new NodeSessionTransport({
              held: h,
              eventStore: stores.forSession(),
              retryInterval: 10,
              sessionIdGenerator: () => randomUUID(),
              onsessioninitialized: (id) => void sessions.set(id, { transport, server }),
              onsessionclosed: (id) => void sessions.delete(id),
              onUnreadCut: () => void cut++,
            });
            await server.connect(transport);
            s = { transport, server };
          }
          await s.transport.handleRequest(req, res, body, undefined);
        })();
      });
    });
    await new Promise<void>((ok) => http!.listen(0, '127.0.0.1', ok));
    return { url: new URL(`http://127.0.0.1:${(http.address() as AddressInfo).port}/mcp`), sessions, cuts: () => cut };
  }

  async function connect(url: URL): Promise<{ client: Client; transport: StreamableHTTPClientTransport }> {
    const transport = new StreamableHTTPClientTransport(url);
    const client = new Client({ name: 'node-transport-test', version: '0' });
    await client.connect(transport);
    return { client, transport };
  }

  const text = (r: unknown) => ((r as CallToolResult).content[0] as { text: string }).text;

  it('serves the SDK client: initialize, tools/list, tools/call, progress, a dropped stream resumed, and DELETE', async () => {
    const { url, sessions } = await start();
    const { client, transport } = await connect(url);
    expect(transport.sessionId).toMatch(/^[0-9a-f-]{36}$/);
    expect(sessions.size).toBe(1);
    expect((await client.listTools()).tools.map((t) => t.name)).toEqual(['echo', 'progress', 'drop']);
    expect(text(await client.callTool({ name: 'echo', arguments: { a: 1 } }))).toBe('{"a":1}');

    const progress: number[] = [];
    const done = await client.callTool({ name: 'progress', arguments: {} }, { onprogress: (p) => void progress.push(p.progress) });
    expect(text(done)).toBe('done');
    expect(progress).toEqual([1, 2]);

    expect(text(await client.callTool({ name: 'drop', arguments: {} }))).toBe('after the drop');

    const changed = new Promise<void>((ok) => client.setNotificationHandler('notifications/tools/list_changed', () => ok()));
    // The GET stream opens after initialized; sending until it is there is how a server meets a late listener.
    const s = sessions.get(transport.sessionId!)!;
    const timer = setInterval(() => void s.server.sendToolListChanged(), 20);
    await changed.finally(() => clearInterval(timer));

    await transport.terminateSession();
    expect(sessions.size).toBe(0);
    await client.close();
  });

  /** A raw request on a fresh or given session. */
  async function raw(url: URL, body: unknown, headers: Record<string, string> = {}, method = 'POST') {
    const r = await fetch(url, {
      method,
      headers: { accept: 'application/json, text/event-stream', 'content-type': 'application/json', ...headers },
      ...(body === undefined ? {} : { body: typeof body === 'string' ? body : JSON.stringify(body) }),
    });
    return {
      status: r.status,
      type: r.headers.get('content-type'),
      length: r.headers.get('content-length'),
      text: await r.text(),
      sid: r.headers.get('mcp-session-id'),
    };
  }
  const INIT = {
    jsonrpc: '2.0',
    id: 0,
    method: 'initialize',
    params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'raw', version: '0' } },
  };

  it('answers a lone request as one JSON body, a batch as one SSE body (priming event, then the answers), a notification with 202', async () => {
    const { url } = await start();
    const init = await raw(url, INIT);
    expect(init.status).toBe(200);
    // The answer was the first thing its stream would carry: plain JSON, whole, with its length and the session id.
    expect(init.type).toBe('application/json');
    expect(Number(init.length)).toBe(Buffer.byteLength(init.text));
    expect(JSON.parse(init.text)).toMatchObject({ jsonrpc: '2.0', id: 0, result: { protocolVersion: '2025-11-25' } });
    const sid = init.sid!;
    const h = { 'mcp-session-id': sid, 'mcp-protocol-version': '2025-11-25' };
    expect((await raw(url, { jsonrpc: '2.0', method: 'notifications/initialized' }, h)).status).toBe(202);
    const list = await raw(url, { jsonrpc: '2.0', id: 1, method: 'tools/list' }, h);
    expect(list.type).toBe('application/json');
    expect(list.text).toContain('"name":"echo"');
    // A batch: both answers on one stream, held until the last one: one SSE body with its length.
    const batch = await raw(
      url,
      [
        { jsonrpc: '2.0', id: 2, method: 'ping' },
        { jsonrpc: '2.0', id: 3, method: 'tools/call', params: { name: 'echo', arguments: { b: 2 } } },
      ],
      h,
    );
    expect(batch.type).toBe('text/event-stream');
    expect(Number(batch.length)).toBe(Buffer.byteLength(batch.text));
    expect(batch.text).toMatch(/^id: \S+\nretry: 10\ndata: \n\nevent: message\nid: \S+\ndata: /);
    expect(batch.text).toContain('"id":2');
    expect(batch.text).toContain('{\\"b\\":2}');
    // Progress before the answer: an SSE stream, the priming event first (its id comes before the events' ids).
    const progress = await raw(
      url,
      { jsonrpc: '2.0', id: 4, method: 'tools/call', params: { name: 'progress', arguments: {}, _meta: { progressToken: 't' } } },
      h,
    );
    expect(progress.type).toBe('text/event-stream');
    const ids = [...progress.text.matchAll(/^id: (\S+)$/gm)].map((m) => Number(m[1]!.split('_').pop()));
    expect(progress.text).toMatch(/^id: \S+\nretry: 10\ndata: \n\n(event: message\nid: \S+\ndata: .*"notifications\/progress".*\n\n){2}event: message/);
    expect(ids).toHaveLength(4);
    expect(ids).toEqual([...ids].sort((a, b) => a - b));
    // A 2025-06-18 batch: no priming event (those clients do not take empty data).
    const old = await raw(
      url,
      [
        { jsonrpc: '2.0', id: 5, method: 'ping' },
        { jsonrpc: '2.0', id: 6, method: 'ping' },
      ],
      { ...h, 'mcp-protocol-version': '2025-06-18' },
    );
    expect(old.text).toMatch(/^event: message\nid: \S+\ndata: /);
    expect((await raw(url, undefined, h, 'DELETE')).status).toBe(200);
    expect(await raw(url, { jsonrpc: '2.0', id: 7, method: 'ping' }, h)).toMatchObject({ status: 404 });
  });

  it('a lone answer that comes after the hold is streamed: headers and the priming event first, then the answer', async () => {
    const { url } = await start();
    const sid = (await raw(url, INIT)).sid!;
    const h = { 'mcp-session-id': sid, 'mcp-protocol-version': '2025-11-25' };
    let release!: () => void;
    let started!: () => void;
    const running = new Promise<void>((ok) => (started = ok));
    hang = { started, until: new Promise<void>((ok) => (release = ok)) };
    const call = fetch(url, {
      method: 'POST',
      headers: { accept: 'application/json, text/event-stream', 'content-type': 'application/json', ...h },
      body: JSON.stringify({ jsonrpc: '2.0', id: 9, method: 'tools/call', params: { name: 'hang', arguments: {} } }),
    });
    await running;
    // The hold (50 ms here) ends: the headers leave with the priming event, before the answer exists.
    const res = await call;
    expect(res.headers.get('content-type')).toBe('text/event-stream');
    release();
    hang = undefined;
    const body = await res.text();
    expect(body).toMatch(/^id: \S+\nretry: 10\ndata: \n\nevent: message\nid: \S+\ndata: \{.*"late"/);
  });

  it('a client that lost its GET stream while the server still holds it (half-open) resumes it with Last-Event-ID: the newest connection takes over', async () => {
    const { url, sessions } = await start();
    // A network where the client's side of the next GET stream breaks while the server's side stays open (a NAT
    // or Wi-Fi change, a laptop waking up): the server keeps writing to a connection nobody reads.
    let breakGet = false;
    const stale: Array<ReadableStreamDefaultReader<Uint8Array>> = [];
    const resumedWith: string[] = [];
    const halfOpen: typeof fetch = async (input, init) => {
      const res = await fetch(input, init);
      const last = init?.method === 'GET' ? new Headers(init.headers).get('last-event-id') : null;
      if (last) resumedWith.push(`${last} ${res.status}`);
      if (init?.method !== 'GET' || !res.ok || !res.body) return res;
      const reader = res.body.getReader();
      const body = new ReadableStream<Uint8Array>({
        async pull(c) {
          if (breakGet) {
            breakGet = false;
            stale.push(reader); // never cancelled: the server sees no close
            c.error(new Error('network dropped'));
            return;
          }
          const { value, done } = await reader.read();
          if (done) return c.close();
          c.enqueue(value);
        },
      });
      return new Response(body, { status: res.status, headers: res.headers });
    };
    const transport = new StreamableHTTPClientTransport(url, {
      fetch: halfOpen,
      reconnectionOptions: { maxRetries: 3, initialReconnectionDelay: 10, maxReconnectionDelay: 10, reconnectionDelayGrowFactor: 1 },
    });
    const client = new Client({ name: 'half-open', version: '0' });
    const errors: string[] = [];
    client.onerror = (e) => void errors.push(e.message);
    let heard = 0;
    client.setNotificationHandler('notifications/tools/list_changed', () => void heard++);
    await client.connect(transport);
    const s = sessions.get(transport.sessionId!)!;
    try {
      // The GET stream opens after initialized; sending until one arrives is how a server meets a late listener.
      const timer = setInterval(() => void s.server.sendToolListChanged(), 20);
      await vi.waitFor(() => expect(heard).toBeGreaterThan(0));
      clearInterval(timer);
      breakGet = true;
      const before = heard;
      await s.server.sendToolListChanged(); // read by the broken side: the client loses the stream here
      await vi.waitFor(() => expect(resumedWith.length).toBeGreaterThan(0));
      expect(resumedWith[0]).toMatch(/ 200$/);
      // The resumption was served (not 409 because the old connection still looked open), and what is sent now arrives.
      await vi.waitFor(async () => {
        await s.server.sendToolListChanged();
        expect(heard).toBeGreaterThan(before);
      });
      expect(errors.filter((m) => /Conflict|Failed to reconnect/.test(m))).toEqual([]);
      expect(resumedWith).toHaveLength(1);
    } finally {
      for (const r of stale) await r.cancel().catch(() => undefined);
      await client.close();
    }
  });

  it('a 2025-11-25 GET stream starts with a priming event: a client that loses it resumes from there and gets what it missed', async () => {
    const { url, sessions } = await start();
    const sid = (await raw(url, INIT)).sid!;
    const s = sessions.get(sid)!;
    /** A GET stream on the session, read event by event (an event ends at a blank line). */
    const open = async (headers: Record<string, string>) => {
      const stop = new AbortController();
      const res = await fetch(url, { headers: { 'mcp-session-id': sid, accept: 'text/event-stream', ...headers }, signal: stop.signal });
      expect(res.status).toBe(200);
      const reader = res.body!.pipeThrough(new TextDecoderStream()).getReader();
      let buffered = '';
      const next = async (): Promise<string> => {
        while (!buffered.includes('\n\n')) {
          const { value, done } = await reader.read();
          if (done) throw new Error(`stream ended in: ${buffered}`);
          buffered += value;
        }
        const end = buffered.indexOf('\n\n') + 2;
        const event = buffered.slice(0, end);
        buffered = buffered.slice(end);
        return event;
      };
      return { next, stop: () => stop.abort() };
    };

    const first = await open({ 'mcp-protocol-version': '2025-11-25' });
    // A notification now: the stream is registered once its headers arrived (and without a priming event, this is
    // what the first read would return).
    await s.server.sendToolListChanged();
    const priming = /^id: (\S+)\nretry: 10\ndata: \n\n$/.exec(await first.next());
    expect(priming).not.toBeNull();
    expect(await first.next()).toContain('notifications/tools/list_changed');
    // The client loses the stream; what is sent meanwhile is replayed on a GET with the priming event's id.
    first.stop();
    await vi.waitFor(() => expect(s.transport.hasOpenStream()).toBe(false));
    await s.server.sendToolListChanged();
    // Both notifications came after the priming event: the one read before the loss, and the one missed.
    const resumed = await open({ 'mcp-protocol-version': '2025-11-25', 'last-event-id': priming![1]! });
    expect(await resumed.next()).toContain('notifications/tools/list_changed');
    expect(await resumed.next()).toContain('notifications/tools/list_changed');
    resumed.stop();

    // A 2025-06-18 client does not take empty data: its GET stream has no priming event.
    const old = await raw(url, { ...INIT, params: { ...INIT.params, protocolVersion: '2025-06-18' } });
    const oldSession = sessions.get(old.sid!)!;
    const oldStream = await fetch(url, {
      headers: { 'mcp-session-id': old.sid!, 'mcp-protocol-version': '2025-06-18', accept: 'text/event-stream' },
    });
    await oldSession.server.sendToolListChanged();
    const reader = oldStream.body!.pipeThrough(new TextDecoderStream()).getReader();
    const { value } = await reader.read();
    expect(value).toMatch(/^event: message\nid: \S+\ndata: \{.*tools\/list_changed/);
    await reader.cancel();
  });

  it('refuses bad input with the SDK transport statuses and JSON-RPC errors', async () => {
    const { url } = await start();
    const error = (r: { text: string }) => (JSON.parse(r.text) as { error: { code: number; message: string } }).error;
    const sid = (await raw(url, INIT)).sid!;
    const h = { 'mcp-session-id': sid };
    const cases: Array<[unknown, Record<string, string>, number, number, RegExp]> = [
      [{ jsonrpc: '2.0', id: 1, method: 'ping' }, { ...h, accept: 'application/json' }, 406, -32000, /Not Acceptable/],
      [{ jsonrpc: '2.0', id: 1, method: 'ping' }, { ...h, 'content-type': 'text/plain' }, 415, -32000, /Unsupported Media Type/],
      [{ id: 1, method: 'ping' }, h, 400, -32700, /Invalid JSON-RPC message/],
      [{ jsonrpc: '2.0', id: 1.5, method: 'ping' }, h, 400, -32700, /Invalid JSON-RPC message/],
      [{ jsonrpc: '2.0', id: 1, method: 'ping', extra: true }, h, 400, -32700, /Invalid JSON-RPC message/],
      [{ jsonrpc: '2.0', id: 1, method: 'ping', params: [] }, h, 400, -32700, /Invalid JSON-RPC message/],
      [{ jsonrpc: '2.0', id: 1, method: 'ping', params: { _meta: { progressToken: {} } } }, h, 400, -32700, /Invalid JSON-RPC message/],
      [Array.from({ length: 101 }, (_, i) => ({ jsonrpc: '2.0', id: i, method: 'ping' })), h, 400, -32600, /Batch must not exceed 100/],
      [{ jsonrpc: '2.0', id: 1, method: 'ping', params: { deep: JSON.parse('['.repeat(100) + ']'.repeat(100)) as unknown } }, h, 400, -32700, /Invalid JSON/],
      [{ jsonrpc: '2.0', id: 1, method: 'ping' }, { 'mcp-session-id': sid, 'mcp-protocol-version': '1999-01-01' }, 400, -32000, /Unsupported protocol version/],
      [INIT, h, 400, -32600, /already initialized/],
    ];
    for (const [body, headers, status, code, message] of cases) {
      const r = await raw(url, body, headers);
      expect({ status: r.status, code: error(r).code }).toEqual({ status, code });
      expect(error(r).message).toMatch(message);
    }
    // A GET that does not take SSE, and a second GET stream on one session.
    expect((await raw(url, undefined, { ...h, accept: 'application/json' }, 'GET')).status).toBe(406);
    const first = new AbortController();
    const stream = await fetch(url, { headers: { ...h, accept: 'text/event-stream' }, signal: first.signal });
    expect(stream.status).toBe(200);
    const second = await raw(url, undefined, { ...h, accept: 'text/event-stream' }, 'GET');
    expect({ status: second.status, code: error(second).code }).toEqual({ status: 409, code: -32000 });
    first.abort();
  });

  it('forgets a POST stream whose client went away before the answer; the session goes on', async () => {
    const { url, sessions } = await start();
    const sid = (await raw(url, INIT)).sid!;
    const h = { 'mcp-session-id': sid, 'mcp-protocol-version': '2025-11-25' };
    const streams = () => (sessions.get(sid)!.transport as unknown as { streams: Map<string, unknown> }).streams.size;
    let release!: () => void;
    let started!: () => void;
    const running = new Promise<void>((ok) => (started = ok));
    hang = { started, until: new Promise<void>((ok) => (release = ok)) };
    const gone = new AbortController();
    const call = fetch(url, {
      method: 'POST',
      headers: { accept: 'application/json, text/event-stream', 'content-type': 'application/json', ...h },
      body: JSON.stringify({ jsonrpc: '2.0', id: 7, method: 'tools/call', params: { name: 'hang', arguments: {} } }),
      signal: gone.signal,
    }).catch(() => undefined);
    await running;
    expect(streams()).toBe(1);
    gone.abort();
    await call;
    await vi.waitFor(() => expect(streams()).toBe(0));
    release();
    hang = undefined;
    const ping = await raw(url, { jsonrpc: '2.0', id: 8, method: 'ping' }, h);
    expect(ping.status).toBe(200);
    expect(ping.text).toContain('"id":8');
    expect(streams()).toBe(0);
  });

  it('a GET stream whose client stopped reading is cut once a MiB waits unread, not queued without bound; the client may open another', async () => {
    const { url, sessions, cuts } = await start();
    const sid = (await raw(url, INIT)).sid!;
    const s = sessions.get(sid)!;
    // A client that opens its GET stream, reads the headers, then reads nothing more (its TCP window closes, the
    // connection stays up: the idle sweep leaves a session with an open stream alone).
    const socket = connectTcp(Number(url.port), '127.0.0.1');
    socket.write(`GET /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\nMcp-Session-Id: ${sid}\r\nMcp-Protocol-Version: 2025-11-25\r\n\r\n`);
    const head = await new Promise<string>((ok) => socket.once('data', (b: Buffer) => ok(b.toString('latin1'))));
    expect(head).toMatch(/^HTTP\/1\.1 200/);
    socket.pause();
    const closed = new Promise<void>((ok) => socket.once('close', () => ok()));
    await vi.waitFor(() => expect(s.transport.hasOpenStream()).toBe(true));
    // 32 MiB of notifications (half a MiB each): far past what the kernel's buffers take for a reader that reads nothing.
    const blob = 'x'.repeat(512 * 1024);
    for (let i = 0; i < 64; i++) await s.transport.send({ jsonrpc: '2.0', method: 'notifications/message', params: { level: 'info', data: blob } });
    // Cut: the session has no stream any more (so it can be evicted or swept), and the socket was closed; the
    // endpoint is told once (for its count).
    expect(s.transport.hasOpenStream()).toBe(false);
    expect(cuts()).toBe(1);
    socket.destroy();
    await closed;
    // The stream was forgotten as a dropped one is: a new GET is served, not refused with 409.
    const again = new AbortController();
    const res = await fetch(url, {
      headers: { 'mcp-session-id': sid, 'mcp-protocol-version': '2025-11-25', accept: 'text/event-stream' },
      signal: again.signal,
    });
    expect(res.status).toBe(200);
    again.abort();
  });

  it('a request before initialize, or one without a session id, is refused', async () => {
    const { url } = await start();
    // The test server makes a fresh transport for a request without a session id: not initialized yet.
    const r = await raw(url, { jsonrpc: '2.0', id: 1, method: 'ping' });
    expect(r.status).toBe(400);
    expect(r.text).toContain('Server not initialized');
  });
});
