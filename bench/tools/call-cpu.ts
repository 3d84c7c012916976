/**
 * Process CPU per call of the gateway's whole call path in one process, against the floor relay's route, with
 * no sockets: `POST /v1/devices/{id}/tools/{name}/call` through fastify's inject, the device an in-memory link
 * that answers each request in a later macrotask (as a socket would) in the firmware's layout.
 *   npx tsx --conditions voxgate-source bench/tools/call-cpu.ts [devices=100] [concurrency=64] [calls=20000] [gateway|floor] [rounds=3]
 * With one device the floor runs one call at a time (its serial route), as the gateway and the bench's one-device rows do.
 * The sockets (HTTP parsing, ws framing, writev) are what both pay and what this leaves out, so the figure is
 * the JavaScript the gateway adds on top of the floor's route, and it holds on a busy machine (CPU time, not
 * wall clock). Each side runs `rounds` times, alternating; the lowest and the median of each are printed.
 * CALLCPU_BASE=<dir>: a second gateway from the sources under <dir>/gateway/src (e.g. `git archive` of the commit
 * before a change, its node_modules a link to this one's) runs in the same process, alternating with this one:
 * a before/after comparison that the machine's load moves alike on both sides.
 * CALLCPU_COUNT=1: also the async resources each side creates per call (promises, timers, immediates; async_hooks
 * `init` counts, exact whatever the load), from one extra run per side with the hook enabled.
 * CALLCPU_ALLOC=1: also the bytes each side allocates per call (V8's sampling heap profiler, two runs per side), and how
 * many of them in functions of its own sources (the gateway's `gateway/src`, or the base's tree): load does not move them.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createHook } from 'node:async_hooks';
import { Session } from 'node:inspector';
import { Writable } from 'node:stream';
import Fastify, { type FastifyInstance, type FastifyReply, type FastifyRequest } from 'fastify';
import { pathToFileURL } from 'node:url';
import * as thisGateway from '../../gateway/src/index.js';
import type { DeviceLink } from '../../gateway/src/devices/link.js';
import { createLogger } from '../../gateway/src/log.js';
import { nextCall, serially } from '../floors/serial.js';
import { ROOT } from '../lib/procs.js';

type GatewayModule = typeof thisGateway;
type Gateway = thisGateway.Gateway;

const [devices = 100, concurrency = 64, calls = 20_000] = process.argv.slice(2, 5).map(Number);
/** `gateway` or `floor`: that side alone (to profile it with --cpu-prof). */
const only = process.argv[5];
const rounds = Number(process.argv[6] ?? 3);
const baseDir = process.env['CALLCPU_BASE'];
const KEY = 'bench-api-key-0123456789abcdef';
const TOOL = 'self.audio_speaker.set_volume';
const BODY = JSON.stringify({ arguments: { volume: 42 } });

const INIT = { protocolVersion: '2024-11-05', capabilities: { tools: {} }, serverInfo: { name: 'bench', version: '1.0.0' } };
const TOOLS = {
  tools: [
    {
      name: TOOL,
      description: 'Set the volume of the audio speaker.',
      inputSchema: { type: 'object', properties: { volume: { type: 'integer', minimum: 0, maximum: 100 } }, required: ['volume'] },
    },
  ],
};
const idOf = (text: string) => Number(/"id":(\d+)/.exec(text)?.[1]);
const reply = (id: number, result: string) => `{"session_id":"","type":"mcp","payload":{"jsonrpc":"2.0","id":${id},"result":${result}}}`;
const CALL_RESULT = '{"content":[{"type":"text","text":"true"}],"isError":false}';

/** A device end that answers initialize, tools/list and tools/call in a later macrotask. */
function answer(text: string, deliver: (t: string) => void): void {
  const id = idOf(text);
  if (!Number.isFinite(id)) return;
  const result = text.includes('"tools/call"') ? CALL_RESULT : text.includes('"initialize"') ? JSON.stringify(INIT) : JSON.stringify(TOOLS);
  setImmediate(() => deliver(reply(id, result)));
}

