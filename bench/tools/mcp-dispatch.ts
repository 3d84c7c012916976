/**
 * The /mcp server side's dispatch of one `tools/call`, in one process: the SDK's `Protocol._onrequest` (what a
 * session ran before `facade/fast-call.ts`) against Voxgate's fast entry, on the same facade server, with a hub
 * that answers at once and a transport whose `send` keeps nothing. Blocks of calls taken in turn (SDK, fast, SDK,
 * …), CPU per call from `process.cpuUsage()`, so a busy machine's neighbours land on both alike (issue 21, helper
 * `mcpsrv`):
 *   nice -n 10 npx tsx bench/tools/mcp-dispatch.ts [calls per block=20000] [blocks per side=5]
 * Runs the compiled gateway's modules (`npm run build` first); MCPCPU_ROOT=<dir> takes <dir>'s build instead.
 */
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import pino from 'pino';
import type * as FastCall from '../../gateway/src/facade/fast-call.js';
import type * as McpServerModule from '../../gateway/src/facade/mcp-server.js';
import { ROOT } from '../lib/procs.js';

const [CALLS = 20_000, BLOCKS = 5] = process.argv
  .slice(2)
  .filter((a) => /^\d+$/.test(a))
  .map(Number);
const dist = join(process.env['MCPCPU_ROOT'] ?? ROOT, 'gateway/dist/facade');
const { buildFacadeServer, toolsCallOf } = (await import(pathToFileURL(join(dist, 'mcp-server.js')).href)) as typeof McpServerModule;
const { fastToolsCall } = (await import(pathToFileURL(join(dist, 'fast-call.js')).href)) as typeof FastCall;

type Json = Record<string, unknown>;
const result = { content: [{ type: 'text', text: 'Echo: hello from the bench' }], durationMs: 1 };
const hub = {
  instructions: () => ({ system: [] }),
  tools: () => [],
  serverVisible: () => true,
  onLog: () => () => undefined,
  onResourceUpdated: () => () => undefined,
  // As the hub's in-flight tracking does: a listener on the caller's signal for the call's length.
  call: async (_name: string, _args: Json, ctx: { signal?: AbortSignal }) => {
    const onAbort = () => undefined;
    ctx.signal?.addEventListener('abort', onAbort);
    await Promise.resolve();
    ctx.signal?.removeEventListener('abort', onAbort);
    return { ...result };
  },
  // What the facade calls since `mcpc1c` (McpHub.callTimed): the same work, the result without its duration.
  callTimed: async (_name: string, _args: Json, ctx: { signal?: AbortSignal }) => {
    const onAbort = () => undefined;
    ctx.signal?.addEventListener('abort', onAbort);
    await Promise.resolve();
    ctx.signal?.removeEventListener('abort', onAbort);
    return { result: { content: result.content }, durationMs: result.durationMs };
  },
};
let answered = 0;
let resolveBlock: (() => void) | undefined;
const transport = {
  sessionId: 's',
  send: (m: Json) => {
    if (!('result' in m)) throw new Error(`unexpected answer ${JSON.stringify(m)}`);
    if (++answered === CALLS) resolveBlock?.();
    return Promise.resolve();
  },
  start: () => Promise.resolve(),
  close: () => Promise.resolve(),
};
// The caller as /mcp's authentication gives it (an API key's tenant and principal): an empty caller would hide what
// building the hub call's context from it costs (`mcpc1c`: a key added after spreading a non-empty object).
const caller = { tenant: undefined, principal: 'key:0123456789abcdefghijkl' };
const server = buildFacadeServer(hub as never, caller, { log: pino({ level: 'silent' }), version: '0' });
await server.connect(transport as never);
(server.server as unknown as { _negotiatedProtocolVersion: string })._negotiatedProtocolVersion = '2025-11-25';
const sdkEntry = (server.server as unknown as { _onrequest: (m: Json, extra: Json) => void })._onrequest.bind(server.server);
const fastEntry = fastToolsCall(server, toolsCallOf(server)!)!;
const req = { headers: {} } as never;
const extra = { request: { headers: { get: () => null } } };

async function block(fast: boolean): Promise<{ us: number }> {
  answered = 0;
  const done = new Promise<void>((ok) => (resolveBlock = ok));
  const cpu0 = process.cpuUsage();
  // 50 in flight at a time, as the bench's c=50.
  let next = 0;
  const launch = () => {
    const m = { jsonrpc: '2.0', id: next++, method: 'tools/call', params: { name: 'echo', arguments: { message: 'hello from the bench' } } };
    if (fast) fastEntry(m as never, req);
    else sdkEntry(m, extra);
  };
  const pump = async () => {
    while (next < CALLS) {
      for (let i = 0; i < 50 && next < CALLS; i++) launch();
      await new Promise((ok) => setImmediate(ok));
    }
  };
  await pump();
  await done;
  const cpu = process.cpuUsage(cpu0);
  return { us: (cpu.user + cpu.system) / CALLS };
}

const rows: Record<'sdk' | 'fast', Array<{ us: number }>> = { sdk: [], fast: [] };
await block(false);
await block(true);
for (let b = 0; b < BLOCKS; b++) {
  rows.sdk.push(await block(false));
  rows.fast.push(await block(true));
}
const fmt = (xs: Array<{ us: number }>) => xs.map((x) => x.us.toFixed(1)).join(' ');
const min = (xs: Array<{ us: number }>) => Math.min(...xs.map((x) => x.us)).toFixed(1);
console.log(`tools/call dispatch, ${CALLS} calls per block, 50 in flight; CPU µs per call (every block; the least):`);
console.log(`  SDK _onrequest: ${fmt(rows.sdk)}; least ${min(rows.sdk)}`);
console.log(`  fast-call.ts:   ${fmt(rows.fast)}; least ${min(rows.fast)}`);
process.exit(0);
