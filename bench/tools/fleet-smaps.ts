/**
 * Where a ready device's resident memory goes beyond the heap's live objects, the gateway against the bare
 * socket floor, for issue 21's "RSS per ready device ≤ 1 KB above a bare socket's":
 *   nice -n 10 npx tsx bench/tools/fleet-smaps.ts [devices=5000] [--tsx] [--mqtt] [--floor-arg=<node option>]...
 * Starts the compiled gateway (build it first: npx tsc -b tsconfig.build.json; --tsx: from sources) and the
 * floor (bench/floors/bare-ws.ts, bare sockets: what the quick bench's RSS floor is), connects `devices`
 * to each as the bench does (ready devices to the gateway, bare connections to the floor), and prints per
 * device, after GC, the change of: process.memoryUsage(), the gateway's V8 heap spaces (committed and
 * used), and /proc/<pid>/smaps grouped by mapping (anonymous, [heap], files), with the mappings that grew most.
 * The gateway runs with the node options it ships with (VOXGATE_GATEWAY_NODE_ARGS replaces them: bench/lib/compiled.ts);
 * `--floor-arg=` gives the floor one (what the floor would do with the same setting).
 * `--faults` (Linux, perf): records every page fault of the gateway from the warm-up to the probe after the fleet
 * (`perf record -c 1 -e page-faults -d`) and prints who touched which memory first: faults (4 KiB pages) per device
 * by thread and mapping kind, and for each glibc thread arena that grew, its threads. With each thread's CPU while
 * the fleet connected (V8's platform workers are unnamed "node" threads: they are told apart by their CPU and order).
 */
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Fleet } from '../scenarios/env.js';
import { metric, until } from '../scenarios/measure.js';
import { fleetCaps, gatewayEnv } from '../lib/gateway-env.js';
import { forkCompiledWithProbe } from '../lib/compiled.js';
import { type Proc, spawnTs, stopAll, type Reply } from '../lib/procs.js';
import { API_KEY } from '../scenarios/bench.js';
import { type Mapping, type MappingKind, mappingsOf } from '../lib/smaps.js';

const args = process.argv.slice(2).filter((a) => !a.startsWith('--'));
const floorArgs = process.argv.filter((a) => a.startsWith('--floor-arg=')).map((a) => a.slice('--floor-arg='.length));
const tsx = process.argv.includes('--tsx');
const faults = process.argv.includes('--faults');
/** `--mqtt`: the gateway's devices connect over MQTT (the floor stays bare WebSocket connections). */
const mqtt = process.argv.includes('--mqtt');
const N = Number(args[0] ?? 5000);

/** The gateway's probe: memory after GC, with V8's heap spaces. */
const PROBE = `import { getHeapSpaceStatistics } from 'node:v8';
process.on('message', (m) => {
  if (m.cmd !== 'mem') return;
  const t0 = performance.now();
  globalThis.gc();
  const fullGcMs = performance.now() - t0;
  globalThis.gc();
  const spaces = Object.fromEntries(getHeapSpaceStatistics().map((s) => [s.space_name, { size: s.space_size, used: s.space_used_size }]));
  process.send({ id: m.id, ok: true, mem: process.memoryUsage(), spaces, fullGcMs });
});
process.on('disconnect', () => process.kill(process.pid, 'SIGTERM'));`;

/** Every mapping of the process (bench/lib/smaps.ts: kinds, with SQLite's WebAssembly memory told from the arenas). */
function smaps(pid: number): Mapping[] {
  const maps = mappingsOf(pid);
  if (!maps) throw new Error(`no /proc/${pid}/smaps`);
  return maps;
}

const KIND_NAMES: Record<MappingKind, string> = {
  v8Pages: 'V8 pages (256 KiB)',
  threadArenas: 'thread arenas (glibc)',
  wasmMemory: 'WebAssembly memory (SQLite)',
  mainMalloc: '[heap] (main malloc)',
  nodeBinary: 'node binary',
  other: 'other',
};

/** A mapping's kind as printed: bench/lib/smaps.ts's, with files and the other pseudo-files apart. */
function kind(m: Mapping): string {
  if (m.kind !== 'other') return KIND_NAMES[m.kind];
  if (m.name === '') return m.end - m.start > 2 ** 30 ? 'anon > 1 GiB (reserved)' : 'anon other (large objects, code, mmapped chunks)';
  return m.name.startsWith('/') ? 'files' : m.name;
}

