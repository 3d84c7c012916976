/**
 * Process CPU per ready device, the gateway against the fleet floor (bench/floors/bare-ws.ts: hello, initialize,
 * two tools/list pages, JSON.parse only), measured alternately in one run: the figure issue 21's fleet rows turn
 * on, and one that moves much less with the machine's load than devices per second.
 *   nice -n 10 npx tsx bench/tools/fleet-cpu.ts [devices=2000] [rounds=3] [--dist] [--profile] [--strace] [--storm]
 * Each round connects `devices` new devices to the floor, then `devices` new devices to the gateway (each side
 * measured from /proc/<pid>/stat from the first connect to the last device counted ready by that side), then
 * closes both groups. --storm also measures a reconnect storm of each side's last group (the same devices dropped
 * and dialing again: on the gateway known devices, takeovers of closing sessions), the floor's first. --dist runs the compiled gateway (build it
 * first: npx tsc -b tsconfig.build.json). --profile writes the gateway's CPU profile of its last connect window
 * to bench/results/prof/fleet-cpu-{tsx,dist}.cpuprofile, and the floor's to fleet-cpu-floor.cpuprofile. --strace counts each side's syscalls per ready device
 * (strace slows both sides: its CPU figures are not comparable then).
 * --slices[=K] also splits each connect window by the devices the fleet counts ready: the CPU of each side's main
 * thread and of its other threads (V8's compilers and GC helpers, libuv's pool) per device for the first K devices
 * and the last K (default 1 000), sampled every 50 ms from /proc/<pid>/task/*. --cold skips the 200-device warm-up, so
 * round 1 meets a freshly started gateway (as the quick bench's fleet row does) and round 2 the same gateway warm.
 * --fleets=N splits the devices over N device-simulator processes (default 1; the quick bench's fleet row uses 2).
 * FLEETCPU_GW_STDOUT=<file> appends the gateway's stdout there (V8's --trace-* output, with VOXGATE_GATEWAY_NODE_ARGS).
 * --v8log (with --dist) adds V8's code and deopt log to the gateway's options and prints, for each of its connect
 * windows, the optimizing (TurboFan) compiles, their code size (by origin: Node, a package, the gateway, SQLite's WebAssembly),
 * the functions compiled more than once and the deopts:
 * what the JIT did while the devices got ready, counted rather than timed (each window is placed by the gateway's own
 * performance.now(), asked before the first device dials and after the last is counted ready: a few ms from V8's clock).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createWriteStream, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { measured, minorFaults, threadCpuUs, type ThreadCpu } from '../lib/cpu.js';
import { PROBE_JS } from './heap-probe.js';
import { Fleet } from '../scenarios/env.js';
import { metric, until } from '../scenarios/measure.js';
import { fleetCaps, gatewayEnv } from '../lib/gateway-env.js';
import { forkCompiledWithProbe, gatewayNodeArgs } from '../lib/compiled.js';
import { spawnTs, stopAll, type Reply } from '../lib/procs.js';

const args = process.argv.slice(2).filter((a) => !a.startsWith('--'));
const flag = (f: string) => process.argv.includes(`--${f}`);
const [dist, profile, strace, storm, cold, v8log] = [flag('dist'), flag('profile'), flag('strace'), flag('storm'), flag('cold'), flag('v8log')];
const slicesArg = process.argv.find((a) => a === '--slices' || a.startsWith('--slices='));
const SLICE = slicesArg === undefined ? 0 : Number(slicesArg.split('=')[1] ?? 1000);
const N = Number(args[0] ?? 2000);
/** Device-simulator processes the devices are split over (the quick bench's fleet row uses 2 for 10 000). */
const FLEETS = Number(process.argv.find((a) => a.startsWith('--fleets='))?.split('=')[1] ?? 1);
const ROUNDS = Number(args[1] ?? 3);
import { API_KEY } from '../scenarios/bench.js';

