/**
 * What the gateway's heap holds per ready device, by constructor: deterministic (heap bytes do not depend
 * on the machine's load), for issue 21's fleet rows.
 *   nice -n 10 npx tsx bench/tools/fleet-heap.ts [devices=2000] [top=30] [--dist] [--mqtt]
 * Starts the gateway from sources (as the bench does; under tsx every named arrow function carries a
 * `name` property, 256 B of dictionary each), or with --dist the compiled gateway as `npm start` runs it
 * (build it first: npx tsc -b tsconfig.build.json), and one fleet process; connects a few devices first
 * (one-time costs: page cache, compiled code), snapshots after GC, connects `devices` more, snapshots again,
 * and prints the difference per device (self size and count by node type and constructor name), plus
 * process.memoryUsage() after GC at both points, and the gateway's process CPU per ready device while the
 * devices connected (utime + stime; much less load-dependent than devices per second). --profile writes
 * the gateway's CPU profile of that window (the sampler's cost is in the CPU figure then) to
 * bench/results/prof/fleet-heap-{tsx,dist}.cpuprofile (read it with bench/tools/top-self.ts).
 * --floor measures the fleet floor (bench/floors/bare-ws.ts, through tsx) the same way instead of the gateway:
 * the objects the floor holds per ready device, to set beside the gateway's.
 * --gc-nvp runs the measured process with --trace-gc-nvp and prints, for the window in which the devices connected, the
 * young collections and the bytes they promoted to the old generation per ready device (what outlived two scavenges while
 * its device's setup waited for replies: old-space garbage after, the RSS above the heap that fleetkb describes).
 * --survivors samples, over the same window, the objects that outlived a young collection (V8's sampling heap
 * profiler through alloc-probe.ts, every 1 KiB, objects the scavenges freed left out): what the scavenges copied or
 * promoted, by allocation site (function and caller), per ready device.
 * FLEETHEAP_GC_OUT=<file> (with --gc-nvp) also writes that window's --trace-gc-nvp lines there, every field of each
 * collection (scavenge phases, background marking time) for a closer reading.
 * --churn connects and drops 20 more devices after the warm-up, before the first snapshot: a gateway that has seen
 * devices leave, as one that has run for a while has (and as the whole quick bench's fleet row, after the call rows).
 * Objects can hold more then: V8 turns a field that held small integers and then a time into a boxed-number field
 * for every object of that shape made afterwards (docs/performance.md, "fleetjit").
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { measured } from '../lib/cpu.js';
import { PROBE_JS } from './heap-probe.js';
import { ALLOC_PROBE_URL } from './alloc-probe.js';
import { byConstructor, printHeapDiff } from '../lib/heap-snapshot.js';
import { Fleet } from '../scenarios/env.js';
import { forkCompiledWithProbe, gatewayNodeArgs } from '../lib/compiled.js';
import { fleetCaps, gatewayEnv } from '../lib/gateway-env.js';
import { spawnTs, stopAll, type Reply } from '../lib/procs.js';

type Mem = NodeJS.MemoryUsage;
/** alloc-probe.ts's answer: sampled bytes that outlived a young collection in the window, by allocation site. */
interface Survivors {
  bytes: number;
  top: Array<[string, number]>;
}