const range = (m: Mapping) => `${m.start.toString(16)}-${m.end.toString(16)}`;

function diff(before: Mapping[], after: Mapping[], n: number, label: string): void {
  const sum = (ms: Mapping[]) => {
    const t = new Map<string, number>();
    for (const m of ms) t.set(kind(m), (t.get(kind(m)) ?? 0) + m.rss);
    return t;
  };
  const [b, a] = [sum(before), sum(after)];
  const keys = [...new Set([...b.keys(), ...a.keys()])];
  process.stdout.write(`${label} smaps Rss per device by mapping kind:\n`);
  for (const k of keys) {
    const d = (a.get(k) ?? 0) - (b.get(k) ?? 0);
    if (Math.abs(d / n) >= 8) process.stdout.write(`  ${(d / n).toFixed(0).padStart(6)} B  ${k}\n`);
  }
  // Mappings keyed by their start: an arena or the [heap] that grew keeps its start.
  const old = new Map(before.map((m) => [m.start, m.rss]));
  const grown = after
    .map((m) => ({ m, d: m.rss - (old.get(m.start) ?? 0) }))
    .sort((x, y) => y.d - x.d)
    .slice(0, 8);
  for (const { m, d } of grown) process.stdout.write(`    +${d / 1024} kB  ${range(m)} (${(m.end - m.start) / 1024} kB) ${m.name || kind(m)}\n`);
}

/** CPU (µs of user + system time) of each thread of a process, by thread id. */
function threadCpu(pid: number): Map<number, number> {
  const out = new Map<number, number>();
  for (const tid of readdirSync(`/proc/${pid}/task`)) {
    try {
      const f = readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8').split(') ')[1]!.split(' ');
      out.set(Number(tid), ((Number(f[11]) + Number(f[12])) * 1e6) / 100);
    } catch {
      /* the thread ended */
    }
  }
  return out;
}

/**
 * Page faults recorded by perf (`tid addr ip sym` lines): per device, by thread and the kind of mapping the page is in
 * now, the code that touched them, and each thread arena's net growth (smaps, after GC) with the threads that faulted in it.
 */
function faultReport(script: string, maps: Mapping[], before: Mapping[], pid: number, cpu0: Map<number, number>, cpu1: Map<number, number>, n: number): void {
  const find = (x: number) => {
    let lo = 0;
    let hi = maps.length - 1;
    while (lo <= hi) {
      const mid = (lo + hi) >> 1;
      const r = maps[mid]!;
      if (x < r.start) hi = mid - 1;
      else if (x >= r.end) lo = mid + 1;
      else return r;
    }
    return undefined;
  };
  const name = (tid: number) => (tid === pid ? 'main' : `+${tid - pid}`);
  const byThread = new Map<number, Map<string, number>>();
  const byMapping = new Map<number, Map<number, number>>();
  const syms = new Map<string, number>();
  for (const line of script.split('\n')) {
    const f = line.trim().split(/\s+/);
    if (f.length < 2) continue;
    const tid = Number(f[0]);
    const m = find(parseInt(f[1]!, 16));
    const k = m ? kind(m) : '(unmapped since)';
    const t = byThread.get(tid) ?? new Map<string, number>();
    t.set(k, (t.get(k) ?? 0) + 1);
    byThread.set(tid, t);
    const sk = `${name(tid)}, ${k}: ${f.slice(3).join(' ') || '?'}`;
    syms.set(sk, (syms.get(sk) ?? 0) + 1);
    if (m) {
      const w = byMapping.get(m.start) ?? new Map<number, number>();
      w.set(tid, (w.get(tid) ?? 0) + 1);
      byMapping.set(m.start, w);
    }
  }
  const per = (pages: number) => ((pages * 4096) / n).toFixed(0).padStart(6);
  process.stdout.write('gateway page faults per device (B of 4 KiB pages first touched), by thread; thread CPU per device while the fleet connected:\n');
  const tids = [...new Set([...byThread.keys(), ...cpu1.keys()])].sort((x, y) => x - y);
  for (const tid of tids) {
    const t = byThread.get(tid) ?? new Map<string, number>();
    const cpu = ((cpu1.get(tid) ?? 0) - (cpu0.get(tid) ?? 0)) / n;
    const kinds = [...t.entries()].sort((x, y) => y[1] - x[1]).map(([k, c]) => `${k} ${per(c).trim()}`);
    process.stdout.write(`  thread ${name(tid).padEnd(5)} cpu ${cpu.toFixed(1).padStart(7)} µs  ${kinds.join(', ')}\n`);
  }
  process.stdout.write('  the code that touched them (thread, mapping: function), the largest:\n');
  for (const [k, c] of [...syms.entries()].sort((x, y) => y[1] - x[1]).slice(0, 20)) process.stdout.write(`    ${per(c)} B  ${k}\n`);
  const old = new Map(before.map((m) => [m.start, m.rss]));
  process.stdout.write('gateway thread arenas and WebAssembly memory: resident before → after, net per device, page faults by thread:\n');
  for (const m of maps) {
    if (m.kind !== 'threadArenas' && m.kind !== 'wasmMemory') continue;
    const r0 = old.get(m.start) ?? 0;
    const who = [...(byMapping.get(m.start)?.entries() ?? [])].sort((x, y) => y[1] - x[1]).map(([tid, c]) => `${name(tid)} ${per(c).trim()} B`);
    if (r0 === m.rss && who.length === 0) continue;
    process.stdout.write(
      `  ${m.start.toString(16)} ${kind(m).padEnd(28)} ${r0 / 1024} → ${m.rss / 1024} kB  ${((m.rss - r0) / n).toFixed(0).padStart(5)} B  faults: ${who.join(', ') || '-'}\n`,
    );
  }
}