/** strace -c on a process and its threads, for the window; the summary's calls per syscall. */
function traced(pid: number, file: string): { child: ChildProcess; calls: () => Promise<Map<string, number>> } {
  const child = spawn('strace', ['-f', '-c', '-o', file, '-p', String(pid)], { stdio: 'ignore' });
  return {
    child,
    calls: async () => {
      child.kill('SIGINT');
      await new Promise((r) => child.once('exit', r));
      const out = new Map<string, number>();
      for (const line of readFileSync(file, 'utf8').split('\n')) {
        const m = /^\s*[\d.]+\s+[\d.]+\s+\d+\s+(\d+)\s+(?:\d+\s+)?(\w+)\s*$/.exec(line);
        if (m && m[2] !== 'total') out.set(m[2]!, Number(m[1]));
      }
      return out;
    },
  };
}

/** One reading of a side's threads against the devices its fleet group counts ready. */
interface Sample extends ThreadCpu {
  ready: number;
}

/** Thread CPU sampled every 50 ms while `work` runs, against the group's ready count (asked of the fleet process,
 * not the gateway: a /metrics scrape per sample would be in the gateway's CPU). */
async function sampled<T>(pid: number, readyOf: () => Promise<number>, work: () => Promise<T>): Promise<{ result: T; samples: Sample[] }> {
  const samples: Sample[] = [{ ...threadCpuUs(pid), ready: 0 }];
  let done = false;
  const loop = (async () => {
    while (!done) {
      await new Promise((r) => setTimeout(r, 50));
      const ready = await readyOf().catch(() => NaN);
      samples.push({ ...threadCpuUs(pid), ready });
    }
  })();
  try {
    return { result: await work(), samples };
  } finally {
    done = true;
    await loop;
  }
}

/** CPU per device (main thread, other threads) between the samples where `from` and `to` devices were ready,
 * interpolated linearly inside a 50 ms step. */
function slice(samples: Sample[], from: number, to: number): { main: number; other: number } {
  const at = (k: number, key: 'main' | 'other'): number => {
    const v = (x: Sample) => (key === 'main' ? x.mainUser + x.mainSys : x.other);
    const i = samples.findIndex((x) => x.ready >= k);
    if (i <= 0) return v(samples[Math.max(0, i === -1 ? samples.length - 1 : i)]!);
    const [a, b] = [samples[i - 1]!, samples[i]!];
    const f = b.ready === a.ready ? 1 : (k - a.ready) / (b.ready - a.ready);
    return v(a) + f * (v(b) - v(a));
  };
  const n = to - from;
  return { main: (at(to, 'main') - at(from, 'main')) / n, other: (at(to, 'other') - at(from, 'other')) / n };
}

