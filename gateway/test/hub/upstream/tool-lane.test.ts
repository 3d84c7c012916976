import { fileURLToPath } from 'node:url';
import { Client, ProtocolError, SdkError, type Tool } from '@modelcontextprotocol/client';
import { afterEach, describe, expect, it } from 'vitest';
import { nodeServer, untilHub } from '../../../../test/support/hub.js';
import { identical } from '../../../../test/support/identical.js';
import type { McpHub } from '../../../src/hub/hub.js';
import { loadClientSdk } from '../../../src/hub/client-sdk.js';
import { ChildStdioTransport } from '../../../src/hub/stdio-transport.js';
import { speedUpToolsCall, wireCodecOf } from '../../../src/hub/tools-call-check.js';
import { callOnLane, openLane, OutputChecks } from '../../../src/hub/upstream/call-tool.js';
import { messageBound } from '../../../src/hub/upstream/result-cap.js';
import { LANE_FIRST_ID, type ToolCallLane } from '../../../src/hub/upstream/tool-lane.js';
import { SchemaValidators } from '../../../src/schemas/validators.js';
import { buildHub } from '../support.js';

/**
 * The gateway's own tools/call lane against the SDK Client's `callTool`, on one connection to a real stdio child
 * (a hand-written server, so that it can also misbehave): the same results (own keys, order, prototypes), the same
 * errors (class, code, message, data), the same reports, the same notifications/cancelled.
 */
const SERVER = fileURLToPath(new URL('../fixtures/lane-server.mjs', import.meta.url));
const MAX_RESULT = 20_000;
const TEST_MS = 60_000;

interface Conn {
  client: Client;
  transport: ChildStdioTransport;
  lane: ToolCallLane;
  tools: Tool[];
  checks: OutputChecks;
  /** What the SDK Client and the lane reported through onerror, in order. */
  errors: string[];
}

const open: Conn[] = [];
const hubs: McpHub[] = [];
afterEach(async () => {
  await Promise.all(open.splice(0).map((c) => c.client.close().catch(() => undefined)));
  await Promise.all(hubs.splice(0).map((h) => h.close()));
}, TEST_MS);

async function connect(): Promise<Conn> {
  await loadClientSdk();
  const transport = new ChildStdioTransport({
    command: process.execPath,
    args: [SERVER],
    env: {},
    killGraceMs: 2000,
    maxMessageBytes: messageBound(MAX_RESULT),
    maxResultBytes: MAX_RESULT,
  });
  const validators = new SchemaValidators({ limits: { maxBytes: 64 * 1024, maxDepth: 32 }, maxCached: 64 });
  const client = new Client({ name: 'lane-test', version: '0.0.0' }, { capabilities: {}, jsonSchemaValidator: validators });
  speedUpToolsCall(wireCodecOf(client));
  const errors: string[] = [];
  client.onerror = (e) => errors.push(e.message);
  await client.connect(transport);
  const { tools } = await client.listTools();
  const lane = openLane(client, transport, (e) => errors.push(e.message));
  if (!lane) throw new Error('no lane on a stdio connection of the 2025 era');
  const conn = { client, transport, lane, tools, checks: new OutputChecks(validators), errors };
  open.push(conn);
  return conn;
}

type Outcome = { ok: true; value: unknown } | { ok: false; error: Record<string, unknown> };
const outcome = (p: Promise<unknown>): Promise<Outcome> =>
  p.then(
    (value) => ({ ok: true as const, value }),
    (e: unknown) => {
      const err = e as Error & { code?: unknown; data?: unknown };
      const kind = e instanceof ProtocolError ? 'ProtocolError' : e instanceof SdkError ? 'SdkError' : err?.constructor?.name;
      return { ok: false as const, error: { kind, name: err.name, code: err.code, message: err.message, data: err.data } };
    },
  );

interface CallOptions {
  timeoutMs?: number;
  signal?: AbortSignal;
  onprogress?: (p: unknown) => void;
}