const args = process.argv.slice(2).filter((a) => !a.startsWith('--'));
const dist = process.argv.includes('--dist');
const profile = process.argv.includes('--profile');
const floor = process.argv.includes('--floor');
const gcNvp = process.argv.includes('--gc-nvp');
const churn = process.argv.includes('--churn');
const survivors = process.argv.includes('--survivors');
/** `--mqtt`: the devices connect to the gateway over MQTT. */
const mqtt = process.argv.includes('--mqtt') && !floor;
if (gcNvp && !floor) process.env['VOXGATE_GATEWAY_NODE_ARGS'] = [...gatewayNodeArgs(), '--trace-gc-nvp'].join(' ');
// --survivors: alloc-probe.ts beside the heap probe (each answers only its own commands).
const probeArgs = survivors ? ['--import', ALLOC_PROBE_URL] : [];
if (survivors && dist && !floor) process.env['VOXGATE_GATEWAY_NODE_ARGS'] = [...gatewayNodeArgs(), '--import', ALLOC_PROBE_URL].join(' ');
const N = Number(args[0] ?? 2000);
const TOP = Number(args[1] ?? 30);
const WARM = 20;
const dir = mkdtempSync(join(tmpdir(), 'voxgate-heap-'));
// FLEET_HEAP_CONFIG: the gateway's config file (JSON), e.g. '{"session":{"requestTimeoutMs":1000}}' to see what an idle device keeps.
writeFileSync(join(dir, 'config.json'), process.env['FLEET_HEAP_CONFIG'] ?? '{}');
try {
  const base = await gatewayEnv({ dataDir: dir, apiKey: 'bench-key-0123456789abcdef', configFile: join(dir, 'config.json') });
  const httpPort = base.httpPort;
  const env = { ...base.env, ...fleetCaps(N) };
  const gateway = floor
    ? spawnTs('floor', 'bench/tools/heap-floor.ts', { nodeArgs: [...(gcNvp ? ['--trace-gc-nvp'] : []), ...probeArgs] })
    : dist
      ? forkCompiledWithProbe('gateway', env, PROBE_JS)
      : spawnTs('gateway', 'bench/tools/heap-gateway.ts', { env, nodeArgs: [...(gcNvp ? ['--trace-gc-nvp'] : []), ...probeArgs] });
  let gcText = '';
  if (gcNvp) gateway.child.stdout?.on('data', (c: Buffer) => void (gcText += c.toString()));
  const fleet = new Fleet([spawnTs('fleet0', 'bench/fleet/fleet.ts')]);
  await fleet.procs[0]!.hello;
  let port = httpPort;
  if (floor) port = (await gateway.hello).port as number;
  else
    for (let t = Date.now(); ;) {
      if ((await fetch(`http://127.0.0.1:${httpPort}/readyz`).catch(() => undefined))?.status === 200) break;
      if (Date.now() - t > 120_000) throw new Error('gateway did not start');
      await new Promise((r) => setTimeout(r, 200));
    }
  const url = mqtt ? `mqtt://127.0.0.1:${base.mqttPort}` : `ws://127.0.0.1:${port}/xiaozhi/v1/`;
  const transport = mqtt ? 'mqtt' : 'ws';
  const connect = async (group: string, count: number, macGroup: number) => {
    const r = await fleet.connect({ group, mode: 'device', waitFor: 'ready', transport, url, count, macGroup, sources: [], timeoutMs: 300_000 });
    if (!r.ok) throw new Error(`${group} did not get ready: ${JSON.stringify(r.stats)}`);
  };
  const snap = async (name: string) => {
    await new Promise((r) => setTimeout(r, 1500)); // the records' batched writes (250 ms) and the sweep settle
    const file = join(dir, `${name}.heapsnapshot`);
    const r = await gateway.request<Reply & { mem: Mem }>({ cmd: 'snapshot', file }, 300_000);
    return { file, mem: r.mem };
  };
  await connect('warm', WARM, 7);
  if (churn) {
    await connect('churn', 20, 9);
    await fleet.close('churn');
    await new Promise((r) => setTimeout(r, 500)); // the gateway sees them leave
  }
  const a = await snap('a');
  const profFile = join(import.meta.dirname, `../results/prof/fleet-heap-${dist ? 'dist' : 'tsx'}.cpuprofile`);
  if (profile) await gateway.request({ cmd: 'profile' });
  const gcFrom = gcText.length;
  if (survivors) await gateway.request({ cmd: 'alloc-start', sample: true, survivors: true, interval: 1024 });
  const cpu = await measured([gateway.child.pid], () => connect('fleet', N, 5));
  const gcWindow = gcText.slice(gcFrom);
  const lived = survivors ? await gateway.request<Reply & Survivors>({ cmd: 'alloc-stop', top: TOP }, 120_000) : undefined;
  if (profile) await gateway.request({ cmd: 'profile', file: profFile }, 120_000);
  const b = await snap('b');
  const per = (x: number, y: number) => ((y - x) / N).toFixed(0).padStart(7);
  process.stdout.write(
    `${floor ? 'the fleet floor (bare-ws.ts)' : dist ? 'compiled' : 'from sources (tsx)'}: ${N} ready devices (after ${WARM} warm-up devices), per device, after GC:\n`,
  );
  process.stdout.write(`  gateway CPU ${(cpu.cpu[0]! / N).toFixed(0)} µs per ready device (load average ${cpu.load.join(' -> ')})\n`);
  if (gcNvp) {
    const field = (line: string, name: string) => Number(new RegExp(`\\b${name}=(-?[\\d.]+)`).exec(line)?.[1] ?? 0);
    const lines = gcWindow.split('\n').filter((l) => / gc=\w+ /.test(l));
    const scavenges = lines.filter((l) => / gc=s /.test(l));
    if (process.env['FLEETHEAP_GC_OUT']) writeFileSync(process.env['FLEETHEAP_GC_OUT'], lines.join('\n'));
    const sum = (ls: string[], name: string) => ls.reduce((n, l) => n + field(l, name), 0);
    process.stdout.write(
      `  while they connected: ${scavenges.length} scavenges, ${lines.length - scavenges.length} other collections; ` +
        `promoted ${(sum(scavenges, 'promoted') / N).toFixed(0)} B, allocated ${(sum(lines, 'allocated') / N).toFixed(0)} B per ready device; ` +
        `scavenges' pauses ${sum(scavenges, 'pause').toFixed(0)} ms\n`,
    );
  }
  if (lived) {
    process.stdout.write(
      `  outlived a young collection while they connected (sampled every 1 KiB): ${(lived.bytes / N).toFixed(0)} B per ready device; by site:\n`,
    );
    for (const [site, bytes] of lived.top) process.stdout.write(`${(bytes / N).toFixed(0).padStart(8)} B  ${site}\n`);
  }
  process.stdout.write(
    `  rss ${per(a.mem.rss, b.mem.rss)} B  heapUsed ${per(a.mem.heapUsed, b.mem.heapUsed)} B  external ${per(a.mem.external, b.mem.external)} B\n`,
  );
  printHeapDiff(byConstructor(a.file), byConstructor(b.file), N, TOP, 'device');
  await fleet.close('fleet');
  await fleet.close('warm');
} finally {
  await stopAll();
  if (process.env['KEEP_SNAPSHOTS']) process.stdout.write(`snapshots kept in ${dir}\n`);
  else rmSync(dir, { recursive: true, force: true });
}