/** What V8's log (--log-code --log-deopt) says of one window, `fromMs`–`toMs` after the isolate started. */
function jitOf(log: string, fromMs: number, toMs: number): string {
  const [from, to] = [fromMs * 1000, toMs * 1000];
  const names = new Map<string, string>(); // code address -> function
  const compiled = new Map<string, number>();
  const bytesOf = new Map<string, number>(); // where the optimized code came from -> its bytes
  let [optimized, bytes] = [0, 0];
  const deopts: string[] = [];
  for (const line of log.split('\n')) {
    if (line.startsWith('code-creation,JS,')) {
      const f = line.split(',');
      const name = f.slice(6, -2).join(',');
      names.set(f[4]!, name);
      const t = Number(f[3]);
      // The last field marks the tier: `*` TurboFan, `^` baseline, `~` interpreted.
      if (f.at(-1) === '*' && t >= from && t <= to) {
        optimized++;
        bytes += Number(f[5]);
        compiled.set(name, (compiled.get(name) ?? 0) + 1);
        const where =
          /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(name)?.[1] ??
          /\/(gateway|protocol)\/dist\//.exec(name)?.[1] ??
          (/ node:/.test(name) ? 'node' : name.startsWith('wasm-function') ? 'WebAssembly (SQLite)' : 'other');
        bytesOf.set(where, (bytesOf.get(where) ?? 0) + Number(f[5]));
      }
    } else if (line.startsWith('code-deopt,')) {
      const f = line.split(',');
      const t = Number(f[1]);
      if (t >= from && t <= to) deopts.push(`${(names.get(f[3]!) ?? '?').replace(/file:\/\/\S*\/(gateway|protocol)\/dist\//, '$1/')}: ${f.slice(8).join(',')}`);
    }
  }
  const twice = [...compiled].filter(([, n]) => n > 1).map(([name]) => name.replace(/ \S*\/(gateway|protocol|node_modules)\//, ' $1/'));
  const own = deopts.filter((d) => /(^| )(gateway|protocol)\//.test(d.split(': ')[0]!));
  return (
    `${optimized} TurboFan compiles of ${compiled.size} functions (${(bytes / 1024).toFixed(0)} KB), ${deopts.length} deopts` +
    `\n         code by origin: ${[...bytesOf]
      .sort((a, b) => b[1] - a[1])
      .map(([k, v]) => `${k} ${(v / 1024).toFixed(0)} KB`)
      .join(', ')}` +
    `\n         compiled more than once (${twice.length}): ${twice.join('; ')}` +
    `\n         deopts in the gateway's own code (${own.length}): ${own.join('; ')}`
  );
}

const PROF_DIR = join(import.meta.dirname, '../results/prof');
if (profile) mkdirSync(PROF_DIR, { recursive: true });
const dir = mkdtempSync(join(tmpdir(), 'voxgate-fleetcpu-'));
writeFileSync(join(dir, 'config.json'), '{}');
try {
  const base = await gatewayEnv({ dataDir: dir, apiKey: API_KEY, configFile: join(dir, 'config.json') });
  const httpPort = base.httpPort;
  const env = { ...base.env, ...fleetCaps(2 * N) };
  const v8File = join(dir, 'v8.log');
  if (v8log && dist)
    process.env['VOXGATE_GATEWAY_NODE_ARGS'] = [...gatewayNodeArgs(), '--log-code', '--log-deopt', `--logfile=${v8File}`, '--no-logfile-per-isolate'].join(' ');
  const gateway = dist ? forkCompiledWithProbe('gateway', env, PROBE_JS) : spawnTs('gateway', 'bench/tools/heap-gateway.ts', { env });
  /** The gateway's connect windows by its own clock (ms from its start), for --v8log (read once it has exited and its log is flushed). */
  const windows: Array<{ group: string; from: number; to: number }> = [];
  // --profile profiles the floor's last window too (the same probe, loaded before the floor's own code).
  const probe = profile ? ['--import', `data:text/javascript,${encodeURIComponent(PROBE_JS)}`] : [];
  const gwStdout = process.env['FLEETCPU_GW_STDOUT'];
  if (gwStdout) gateway.child.stdout?.pipe(createWriteStream(gwStdout, { flags: 'a' }));
  const floor = spawnTs('bare-ws', 'bench/floors/bare-ws.ts', { nodeArgs: probe });
  const fleet = new Fleet(Array.from({ length: FLEETS }, (_, i) => spawnTs(`fleet${i}`, 'bench/fleet/fleet.ts')));
  await Promise.all(fleet.procs.map((p) => p.hello));
  const floorPort = (await floor.hello)['port'] as number;
  const gwUrl = `http://127.0.0.1:${httpPort}`;
  await until('the gateway to start', async () => (await fetch(`${gwUrl}/readyz`).catch(() => undefined))?.status === 200, 120_000, 200);
  const floorReady = async () => (await floor.request<Reply & { ready?: number }>({ cmd: 'count' }, 30_000)).ready ?? 0;
  const gwReady = () => metric(gwUrl, 'voxgate_devices_ready');

  const side = async (name: 'floor' | 'gateway', group: string, macGroup: number, last: boolean, n = N) => {
    const proc = name === 'floor' ? floor : gateway;
    const url = name === 'floor' ? `ws://127.0.0.1:${floorPort}/xiaozhi/v1/` : `ws://127.0.0.1:${httpPort}/xiaozhi/v1/`;
    const ready = name === 'floor' ? floorReady : gwReady;
    const before = await ready();
    const prof = profile && last;
    if (prof) await proc.request({ cmd: 'profile' });
    const st = strace ? traced(proc.child.pid!, join(dir, `${group}.strace`)) : undefined;
    if (st) await new Promise((r) => setTimeout(r, 1000)); // attached
    const gwNow = async () => (await gateway.request<Reply & { now: number }>({ cmd: 'now' }, 60_000)).now;
    const connect = async () => {
      if (name === 'gateway' && v8log) windows.push({ group, from: await gwNow(), to: NaN });
      const t0 = performance.now();
      const r = await fleet.connect({ group, mode: 'device', waitFor: 'ready', transport: 'ws', url, count: n, macGroup, sources: [], timeoutMs: 300_000 });
      if (!r.ok) throw new Error(`${group} did not get ready: ${JSON.stringify(r.stats)}`);
      await until(`${name} to count every device ready`, async () => (await ready()) >= before + n, 60_000, 20);
      if (name === 'gateway' && v8log) windows.at(-1)!.to = await gwNow();
      return performance.now() - t0;
    };
    const groupReady = async () => {
      const stats = await Promise.all(fleet.procs.map((p) => p.request<Reply & { groups?: Record<string, { ready: number }> }>({ cmd: 'stats' }, 10_000)));
      return stats.reduce((sum, r) => sum + (r.groups?.[group]?.ready ?? 0), 0);
    };
    let samples: Sample[] | undefined;
    const [faults0, threads0] = [minorFaults(proc.child.pid!), threadCpuUs(proc.child.pid)];
    const m = await measured([proc.child.pid], async () => {
      if (SLICE === 0 || n < 2 * SLICE) return connect();
      const s = await sampled(proc.child.pid!, groupReady, connect);
      samples = s.samples;
      return s.result;
    });
    const [faults, threads] = [minorFaults(proc.child.pid!) - faults0, threadCpuUs(proc.child.pid)];
    const calls = await st?.calls();
    const profName = name === 'floor' ? 'floor' : dist ? 'dist' : 'tsx';
    if (prof) await proc.request({ cmd: 'profile', file: join(PROF_DIR, `fleet-cpu-${profName}.cpuprofile`) }, 600_000);
    const perDevice = (m.cpu[0]! / n).toFixed(0);
    let line = `${name.padEnd(7)} ${perDevice.padStart(6)} µs CPU per ready device, ${(n / (m.result / 1000)).toFixed(0).padStart(5)} ready/s (load ${m.load.join(' -> ')})`;
    const per = (x: number) => (x / n).toFixed(0);
    line += `\n         per device: main user ${per(threads.mainUser - threads0.mainUser)} + sys ${per(threads.mainSys - threads0.mainSys)}, other threads ${per(threads.other - threads0.other)} µs; ${(faults / n).toFixed(2)} minor page faults`;
    if (calls) line += `\n         per device: ${[...calls].map(([k, v]) => `${k} ${(v / n).toFixed(2)}`).join(', ')}`;
    if (samples) {
      const whole = slice(samples, 0, n);
      const [a, z] = [slice(samples, 0, SLICE), slice(samples, n - SLICE, n)];
      const f = (x: { main: number; other: number }) => `main ${x.main.toFixed(0)} + other ${x.other.toFixed(0)}`;
      line += `\n         µs per device: first ${SLICE}: ${f(a)}; last ${SLICE}: ${f(z)}; all ${n}: ${f(whole)}`;
      const each = Array.from({ length: Math.floor(n / SLICE) }, (_, i) => slice(samples!, i * SLICE, (i + 1) * SLICE));
      line += `\n         by ${SLICE}s, main: ${each.map((x) => x.main.toFixed(0)).join(' ')}; other: ${each.map((x) => x.other.toFixed(0)).join(' ')}`;
    }
    process.stdout.write(line + '\n');
    return m.cpu[0]! / n;
  };

  // Warm-up: page caches, compiled code, the records' first write (not with --cold: round 1 is then the cold one).
  if (!cold) {
    await side('floor', 'warm-f', 7, false, 200);
    await side('gateway', 'warm-g', 8, false, 200);
    await fleet.close('warm-f');
    await fleet.close('warm-g');
    await until('the gateway to see the warm-up devices gone', async () => (await gwReady()) === 0, 60_000, 100);
  }
  const rows: Array<[number, number]> = [];
  for (let round = 0; round < ROUNDS; round++) {
    const last = round === ROUNDS - 1;
    const f = await side('floor', `f${round}`, 10 + round, last);
    // The floor's devices go before the gateway's dial in (the storm below needs both groups): 2 × 10 000 sockets
    // would pass the fleet process's descriptor limit (20 000 here), and the bench's row has one side's fleet at a time.
    const keepFloor = storm && last;
    if (!keepFloor) await fleet.close(`f${round}`);
    const g = await side('gateway', `g${round}`, 40 + round, last);
    rows.push([f, g]);
    if (storm && last) {
      // The same storm on each side (its last round's group dropped and dialing again), the floor's first; with
      // --profile each side's storm window is profiled too (fleet-cpu-storm-{floor,dist,tsx}.cpuprofile).
      const stormOf = async (name: 'floor' | 'gateway', group: string): Promise<number> => {
        const proc = name === 'floor' ? floor : gateway;
        const ready = name === 'floor' ? floorReady : gwReady;
        const before = await ready();
        if (profile) await proc.request({ cmd: 'profile' });
        const m = await measured([proc.child.pid], async () => {
          const s = await fleet.storm(group, 300_000);
          if (!s.ok) throw new Error(`${name} storm did not complete: ${JSON.stringify(s.stats)}`);
          await until(`the ${name} to count every device ready again`, async () => (await ready()) >= before, 60_000, 20);
        });
        const profName = name === 'floor' ? 'floor' : dist ? 'dist' : 'tsx';
        if (profile) await proc.request({ cmd: 'profile', file: join(PROF_DIR, `fleet-cpu-storm-${profName}.cpuprofile`) }, 600_000);
        process.stdout.write(`storm ${name.padEnd(7)} ${(m.cpu[0]! / N).toFixed(0).padStart(6)} µs CPU per device ready again (load ${m.load.join(' -> ')})\n`);
        return m.cpu[0]! / N;
      };
      const sf = await stormOf('floor', `f${round}`);
      const sg = await stormOf('gateway', `g${round}`);
      process.stdout.write(`storm: gateway ${(sg / sf).toFixed(2)}× the floor's CPU per device ready again\n`);
    }
    if (keepFloor) await fleet.close(`f${round}`);
    await fleet.close(`g${round}`);
    await until('the gateway to see every device gone', async () => (await gwReady()) === 0, 60_000, 100);
  }
  const mean = (i: 0 | 1) => rows.reduce((n, r) => n + r[i], 0) / rows.length;
  process.stdout.write(
    `${dist ? 'compiled' : 'from sources (tsx)'}, ${N} devices × ${ROUNDS}: floor ${mean(0).toFixed(0)} µs, gateway ${mean(1).toFixed(0)} µs per ready device (${(mean(1) / mean(0)).toFixed(2)}×)\n`,
  );
  await stopAll();
  if (v8log && dist) {
    const log = readFileSync(v8File, 'utf8');
    for (const w of windows) process.stdout.write(`JIT, gateway ${w.group}: ${jitOf(log, w.from, w.to)}\n`);
  }
} finally {
  await stopAll();
  rmSync(dir, { recursive: true, force: true });
}
