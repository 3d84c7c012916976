/**
 * Where a ready device's resident memory goes beyond the heap's live objects, the gateway against the bare
 * socket floor, for issue 21's "RSS per ready device ≤ 1 KB above a bare socket's":
 *   nice -n 10 npx tsx bench/tools/fleet-smaps.ts [devices=5000] [--tsx] [--floor-arg=<node option>]...
 * Starts the compiled gateway (build it first: npx tsc -b tsconfig.build.json; --tsx: from sources) and the
 * floor (bench/floors/bare-ws.ts, bare sockets: what the quick bench's RSS floor is), connects `devices`
 * to each as the bench does (ready devices to the gateway, bare connections to the floor), and prints per
 * device, after GC, the change of: process.memoryUsage(), the gateway's V8 heap spaces (committed and
 * used), and /proc/<pid>/smaps grouped by mapping (anonymous, [heap], files), with the mappings that grew most.
 * The gateway runs with the node options it ships with (VOXGATE_GATEWAY_NODE_ARGS replaces them: bench/lib/compiled.ts);
 * `--floor-arg=` gives the floor one (what the floor would do with the same setting).
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Fleet } from '../scenarios/env.js';
import { metric, until } from '../scenarios/measure.js';
import { fleetCaps, gatewayEnv } from '../lib/gateway-env.js';
import { forkCompiledWithProbe } from '../lib/compiled.js';
import { type Proc, spawnTs, stopAll, type Reply } from '../lib/procs.js';
import { API_KEY } from '../scenarios/bench.js';

const args = process.argv.slice(2).filter((a) => !a.startsWith('--'));
const floorArgs = process.argv.filter((a) => a.startsWith('--floor-arg=')).map((a) => a.slice('--floor-arg='.length));
const tsx = process.argv.includes('--tsx');
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

interface Mapping {
  range: string;
  name: string;
  kb: number;
  rss: number;
}

/** Every mapping of the process with its resident size (kB). */
function smaps(pid: number): Mapping[] {
  const out: Mapping[] = [];
  let cur: Mapping | undefined;
  for (const line of readFileSync(`/proc/${pid}/smaps`, 'utf8').split('\n')) {
    const head = /^([0-9a-f]+-[0-9a-f]+) \S+ \S+ \S+ \S+\s*(.*)$/.exec(line);
    if (head) {
      const [a, b] = head[1]!.split('-').map((h) => parseInt(h, 16));
      cur = { range: head[1]!, name: head[2] || '(anon)', kb: (b! - a!) / 1024, rss: 0 };
      out.push(cur);
      continue;
    }
    const rss = /^Rss:\s+(\d+) kB/.exec(line);
    if (rss && cur) cur.rss = Number(rss[1]);
  }
  return out;
}

function kind(m: Mapping): string {
  if (m.name === '(anon)') return m.kb === 256 ? 'anon 256 kB (V8 pages)' : m.kb > 1024 * 1024 ? 'anon > 1 GB (wasm/cage)' : 'anon other';
  return m.name.startsWith('/') ? 'files' : m.name;
}

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
    const d = ((a.get(k) ?? 0) - (b.get(k) ?? 0)) * 1024;
    if (Math.abs(d / n) >= 8) process.stdout.write(`  ${(d / n).toFixed(0).padStart(6)} B  ${k}\n`);
  }
  const old = new Map(before.map((m) => [m.range, m.rss]));
  const grown = after
    .map((m) => ({ m, d: m.rss - (old.get(m.range) ?? 0) }))
    .sort((x, y) => y.d - x.d)
    .slice(0, 8);
  for (const { m, d } of grown) process.stdout.write(`    +${d} kB  ${m.range} (${m.kb} kB) ${m.name}\n`);
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
    const url = `ws://127.0.0.1:${base.httpPort}/xiaozhi/v1/`;
    const r = await fleet.connect({ group, mode: 'device', waitFor: 'ready', transport: 'ws', url, count, macGroup, sources: [], timeoutMs: 300_000 });
    if (!r.ok) throw new Error(`${group}: ${JSON.stringify(r.stats)}`);
    await until('the gateway to count them ready', async () => (await metric(gwUrl, 'voxgate_devices_ready')) >= before + count, 60_000, 50);
  };
  await connect('warm', 20, 7);
  const g0 = await ask(gateway);
  const gs0 = smaps(gateway.child.pid!);
  await connect('fleet', N, 5);
  const g1 = await ask(gateway);
  const gs1 = smaps(gateway.child.pid!);

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
} finally {
  await stopAll();
  rmSync(dir, { recursive: true, force: true });
}