async function startGw({ loadConfig, startGateway }: GatewayModule): Promise<{ gw: Gateway; dataDir: string }> {
  const dataDir = mkdtempSync(join(tmpdir(), 'voxgate-callcpu-'));
  writeFileSync(join(dataDir, 'gateway.config.json'), '{}');
  const config = loadConfig(
    { GATEWAY_CONFIG: join(dataDir, 'gateway.config.json'), GATEWAY_CALL_QUEUE_LIMIT: '128' },
    { dataDir, apiKeys: [KEY], http: { host: '127.0.0.1', port: 0 }, mqtt: { host: '127.0.0.1', port: 0 }, tls: { mqttPort: 0 } },
  );
  const sink = new Writable({ write: (_c, _e, cb) => cb() });
  const gw = await startGateway(config, { log: createLogger('warn', sink) });
  for (let i = 0; i < devices; i++) {
    const deviceId = `02:00:00:00:${((i >> 8) & 0xff).toString(16).padStart(2, '0')}:${(i & 0xff).toString(16).padStart(2, '0')}`;
    let onText: (t: string) => void = () => {};
    const link: DeviceLink = {
      transport: 'websocket',
      remoteAddress: '127.0.0.1',
      send: (text) => (answer(text, (t) => onText(t)), true),
      close: () => {},
    };
    const session = gw.registry.connect({ deviceId, clientId: deviceId, link, expectHello: false, credential: '' })!;
    onText = (t) => session.onText(t);
    session.start();
    await session.awaitReady(10_000);
  }
  return { gw, dataDir };
}

/**
 * The floor relay's route (bench/floors/ws-relay.ts) with the same in-memory devices; with one device, its serial route
 * (one call at a time per device, bench/floors/serial.ts), as the bench's one-device rows compare with.
 */
function startFloor(): FastifyInstance {
  const serial = devices === 1;
  const pending = new Map<number, (payload: unknown) => void>();
  let nextId = 1;
  const deliver = (t: string) => {
    const frame = JSON.parse(t) as { payload?: { id?: number; result?: unknown } };
    const id = frame.payload?.id;
    const done = id === undefined ? undefined : pending.get(id);
    if (done) {
      pending.delete(id!);
      done(frame.payload!.result);
    }
  };
  type CallRequest = { Params: { deviceId: string; toolName: string }; Body: { arguments?: Record<string, unknown> } };
  const app = Fastify({ logger: false });
  app.post<CallRequest>('/v1/devices/:deviceId/tools/:toolName/call', (req: FastifyRequest<CallRequest>, res: FastifyReply) => {
    const { deviceId, toolName } = req.params;
    const send = () => {
      const id = nextId++;
      pending.set(id, (result) => {
        if (serial) nextCall(deviceId);
        void res.send(result);
      });
      answer(
        `{"session_id":"floor","type":"mcp","payload":${JSON.stringify({ jsonrpc: '2.0', id, method: 'tools/call', params: { name: toolName, arguments: req.body?.arguments ?? {} } })}}`,
        deliver,
      );
    };
    if (serial) serially(deviceId, send);
    else send();
    return res;
  });
  return app;
}

/**
 * Bytes allocated while `work` runs (V8's sampling heap profiler, every 512 B, what any collection freed kept in), and
 * of them what was allocated in functions of files under `ownPrefix` (a side's own sources, by path).
 */
async function allocated(work: () => Promise<unknown>, ownPrefix: string): Promise<{ total: number; own: number }> {
  const session = new Session();
  session.connect();
  const post = <T>(m: string, p: object = {}) => new Promise<T>((ok, no) => session.post(m, p, (e, r) => (e ? no(e) : ok(r as T))));
  await post('HeapProfiler.enable');
  await post('HeapProfiler.startSampling', { samplingInterval: 512, includeObjectsCollectedByMajorGC: true, includeObjectsCollectedByMinorGC: true });
  await work();
  type Node = { callFrame: { url: string }; selfSize: number; children: Node[] };
  const { profile } = await post<{ profile: { head: Node } }>('HeapProfiler.stopSampling');
  session.disconnect();
  let total = 0;
  let own = 0;
  const walk = (n: Node): void => {
    total += n.selfSize;
    if (n.callFrame.url.includes(ownPrefix)) own += n.selfSize;
    n.children.forEach(walk);
  };
  walk(profile.head);
  return { total, own };
}