function viaSdk(c: Conn, name: string, args: Record<string, unknown>, o: CallOptions = {}): Promise<Outcome> {
  const options = { timeout: o.timeoutMs ?? 30_000, ...(o.signal ? { signal: o.signal } : {}), ...(o.onprogress ? { onprogress: o.onprogress } : {}) };
  return outcome(c.client.callTool({ name, arguments: args }, options));
}
function viaLane(c: Conn, name: string, args: Record<string, unknown>, o: CallOptions = {}): Promise<Outcome> {
  return outcome(callOnLane(c.lane, c.checks, c.tools, { name, args, timeoutMs: o.timeoutMs ?? 30_000, signal: o.signal, onprogress: o.onprogress }));
}

/** A round trip: every line the server wrote before its answer has been read (and reported) by then. */
async function barrier(c: Conn): Promise<{ id: number; meta: Record<string, unknown> | null }> {
  const r = (await c.client.callTool({ name: 'whoami', arguments: {} })) as { content: Array<{ text: string }> };
  return JSON.parse(r.content[0]!.text) as { id: number; meta: Record<string, unknown> | null };
}

/** The reports one call caused, without the ids in them (the lane's and the SDK's differ). */
async function reportsOf(c: Conn, run: () => Promise<Outcome>): Promise<{ result: Outcome; reports: string[] }> {
  const before = c.errors.length;
  const result = await run();
  await barrier(c);
  return { result, reports: c.errors.slice(before).map((m) => m.replace(/\d{3,}/g, '<id>').replace(/"id":("[^"]*"|\d+)/g, '"id":<id>')) };
}

async function cancellations(c: Conn): Promise<unknown> {
  const r = (await c.client.callTool({ name: 'cancellations', arguments: {} })) as { content: Array<{ text: string }> };
  return JSON.parse(r.content[0]!.text);
}

function expectSame(what: string, lane: unknown, sdk: unknown): void {
  if (!identical(lane, sdk)) expect({ what, lane }).toStrictEqual({ what, lane: sdk });
}

describe('the tools/call lane and the SDK Client, one stdio child', { timeout: TEST_MS }, () => {
  it('give the same results and errors for answers of every kind, hostile ones included', async () => {
    const c = await connect();
    const cases: Array<[string, Record<string, unknown>]> = [
      ['echo', { message: 'hello' }],
      ['rich', {}],
      ['rpc_error', {}],
      ['invalid', {}],
      ['is_error', {}],
      ['result_type', {}],
      ['structured_ok', {}],
      ['structured_bad', {}],
      ['structured_missing', {}],
      ['structured_error', {}],
      ['bad_schema', {}],
      ['no_such_tool', {}],
      ['unknown_id', {}],
      ['duplicate', {}],
      ['progress_unknown', {}],
      ['huge', { bytes: MAX_RESULT * 10 }],
      ['huge', { bytes: MAX_RESULT + 1000 }],
    ];
    // The size of a skipped answer counts its line, whose id is the lane's (longer than the SDK's here).
    const sized = (o: { result: Outcome; reports: string[] }) =>
      o.result.ok
        ? o
        : { ...o, result: { ...o.result, error: { ...o.result.error, message: String(o.result.error['message']).replace(/was \d+ bytes/, 'was <n> bytes') } } };
    for (const [name, args] of cases) {
      const sdk = await reportsOf(c, () => viaSdk(c, name, args));
      const lane = await reportsOf(c, () => viaLane(c, name, args));
      expectSame(`${name} ${JSON.stringify(args)}`, sized(lane), sized(sdk));
    }
    // The cases did reach the two paths they were meant for.
    const unknown = await reportsOf(c, () => viaLane(c, 'unknown_id', {}));
    expect(unknown.reports.filter((r) => r.includes('unknown message ID'))).toHaveLength(3);
    expect(unknown.result).toMatchObject({ ok: true, value: { content: [{ text: 'the real answer' }] } });
    expect(await viaLane(c, 'huge', { bytes: MAX_RESULT * 10 })).toMatchObject({ ok: false, error: { kind: 'ProtocolError', code: -32099 } });
    expect(await viaLane(c, 'structured_bad', {})).toMatchObject({ ok: false, error: { code: -32602 } });
    expect(c.lane.size).toBe(0);
  });

  it('send the same request (the id aside) and pass on the same progress, malformed notifications dropped', async () => {
    const c = await connect();
    const ids: Record<string, { sameToken: boolean; meta: unknown }> = {};
    for (const [path, run] of [
      ['sdk', viaSdk],
      ['lane', viaLane],
    ] as const) {
      const r = (await run(c, 'whoami', {}, { onprogress: () => undefined })) as { ok: true; value: { content: Array<{ text: string }> } };
      const seen = JSON.parse(r.value.content[0]!.text) as { id: number; meta: { progressToken: number } };
      ids[path] = { sameToken: seen.meta.progressToken === seen.id, meta: Object.keys(seen.meta) };
      if (path === 'lane') expect(seen.id).toBeGreaterThanOrEqual(LANE_FIRST_ID);
      else expect(seen.id).toBeLessThan(LANE_FIRST_ID);
    }
    expectSame('progress token', ids['lane'], ids['sdk']);
    const runs: Record<string, { progress: unknown[]; result: unknown }> = {};
    for (const [path, run] of [
      ['sdk', viaSdk],
      ['lane', viaLane],
    ] as const) {
      const progress: unknown[] = [];
      const got = await reportsOf(c, () => run(c, 'progress', {}, { onprogress: (p) => progress.push(p) }));
      runs[path] = { progress, result: got };
    }
    expectSame('progress', runs['lane'], runs['sdk']);
    expect(runs['lane']!.progress.length).toBeGreaterThan(0);
  });

  it('time out, and are cancelled by their caller, alike: the same error and the same notifications/cancelled', async () => {
    const c = await connect();
    // Never answered: the timeout; answered with result and error at once (not a message): the timeout too.
    for (const name of ['silent', 'both']) {
      const sdk = await reportsOf(c, () => viaSdk(c, name, {}, { timeoutMs: 150 }));
      const lane = await reportsOf(c, () => viaLane(c, name, {}, { timeoutMs: 150 }));
      expectSame(name, lane, sdk);
      expect(lane.result).toMatchObject({ ok: false, error: { kind: 'SdkError', code: 'REQUEST_TIMEOUT', data: { timeout: 150 } } });
    }
    const timedOut = (await cancellations(c)) as unknown[];
    expect(timedOut).toHaveLength(4);
    expectSame('cancelled on timeout', [timedOut[1], timedOut[3]], [timedOut[0], timedOut[2]]);

    // Aborted by the caller while the server holds the call, with a text and with an error as the reason.
    for (const reason of ['the caller went away', new Error('shutting down')]) {
      const results: Outcome[] = [];
      for (const run of [viaSdk, viaLane]) {
        const abort = new AbortController();
        const pending = run(c, 'silent', {}, { signal: abort.signal });
        await barrier(c);
        abort.abort(reason);
        results.push(await pending);
      }
      expectSame(`aborted: ${String(reason)}`, results[1], results[0]);
    }
    const aborted = (await cancellations(c)) as Array<{ known: boolean }>;
    expect(aborted.map((a) => a.known)).toEqual([true, true, true, true]);
    expectSame('cancelled on abort', [aborted[1], aborted[3]], [aborted[0], aborted[2]]);

    // Aborted before it started: refused alike, nothing sent.
    const abort = new AbortController();
    abort.abort('too late');
    expectSame('aborted before', await viaLane(c, 'silent', {}, { signal: abort.signal }), await viaSdk(c, 'silent', {}, { signal: abort.signal }));
    expect(await cancellations(c)).toEqual([]);
    expect(c.lane.size).toBe(0);
  });

  it('fail every waiting call alike when the server dies mid-call, and refuse calls after', async () => {
    const c = await connect();
    const sdk = viaSdk(c, 'silent', {});
    const lane = viaLane(c, 'silent', {});
    await barrier(c);
    const dying = viaLane(c, 'die', {});
    const [s, l, d] = await Promise.all([sdk, lane, dying]);
    expectSame('pending at close', l, s);
    expectSame('the call that killed it', d, s);
    expect(l).toMatchObject({ ok: false, error: { kind: 'SdkError', code: 'CONNECTION_CLOSED' } });
    expect(c.lane.size).toBe(0);
    expectSame('after close', await viaLane(c, 'echo', {}), await viaSdk(c, 'echo', {}));
  });
});

describe('a hosted stdio server in the hub', { timeout: TEST_MS }, () => {
  it('is called through the lane, and its failures read as they did through the SDK', async () => {
    const { hub } = buildHub({ lane: nodeServer(SERVER) }, { maxResultBytes: MAX_RESULT });
    hubs.push(hub);
    await hub.start();
    await untilHub(hub, () => hub.tools({}).some((t) => t.name === 'mcp__lane__whoami'), 'the lane tools');
    const text = (r: { content: unknown[] }) => (r.content[0] as { text: string }).text;
    const seen = JSON.parse(text(await hub.call('mcp__lane__whoami', {}, {}))) as { id: number };
    expect(seen.id).toBeGreaterThanOrEqual(LANE_FIRST_ID);

    const rejected = await hub.call('mcp__lane__rpc_error', {}, {});
    expect(rejected).toMatchObject({ isError: true, _meta: { 'voxgate/code': 'UPSTREAM_ERROR' } });
    expect(text(rejected)).toBe('The tool server "lane" rejected the call: bad arguments');
    const late = await hub.call('mcp__lane__silent', {}, { timeoutMs: 100 });
    expect(late).toMatchObject({ isError: true, _meta: { 'voxgate/code': 'UPSTREAM_TIMEOUT' } });
    const large = await hub.call('mcp__lane__huge', { bytes: MAX_RESULT + 1000 }, {});
    expect(text(large)).toMatch(/result too large to pass on: its content was \d+ bytes, over the limit of 20000 bytes/);
    const schema = await hub.call('mcp__lane__structured_bad', {}, {});
    expect(text(schema)).toMatch(/^The tool server "lane" rejected the call: Structured content does not match the tool's output schema/);
    // The timeout above, the caller's abort and shutdown reach the server as notifications/cancelled for the call they stop.
    const caller = new AbortController();
    const abandoned = hub.call('mcp__lane__silent', {}, { signal: caller.signal });
    await hub.call('mcp__lane__whoami', {}, {});
    caller.abort('the caller went away');
    expect(await abandoned).toMatchObject({ isError: true, _meta: { 'voxgate/code': 'UPSTREAM_TIMEOUT' } });
    const cancelled = await hub.call('mcp__lane__cancellations', {}, {});
    expect(JSON.parse(text(cancelled))).toEqual([
      { known: true, reason: 'SdkError: Request timed out' },
      { known: true, reason: 'the caller went away' },
    ]);

    const dead = await hub.call('mcp__lane__die', {}, {});
    expect(dead).toMatchObject({ isError: true, _meta: { 'voxgate/code': 'UPSTREAM_UNAVAILABLE' } });
    expect(text(dead)).toBe('The tool server "lane" stopped while handling the request. Try again in a moment.');

    await untilHub(hub, () => hub.servers({})[0]!.state === 'ready', 'the lane server restarted');
    const draining = hub.call('mcp__lane__silent', {}, {});
    await hub.call('mcp__lane__whoami', {}, {});
    await hub.drain();
    expect(await draining).toMatchObject({ isError: true, _meta: { 'voxgate/code': 'SHUTTING_DOWN' } });
  });
});
