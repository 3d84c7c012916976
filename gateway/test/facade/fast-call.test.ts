import { randomUUID } from 'node:crypto';
import { createServer, type Server as HttpServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import pino from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { GatewayError } from '../../src/errors.js';
import { BoundedEventStores } from '../../src/facade/event-store.js';
import { fastToolsCall, type FastEntry } from '../../src/facade/fast-call.js';
import { buildFacadeServer, toolsCallOf } from '../../src/facade/mcp-server.js';
import { NodeSessionTransport } from '../../src/facade/node-transport.js';
import { HeldStreams } from '../../src/facade/sse-stream.js';
import type { McpHub } from '../../src/hub/hub.js';
import type { CallContext } from '../../src/hub/upstream/base.js';

/**
 * Voxgate's own tools/call dispatcher (fast-call.ts) against the SDK's `_onrequest`, on the same session transport:
 * the same sequences of raw HTTP requests (valid and hostile) sent to a session served each way give the same bytes
 * (statuses, SSE bodies, with the random session and stream ids numbered by first appearance), and the hub sees
 * the same calls (arguments, tokens, progress, peer, cancellation).
 */

type Mode = 'fast' | 'sdk';
type Json = Record<string, unknown>;

/** A hub with scripted tools (the facade server uses only these members). */
function fakeHub(seen: Json[], signals: AbortSignal[] = []) {
  let waiting: (() => void) | undefined;
  const aborted = new Set<string>();
  const hub = {
    instructions: () => ({ system: [] }),
    tools: () => [],
    serverVisible: () => true,
    onLog: () => () => undefined,
    onResourceUpdated: () => () => undefined,
    async call(name: string, args: Json, ctx: CallContext) {
      if (ctx.signal) signals.push(ctx.signal);
      if (name === 'sticky') ctx.signal?.addEventListener('abort', () => undefined);
      seen.push({ name, args, tokens: ctx.tokens ?? null, progress: ctx.onProgress !== undefined, signal: ctx.signal instanceof AbortSignal });
      const text = (t: string) => ({ content: [{ type: 'text', text: t }], durationMs: 1.5 });
      switch (name) {
        case 'nocontent':
          return { structuredContent: { a: 1 }, durationMs: 1 };
        case 'badresult':
          return { content: [{ type: 'bogus' }], durationMs: 1 };
        case 'meta':
          return {
            extra: true,
            isError: false,
            structuredContent: { b: [1] },
            content: [{ type: 'text', text: 'm', _meta: { k: 1 } }],
            _meta: { z: 1 },
            durationMs: 1,
          };
        case 'image':
          return { content: [{ type: 'image', data: 'aGk=', mimeType: 'image/png' }], durationMs: 1 };
        case 'missing':
          throw new GatewayError('TOOL_NOT_FOUND', `no tool "${name}"`);
        case 'badargs':
          throw new GatewayError('INVALID_ARGUMENTS', 'argument x is wrong');
        case 'boom':
          throw new Error('boom');
        case 'coded':
          throw Object.assign(new Error('coded'), { code: -32002, data: { why: 1 } });
        case 'progress':
          ctx.onProgress?.({ progress: 1, total: 2 });
          ctx.onProgress?.({ progress: 2, total: 2, message: 'half' });
          return text('done');
        case 'sample': {
          const supported = ctx.peer?.supports('sampling/createMessage');
          const r = await ctx.peer!.request('sampling/createMessage', { messages: [], maxTokens: 5 }, ctx.signal!);
          return text(JSON.stringify({ supported, r }));
        }
        case 'wait':
          return await new Promise((resolve) => {
            waiting?.();
            ctx.signal!.addEventListener('abort', () => {
              aborted.add(String((ctx.signal!.reason as Error | string | undefined) ?? ''));
              resolve(text('late'));
            });
          });
        default:
          return text(JSON.stringify(args));
      }
    },
    /** What the facade calls (McpHub.callTimed): the result without its duration, and the duration beside it. */
    async callTimed(name: string, args: Json, ctx: CallContext) {
      const { durationMs, ...result } = (await hub.call(name, args, ctx)) as Record<string, unknown>;
      return { result, durationMs };
    },
  };
  const started = () => new Promise<void>((ok) => (waiting = ok));
  return { hub: hub as unknown as McpHub, started, aborted };
}

interface Session {
  transport: NodeSessionTransport;
  fastTaken: number;
}

describe('fast tools/call dispatch against the SDK path', () => {
  let http: HttpServer | undefined;
  let held: HeldStreams | undefined;
  afterEach(async () => {
    held?.close();
    http?.closeAllConnections();
    await new Promise((ok) => (http ? http.close(ok) : ok(undefined)));
    http = undefined;
  });

  /** A node:http server whose sessions are served fast or by the SDK, as the initialize's `x-mode` asks. */
  async function start() {
    const sessions = new Map<string, Session>();
    const hubs = new Map<string, ReturnType<typeof fakeHub> & { seen: Json[] }>();
    const stores = new BoundedEventStores();
    const h = (held = new HeldStreams(20));
    http = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        const text = Buffer.concat(chunks).toString('utf8');
        const body: unknown = text ? JSON.parse(text) : undefined;
        const sid = req.headers['mcp-session-id'];
        void (async () => {
          let s = typeof sid === 'string' ? sessions.get(sid) : undefined;
          if (!s && typeof sid === 'string') return void res.writeHead(404).end();
          if (!s) {
            const mode = req.headers['x-mode'] as Mode;
            const seen: Json[] = [];
            const fake = fakeHub(seen);
            const server = buildFacadeServer(fake.hub, {}, { log: pino({ level: 'silent' }), version: '0' });
            const transport = new NodeSessionTransport({
              held: h,
              eventStore: stores.forSession(),
              retryInterval: 10,
              sessionIdGenerator: () => randomUUID(),
              onsessioninitialized: (id) => void (sessions.set(id, session), hubs.set(mode, { ...fake, seen })),
              onsessionclosed: (id) => void sessions.delete(id),
            });
            const session: Session = { transport, fastTaken: 0 };
            await server.connect(transport);
            transport.useRequestEntry(server.server);
            if (mode === 'fast') {
              const entry = fastToolsCall(server, toolsCallOf(server)!)!;
              expect(entry).toBeDefined();
              const counted: FastEntry = (m, r) => {
                const taken = entry(m, r);
                if (taken) session.fastTaken++;
                return taken;
              };
              transport.useFastEntry(counted);
            }
            s = session;
          }
          await s.transport.handleRequest(req, res, body, undefined);
        })();
      });
    });
    await new Promise<void>((ok) => http!.listen(0, '127.0.0.1', ok));
    return { url: `http://127.0.0.1:${(http.address() as AddressInfo).port}/mcp`, sessions, hubs };
  }

  /** One client session driven by raw requests; every exchange recorded as text. */
  class Driver {
    sid = '';
    readonly log: string[] = [];
    constructor(
      private readonly url: string,
      private readonly mode: Mode,
    ) {}

    async init(capabilities: Json = {}) {
      await this.post(
        { jsonrpc: '2.0', id: 0, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities, clientInfo: { name: 'c', version: '0' } } },
        { 'x-mode': this.mode },
      );
      await this.post({ jsonrpc: '2.0', method: 'notifications/initialized' });
    }

    /** POSTs `body`; server requests on the answer stream are answered by `answer` (a response POSTed back). */
    async post(
      body: unknown,
      headers: Record<string, string> = {},
      o: { answer?: (req: Json) => Json; signal?: AbortSignal; primed?: () => void } = {},
    ): Promise<string> {
      const { answer, signal } = o;
      // Recorded in the order sent, whatever order the answers end in.
      const slot = this.log.push('') - 1;
      const res = await fetch(this.url, {
        method: 'POST',
        headers: {
          accept: 'application/json, text/event-stream',
          'content-type': 'application/json',
          ...(this.sid ? { 'mcp-session-id': this.sid, 'mcp-protocol-version': '2025-11-25' } : {}),
          ...headers,
        },
        body: typeof body === 'string' ? body : JSON.stringify(body),
        signal,
      });
      this.sid ||= res.headers.get('mcp-session-id') ?? '';
      let text = '';
      const reader = res.body!.getReader();
      const decoder = new TextDecoder();
      let answered = 0;
      try {
        for (;;) {
          const { done, value } = await reader.read();
          if (done) break;
          text += decoder.decode(value, { stream: true });
          if (text.includes('retry:')) o.primed?.();
          const events = text.split('\n\n').slice(0, -1);
          for (const e of events.slice(answered)) {
            answered++;
            const data = /^data: (.+)$/m.exec(e)?.[1];
            const msg = data ? (JSON.parse(data) as Json) : undefined;
            if (answer && msg && 'method' in msg && 'id' in msg) void this.post({ jsonrpc: '2.0', id: msg['id'], result: answer(msg) });
          }
        }
      } catch (e) {
        if (!signal?.aborted) throw e;
      }
      this.log[slot] = `${res.status} ${res.headers.get('content-type')} ${res.headers.get('content-length')}\n${text}`;
      return text;
    }

    async delete() {
      const res = await fetch(this.url, { method: 'DELETE', headers: { 'mcp-session-id': this.sid, 'mcp-protocol-version': '2025-11-25' } });
      this.log.push(`${res.status} ${await res.text()}`);
    }

    /** The transcript, with random ids numbered by first appearance. */
    transcript(): string {
      const ids = new Map<string, string>();
      return this.log.join('\n---\n').replace(/[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/g, (u) => {
        if (!ids.has(u)) ids.set(u, `<uuid${ids.size}>`);
        return ids.get(u)!;
      });
    }
  }

  const call = (id: unknown, params: unknown) => ({ jsonrpc: '2.0', id, method: 'tools/call', ...(params === undefined ? {} : { params }) });
  const tokens = (o: unknown) => Buffer.from(JSON.stringify(o)).toString('base64');

  /** Requests, each sent alone, to both kinds of session. */
  const SINGLE: Array<{ body: unknown; headers?: Record<string, string> }> = [
    { body: call(1, { name: 'echo', arguments: { a: 1, b: 'x' } }) },
    { body: call('s-1', { name: 'echo' }) },
    { body: call(0, { name: 'echo', arguments: {} }) },
    { body: call(Number.MAX_SAFE_INTEGER, { name: 'echo', arguments: { n: [1, { d: null }] } }) },
    { body: call(-5, { name: 'echo', arguments: { u: 'é☃' } }) },
    { body: call('x'.repeat(2000), { name: 'echo', arguments: { k: 1 } }) },
    { body: call(2, { name: 'echo', arguments: { a: 1 }, extra: 'dropped' }) },
    { body: call(3, { name: 'echo', _meta: { other: 1 } }) },
    { body: call(4, { name: 'nocontent' }) },
    { body: call(5, { name: 'badresult' }) },
    { body: call(6, { name: 'meta' }) },
    { body: call(7, { name: 'image' }) },
    { body: call(8, { name: 'missing' }) },
    { body: call(9, { name: 'badargs' }) },
    { body: call(10, { name: 'boom' }) },
    { body: call(11, { name: 'coded' }) },
    { body: call(12, { name: 'progress', _meta: { progressToken: 'p-1' } }) },
    { body: call(13, { name: 'progress', _meta: { progressToken: 77 } }) },
    { body: call(14, { name: 'progress' }) },
    { body: call(15, { name: 'echo' }), headers: { 'x-voxgate-tokens': tokens({ github: 'abc' }) } },
    { body: call(16, { name: 'echo' }), headers: { 'x-voxgate-tokens': 'not base64 json' } },
    { body: call(17, { name: 'echo' }), headers: { 'x-voxgate-tokens': tokens([1, 2]) } },
    // Hostile or unusual: each must go to the SDK and come back exactly as it did.
    { body: call(20, {}) },
    { body: call(21, undefined) },
    { body: call(22, { name: 5 }) },
    { body: call(23, { name: 'echo', arguments: [1] }) },
    { body: call(24, { name: 'echo', arguments: 'x' }) },
    { body: call(25, { name: 'echo', arguments: null }) },
    { body: call(26, { name: 'echo', task: { ttl: 10 } }) },
    { body: call(27, { name: 'progress', _meta: { progressToken: 1.5 } }) },
    { body: call(28, { name: 'echo', requestState: 'x' }) },
    { body: call(29, { name: 'echo', inputResponses: {} }) },
    { body: call(30, { name: 'echo', _meta: { 'io.modelcontextprotocol/protocolVersion': '2026-07-28' } }) },
    { body: call(31, { name: 'echo', _meta: { 'io.modelcontextprotocol/related-task': { taskId: 't' } } }) },
    { body: '{"jsonrpc":"2.0","id":32,"method":"tools/call","params":{"name":"echo","arguments":{"__proto__":{"x":1}}}}' },
    { body: call(33, { name: 'echo', arguments: { a: 1 } }), headers: { 'mcp-protocol-version': '1999-01-01' } },
    { body: [call(34, { name: 'echo' }), call(35, { name: 'missing' })] },
    { body: { jsonrpc: '2.0', id: 36, method: 'tools/list' } },
    { body: { jsonrpc: '2.0', id: 37, method: 'ping' } },
    { body: call(1.5, { name: 'echo' }) },
    { body: call(null, { name: 'echo' }) },
  ];

  async function run(url: string, mode: Mode, script: (d: Driver) => Promise<void>): Promise<Driver> {
    const d = new Driver(url, mode);
    await d.init({ sampling: {} });
    await script(d);
    return d;
  }

  it('answers every request alone with the same bytes, and the hub sees the same calls', async () => {
    const { url, sessions, hubs } = await start();
    const script = async (d: Driver) => {
      for (const { body, headers } of SINGLE) await d.post(body, headers);
    };
    const fast = await run(url, 'fast', script);
    const fastTaken = sessions.get(fast.sid)!.fastTaken;
    const sdk = await run(url, 'sdk', script);
    expect(fast.transcript()).toBe(sdk.transcript());
    expect(hubs.get('fast')!.seen).toEqual(hubs.get('sdk')!.seen);
    // The valid ones (0-17, less the refused versions) went the fast way; the hostile ones did not.
    expect(fastTaken).toBe(22);
    expect(fast.transcript()).toContain('Invalid tools/call result');
    expect(fast.transcript()).toContain('"code":-32602,"message":"no tool');
  });

  it('relays a hosted server’s sampling request during a call, the same way', async () => {
    const { url, sessions, hubs } = await start();
    const script = async (d: Driver) => {
      await d.post(
        call(1, { name: 'sample' }),
        {},
        { answer: (req) => ({ role: 'assistant', content: { type: 'text', text: `re ${String(req['method'])}` }, model: 'm' }) },
      );
      await d.post(
        call(2, { name: 'sample', _meta: { progressToken: 'p' } }),
        {},
        { answer: () => ({ role: 'assistant', content: { type: 'text', text: 'x' }, model: 'm' }) },
      );
    };
    const fast = await run(url, 'fast', script);
    expect(sessions.get(fast.sid)!.fastTaken).toBe(2);
    const sdk = await run(url, 'sdk', script);
    expect(fast.transcript()).toBe(sdk.transcript());
    expect(fast.transcript()).toContain('re sampling/createMessage');
    expect(hubs.get('fast')!.seen).toEqual(hubs.get('sdk')!.seen);
  });

  it('a call cancelled mid-way (notifications/cancelled) aborts the hub call and gets no answer; closing aborts the rest', async () => {
    const { url, hubs, sessions } = await start();
    let fastTaken = 0;
    const script = async (d: Driver, mode: Mode) => {
      const started = () => hubs.get(mode)!.started();
      // Calls that ended leave their abort handle for the next (fast-call.ts): cancelling one must still work.
      for (let i = 0; i < 3; i++) await d.post(call(`e${i}`, { name: 'echo', arguments: { i } }));
      // Cancelled by the client.
      let begun = started();
      const stop = new AbortController();
      let primed!: () => void;
      const priming = new Promise<void>((ok) => (primed = ok));
      const stream = d.post(call('w1', { name: 'wait' }), {}, { signal: stop.signal, primed });
      await begun;
      await d.post({ jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 'w1', reason: 'user gave up' } });
      while (!hubs.get(mode)!.aborted.has('user gave up')) await new Promise((ok) => setImmediate(ok));
      // The answer the hub gave after the abort is not sent: a ping on the session answers, the stream stays open.
      await d.post({ jsonrpc: '2.0', id: 'p', method: 'ping' });
      await priming;
      stop.abort();
      await stream;
      // Still running when the session ends: aborted by the close.
      begun = started();
      const primed2 = new Promise<void>((ok) => (primed = ok));
      const open = d.post(call('w2', { name: 'wait' }), {}, { primed });
      await Promise.all([begun, primed2]);
      if (mode === 'fast') fastTaken = sessions.get(d.sid)!.fastTaken;
      await d.delete();
      await open;
      while (hubs.get(mode)!.aborted.size < 2) await new Promise((ok) => setImmediate(ok));
    };
    const fast = new Driver(url, 'fast');
    await fast.init();
    await script(fast, 'fast');
    const sdk = new Driver(url, 'sdk');
    await sdk.init();
    await script(sdk, 'sdk');
    expect(fast.transcript()).toBe(sdk.transcript());
    expect(fastTaken).toBe(5);
    expect(fast.transcript()).not.toContain('late');
    expect([...hubs.get('fast')!.aborted]).toEqual(['user gave up', 'SdkError: Connection closed']);
    expect([...hubs.get('fast')!.aborted]).toEqual([...hubs.get('sdk')!.aborted]);
    expect(hubs.get('fast')!.seen).toEqual(hubs.get('sdk')!.seen);
  });

  it('hands an ended call’s abort signal to the next call only when nothing listens on it any more', async () => {
    const signals: AbortSignal[] = [];
    const server = buildFacadeServer(fakeHub([], signals).hub, {}, { log: pino({ level: 'silent' }), version: '0' });
    const sent: unknown[] = [];
    const transport = { send: async (m: unknown) => void sent.push(m), start: async () => undefined, close: async () => undefined };
    await server.connect(transport as unknown as NodeSessionTransport);
    (server.server as unknown as { _negotiatedProtocolVersion: string })._negotiatedProtocolVersion = '2025-11-25';
    const entry = fastToolsCall(server, toolsCallOf(server)!)!;
    const req = { headers: {} } as never;
    const next = async (id: number, name: string) => {
      expect(entry({ jsonrpc: '2.0', id, method: 'tools/call', params: { name } }, req)).toBe(true);
      while (sent.length < id) await new Promise((ok) => setImmediate(ok));
    };
    await next(1, 'echo');
    await next(2, 'echo');
    expect(signals[1]).toBe(signals[0]);
    await next(3, 'sticky');
    await next(4, 'echo');
    // The sticky call left a listener: its signal is not reused.
    expect(signals[3]).not.toBe(signals[2]);
    expect(signals.every((sig) => !sig.aborted)).toBe(true);
  });

  it('generated requests (ids, names, arguments, _meta, extra keys) get the same answers', async () => {
    const { url, sessions } = await start();
    const ids: unknown[] = [0, 1, -1, 2 ** 53 - 1, 2 ** 53, 1e300, 'a', '', '🙂', true, {}, []];
    const names: unknown[] = ['echo', 'echo', 'meta', 'missing', 'nocontent', 'badargs', 'badresult', 'progress', '', 5, null, 'x'.repeat(300)];
    const argss: unknown[] = [undefined, {}, { a: 1 }, { a: 1 }, [], 'x', null, { nested: { deep: [1, 2, { x: 'y' }] } }];
    const metas: unknown[] = [undefined, {}, { progressToken: 'p' }, { progressToken: 3 }, { progressToken: {} }, null, { a: 1 }];
    let seed = 7;
    const pick = <T>(a: T[]): T => a[(seed = (seed * 48271) % 2147483647) % a.length]!;
    const bodies: unknown[] = [];
    for (let i = 0; i < 200; i++) {
      const params: Json = {};
      const name = pick(names);
      if (name !== null || pick([true, false])) params['name'] = name;
      const args = pick(argss);
      if (args !== undefined) params['arguments'] = args;
      const meta = pick(metas);
      if (meta !== undefined) params['_meta'] = meta;
      if (pick([false, false, false, true])) params['extra'] = 1;
      bodies.push(call(pick(ids), pick([params, params, params, undefined, 'x'])));
    }
    const script = async (d: Driver) => {
      for (const b of bodies) await d.post(b);
    };
    const fast = await run(url, 'fast', script);
    expect(sessions.get(fast.sid)!.fastTaken).toBeGreaterThan(20);
    const sdk = await run(url, 'sdk', script);
    expect(fast.transcript()).toBe(sdk.transcript());
  });
});