/** CPU µs per call of `total` calls, `c` at a time, spread over the devices. */
async function run(app: FastifyInstance, total: number, c: number, headers: Record<string, string>): Promise<number> {
  let next = 0;
  let failed = 0;
  const one = async (): Promise<void> => {
    while (next < total) {
      const i = next++;
      const dev = i % devices;
      const id = `02:00:00:00:${((dev >> 8) & 0xff).toString(16).padStart(2, '0')}:${(dev & 0xff).toString(16).padStart(2, '0')}`;
      const res = await app.inject({ method: 'POST', url: `/v1/devices/${encodeURIComponent(id)}/tools/${TOOL}/call`, headers, payload: BODY });
      if (res.statusCode !== 200) failed++;
    }
  };
  const c0 = process.cpuUsage();
  await Promise.all(Array.from({ length: c }, one));
  const u = process.cpuUsage(c0);
  if (failed > 0) throw new Error(`${failed} calls failed`);
  return (u.user + u.system) / total;
}

const mine = await startGw(thisGateway);
const base = baseDir ? await startGw((await import(pathToFileURL(`${baseDir}/gateway/src/index.ts`).href)) as GatewayModule) : undefined;
const floor = startFloor();
await floor.ready();
const gwHeaders = { authorization: `Bearer ${KEY}`, 'content-type': 'application/json' };
const flHeaders = { 'content-type': 'application/json' };
const sides: Array<{ name: string; app: FastifyInstance; headers: Record<string, string>; runs: number[] }> = [];
if (only !== 'floor') sides.push({ name: 'gateway', app: mine.gw.http, headers: gwHeaders, runs: [] });
if (base && only !== 'floor') sides.push({ name: 'base', app: base.gw.http, headers: gwHeaders, runs: [] });
if (only !== 'gateway') sides.push({ name: 'floor', app: floor, headers: flHeaders, runs: [] });
for (const s of sides) await run(s.app, Math.min(calls, 5000), concurrency, s.headers); // warm up (JIT)
for (let k = 0; k < rounds; k++) for (const s of sides) s.runs.push(await run(s.app, calls, concurrency, s.headers));
if (process.env['CALLCPU_COUNT'])
  for (const s of sides) {
    const counts = new Map<string, number>();
    const hook = createHook({ init: (_id, type) => void counts.set(type, (counts.get(type) ?? 0) + 1) }).enable();
    const n = Math.min(calls, 4000);
    await run(s.app, n, concurrency, s.headers);
    hook.disable();
    const per = [...counts].map(([type, k]) => `${type} ${(k / n).toFixed(2)}`).join(', ');
    process.stdout.write(`  ${s.name.padEnd(8)} async resources per call: ${per}\n`);
  }
if (process.env['CALLCPU_ALLOC'])
  for (let k = 0; k < 2; k++)
    for (const s of sides) {
      const n = Math.min(calls, 4000);
      const { total, own } = await allocated(
        () => run(s.app, n, concurrency, s.headers),
        s.name === 'base' ? `${baseDir}/gateway/src/` : `${ROOT}gateway/src/`,
      );
      process.stdout.write(`  ${s.name.padEnd(8)} allocated per call: ${(total / n).toFixed(0)} B, of which in its own sources ${(own / n).toFixed(0)} B\n`);
    }
const low = (xs: number[]) => Math.min(...xs);
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
process.stdout.write(`devices ${devices} concurrency ${concurrency}, ${calls} calls x ${rounds} rounds per side (µs of CPU per call)\n`);
for (const s of sides)
  process.stdout.write(
    `  ${s.name.padEnd(8)} lowest ${low(s.runs).toFixed(1)}  median ${median(s.runs).toFixed(1)}  (${s.runs.map((x) => x.toFixed(1)).join(', ')})\n`,
  );
const fl = sides.find((s) => s.name === 'floor');
if (fl)
  for (const s of sides.filter((x) => x !== fl))
    process.stdout.write(
      `  ${s.name} added over the floor: lowest ${(low(s.runs) - low(fl.runs)).toFixed(1)}, median ${(median(s.runs) - median(fl.runs)).toFixed(1)}\n`,
    );
await mine.gw.close();
if (base) await base.gw.close();
await floor.close();
rmSync(mine.dataDir, { recursive: true, force: true });
if (base) rmSync(base.dataDir, { recursive: true, force: true });