type Mem = NodeJS.MemoryUsage;
type Spaces = Record<string, { size: number; used: number }>;

const dir = mkdtempSync(join(tmpdir(), 'voxgate-fleetsmaps-'));
writeFileSync(join(dir, 'config.json'), '{}');
try {
  const base = await gatewayEnv({ dataDir: dir, apiKey: API_KEY, configFile: join(dir, 'config.json') });
  const env = { ...base.env, ...fleetCaps(N) };
  const gateway = tsx ? spawnTs('gateway', 'bench/tools/heap-gateway.ts', { env }) : forkCompiledWithProbe('gateway', env, PROBE);
  const floor = spawnTs('bare-ws', 'bench/floors/bare-ws.ts', { nodeArgs: floorArgs });
  const fleet = new Fleet([spawnTs('fleet0', 'bench/fleet/fleet.ts')]);
  await fleet.procs[0]!.hello;
  const floorPort = (await floor.hello)['port'] as number;
  const gwUrl = `http://127.0.0.1:${base.httpPort}`;
  await until('the gateway to start', async () => (await fetch(`${gwUrl}/readyz`).catch(() => undefined))?.status === 200, 120_000, 200);
  const ask = async (p: Proc) => p.request<Reply & { mem: Mem; spaces?: Spaces; devices?: number; young?: number; fullGcMs?: number }>({ cmd: 'mem' }, 60_000);

  // The floor: bare connections (the quick bench's RSS floor).
  const f0 = await ask(floor);
  const fs0 = smaps(floor.child.pid!);
  const fr = await fleet.connect({
    group: 'bare',
    mode: 'bare',
    waitFor: 'open',
    transport: 'ws',
    url: `ws://127.0.0.1:${floorPort}/`,
    count: N,
    macGroup: 6,
    sources: [],
    timeoutMs: 300_000,
  });
  if (!fr.ok) throw new Error(`bare fleet: ${JSON.stringify(fr.stats)}`);
  await until(
    'bare connections on the floor',
    async () => ((await floor.request<Reply & { devices?: number }>({ cmd: 'count' })).devices ?? 0) >= N,
    120_000,
    100,
  );
  const f1 = await ask(floor);
  const fs1 = smaps(floor.child.pid!);

  // The gateway: a few devices first (one-time costs), then N ready devices.
  const connect = async (group: string, count: number, macGroup: number) => {
    const before = await metric(gwUrl, 'voxgate_devices_ready');
    const url = mqtt ? `mqtt://127.0.0.1:${base.mqttPort}` : `ws://127.0.0.1:${base.httpPort}/xiaozhi/v1/`;
    const transport = mqtt ? 'mqtt' : 'ws';
    const r = await fleet.connect({ group, mode: 'device', waitFor: 'ready', transport, url, count, macGroup, sources: [], timeoutMs: 300_000 });
    if (!r.ok) throw new Error(`${group}: ${JSON.stringify(r.stats)}`);
    await until('the gateway to count them ready', async () => (await metric(gwUrl, 'voxgate_devices_ready')) >= before + count, 60_000, 50);
  };
  await connect('warm', 20, 7);
  const g0 = await ask(gateway);
  const gs0 = smaps(gateway.child.pid!);
  const gpid = gateway.child.pid!;
  const perfData = join(dir, 'faults.data');
  const perf = faults
    ? spawn('perf', ['record', '-q', '-c', '1', '-e', 'page-faults', '-d', '-o', perfData, '-p', String(gpid)], { stdio: 'ignore' })
    : undefined;
  if (perf) await until('perf to start recording', async () => existsSync(perfData), 10_000, 50);
  const cpu0 = threadCpu(gpid);
  await connect('fleet', N, 5);
  const cpu1 = threadCpu(gpid);
  const g1 = await ask(gateway);
  const gs1 = smaps(gpid);
  let faultScript: string | undefined;
  if (perf) {
    const done = new Promise((r) => perf.once('exit', r));
    perf.kill('SIGINT');
    await done;
    faultScript = spawnSync('perf', ['script', '-i', perfData, '-F', 'tid,addr,ip,sym'], { encoding: 'utf8', maxBuffer: 1 << 30 }).stdout;
  }

  const per = (a: number, b: number) => ((b - a) / N).toFixed(0).padStart(6);
  const line = (label: string, a: Mem, b: Mem) =>
    process.stdout.write(
      `${label}: rss ${per(a.rss, b.rss)} B  heapUsed ${per(a.heapUsed, b.heapUsed)} B  heapTotal ${per(a.heapTotal, b.heapTotal)} B  external ${per(a.external, b.external)} B  arrayBuffers ${per(a.arrayBuffers, b.arrayBuffers)} B per device\n`,
    );
  process.stdout.write(`${N} devices, after GC (${tsx ? 'gateway from sources' : 'compiled gateway'})\n`);
  line('floor  ', f0.mem, f1.mem);
  line('gateway', g0.mem, g1.mem);
  // The young generation grows to its maximum with allocation, not with devices (the bench's fleet row reports both).
  const young = (r: { young?: number; spaces?: Spaces }) => r.young ?? r.spaces?.['new_space']?.size ?? NaN;
  process.stdout.write(
    `without the young generation's growth: floor ${per(f0.mem.rss - young(f0), f1.mem.rss - young(f1))} B, gateway ` +
      `${per(g0.mem.rss - young(g0), g1.mem.rss - young(g1))} B per device (young now ${(young(f1) / 2 ** 20).toFixed(1)} / ` +
      `${(young(g1) / 2 ** 20).toFixed(1)} MiB; rss now ${(f1.mem.rss / 2 ** 20).toFixed(0)} / ${(g1.mem.rss / 2 ** 20).toFixed(0)} MiB)\n`,
  );
  // A forced full collection is atomic (no incremental steps): the longest pause the gateway's heap can cost.
  process.stdout.write(`gateway: a forced full GC took ${g0.fullGcMs?.toFixed(1)} ms before the devices, ${g1.fullGcMs?.toFixed(1)} ms after (wall clock)\n`);
  if (g0.spaces && g1.spaces) {
    process.stdout.write('gateway V8 spaces per device (committed / used):\n');
    for (const [name, s] of Object.entries(g1.spaces)) {
      const s0 = g0.spaces[name] ?? { size: 0, used: 0 };
      process.stdout.write(`  ${name.padEnd(24)} ${per(s0.size, s.size)} / ${per(s0.used, s.used)} B   (now ${(s.size / 2 ** 20).toFixed(1)} MiB)\n`);
    }
  }
  diff(fs0, fs1, N, 'floor');
  diff(gs0, gs1, N, 'gateway');
  const total = (ms: Mapping[]) => ms.reduce((s, m) => s + m.rss, 0);
  process.stdout.write(
    `smaps Rss per device: floor ${((total(fs1) - total(fs0)) / N).toFixed(0)} B, gateway ${((total(gs1) - total(gs0)) / N).toFixed(0)} B\n`,
  );
  if (faultScript !== undefined) faultReport(faultScript, gs1, gs0, gpid, cpu0, cpu1, N);
  else {
    const [c0, c1] = [cpu0, cpu1];
    const cpu = [...c1.entries()].map(([tid, c]) => `${tid === gpid ? 'main' : `+${tid - gpid}`} ${((c - (c0.get(tid) ?? 0)) / N).toFixed(1)}`);
    process.stdout.write(`gateway thread CPU per device while the fleet connected, µs: ${cpu.join(', ')}\n`);
  }
} finally {
  await stopAll();
  rmSync(dir, { recursive: true, force: true });
}
