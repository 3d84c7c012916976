/**
 * The /mcp path's cost per call, for before/after comparisons that hold on a busy machine (issue 21):
 *   npm run build && nice -n 10 npx tsx bench/tools/mcp-cpu.ts [concurrency=50] [calls=3000] [--direct] [--profile]
 * Starts the compiled gateway hosting server-everything over stdio (the /mcp bench's config), opens
 * `concurrency` sessions, warms up, then makes `calls` tools/call of `echo` back to back per session and prints
 * the gateway's process CPU per call (utime + stime), the hosted server's, the gateway's garbage collections
 * in the window (count and pause time, by kind), its heap after GC, and its RSS before, at the peak and after
 * every session was deleted. --direct also drives a server-everything of its own on its pipe (no proxy), the
 * same calls, for the server's own CPU per call and rate. --profile writes the gateway's CPU profile of the
 * window to bench/results/prof/mcp-cpu.cpuprofile (read it with bench/tools/top-self.ts). --alloc: bytes allocated per call
 * (sampled), by package and function; --survivors: the same for what a young collection did not free (promoted, or alive
 * at the end), by where it was allocated. MCPCPU_ROOT=<dir> runs
 * <dir>/gateway/dist/main.js instead (a copy of another build, for alternating before/after runs). --gateway-arg=<flag>
 * (repeatable) gives a Node/V8 flag to the gateway process only, --gateway-env=NAME=value an environment variable;
 * --gateway-stdout=<file> keeps what it prints. Every run prints the gateway's resident memory by kind (bench/lib/smaps.ts)
 * idle, at the end of the window and after; --strace=<syscalls> counts those instead of the reads and writes.
 * --warm=<calls> sets the warm-up before the window (calls in all; default a fifth of the window; --warm-c=<k>: at concurrency k on sessions of its own). Every system's line
 * also gives its latency distribution, and its server(s)' CPU split by thread. With --gateway-stdout and V8 trace flags (--trace-opt, --trace-deopt, --trace-gc-nvp)
 * the optimizations, deoptimizations and collections inside the window are counted (with --trace-gc-nvp also the scavenges' promoted
 * bytes per call and surviving bytes per scavenge).
 * --peers (or --peers=mcp-proxy) also drives mcp-proxy and supergateway (the /mcp bench's pinned peers, installed as the bench installs
 * them), each fronting its own server-everything, the same load, in four slices taken in turn (gateway, peer, peer,
 * gateway, …, as the bench does) so a neighbour's burst lands on all alike. Every system's line splits
 * the CPU per call of the whole tree on the machine: the proxy process, the server(s) it started, and this load
 * generator (its own process CPU in the window), so the throughput ratio two cores allow can be derived.
 * The gateway also gets the node options and environment package.json's start gives it, before --gateway-arg's (VOXGATE_GATEWAY_NODE_ARGS
 * replaces them: bench/lib/compiled.ts).
 * --segments: the gateway main thread's reads and writes in the window, timed by `perf trace`, split per call into what is
 * on the call's path and what follows a write (bench/tools/mcp-segments.ts; meant for c=1).
 */
import { fork, spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, openSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gatewayNodeArgs, gatewayStartEnv } from '../lib/compiled.js';
import { cpuUs, minorFaults, threadCpuUs, type ThreadCpu } from '../lib/cpu.js';
import { DirectStdioServer } from '../lib/mcp-direct.js';
import { McpLoadSession, type LoadSession } from '../lib/mcp-load.js';
import { installPeers, servePeer, stopPeer, type PeerName } from '../lib/mcp-peers.js';
import { cpuOf, rssBytes, treePids } from '../lib/proc-tree.js';
import { formatResident, residentByKind } from '../lib/smaps.js';
import { gatewayEnv, ipcAsk } from '../lib/gateway-env.js';
import { ROOT } from '../lib/procs.js';
import { until } from '../scenarios/measure.js';
import { segmentsText } from './mcp-segments.js';

const args = process.argv.slice(2);
const nums = args.filter((a) => /^\d+$/.test(a)).map(Number);
/** --gateway-arg=<node flag>: given to the gateway process only (to measure a V8 flag; the start script is not changed). */
const STDOUT_FILE = args.find((a) => a.startsWith('--gateway-stdout='))?.slice('--gateway-stdout='.length);
const GATEWAY_ARGS = args.filter((a) => a.startsWith('--gateway-arg=')).map((a) => a.slice('--gateway-arg='.length));
/** --gateway-env=NAME=value (repeatable): an environment variable for the gateway process only (e.g. a malloc tunable). */
const GATEWAY_ENV = Object.fromEntries(
  args
    .filter((a) => a.startsWith('--gateway-env='))
    .map((a) => {
      const kv = a.slice('--gateway-env='.length);
      return [kv.slice(0, kv.indexOf('=')), kv.slice(kv.indexOf('=') + 1)];
    }),
);
/** --strace=<syscalls>: which syscalls --strace counts (default the reads and writes; e.g. brk,mmap,munmap,madvise). */
const STRACE_SET = args.find((a) => a.startsWith('--strace='))?.slice('--strace='.length) ?? 'write,writev,read,readv,epoll_wait';
const C = nums[0] ?? 50;
const CALLS = nums[1] ?? 3000;
const API_KEY = 'mcp-cpu-key-0123456789abcdef';
const EVERYTHING = join(ROOT, 'node_modules/@modelcontextprotocol/server-everything/dist/index.js');
const ECHO = { message: 'hello from the bench' };
/** --builtin: the gateway's calls go to a built-in tool (current_time) instead of server-everything, to tell the facade's
 * half of a call from the hosted server's; the peers and --direct still call echo. */
const BUILTIN = args.includes('--builtin');
const GATEWAY_TOOL = BUILTIN ? 'mcp__b__current_time' : 'mcp__everything__echo';
const argsFor = (tool: string) => (tool === 'mcp__b__current_time' ? {} : ECHO);

const PROBE = `import { PerformanceObserver } from 'node:perf_hooks';
import { Session } from 'node:inspector';
import { writeFileSync } from 'node:fs';
import { getHeapSpaceStatistics } from 'node:v8';
const KINDS = { 1: 'scavenge', 2: 'mark-compact', 4: 'incremental', 8: 'weak-cb', 16: 'minor-mc' };
let gcs = {};
new PerformanceObserver((l) => {
  for (const e of l.getEntries()) {
    const k = KINDS[e.detail?.kind ?? e.kind] ?? 'other';
    const g = (gcs[k] ??= { count: 0, ms: 0 });
    g.count++; g.ms += e.duration;
  }
}).observe({ entryTypes: ['gc'] });
let prof;
const post = (m, p = {}) => new Promise((ok, no) => prof.post(m, p, (e, r) => (e ? no(e) : ok(r))));
process.on('message', async (m) => {
  if (m.cmd === 'spaces') return process.send({ id: m.id, spaces: getHeapSpaceStatistics().filter((x) => x.space_size > 0).map((x) => x.space_name.replace('_space', '') + ' ' + (x.space_used_size / 2 ** 20).toFixed(1) + '/' + (x.space_size / 2 ** 20).toFixed(1)).join(', ') });
  if (m.cmd === 'reset') { gcs = {}; return process.send({ id: m.id }); }
  if (m.cmd === 'mark') { process.stdout.write('@@mcp-cpu ' + m.text + '\\n'); return process.send({ id: m.id }); }
  if (m.cmd === 'gc') { const out = gcs; globalThis.gc(); globalThis.gc(); return process.send({ id: m.id, gcs: out, mem: process.memoryUsage() }); }
  if (m.cmd === 'profile-start') {
    prof = new Session(); prof.connect(); await post('Profiler.enable'); await post('Profiler.setSamplingInterval', { interval: 200 }); await post('Profiler.start');
    return process.send({ id: m.id });
  }
  if (m.cmd === 'alloc-start') {
    prof = new Session(); prof.connect(); await post('HeapProfiler.enable');
    await post('HeapProfiler.startSampling', { samplingInterval: 1024, includeObjectsCollectedByMajorGC: true, includeObjectsCollectedByMinorGC: !m.survivors });
    return process.send({ id: m.id });
  }
  if (m.cmd === 'alloc-stop') {
    const { profile } = await post('HeapProfiler.stopSampling'); prof.disconnect(); writeFileSync(m.file, JSON.stringify(profile));
    return process.send({ id: m.id });
  }
  if (m.cmd === 'profile-stop') {
    const { profile } = await post('Profiler.stop'); prof.disconnect(); writeFileSync(m.file, JSON.stringify(profile));
    return process.send({ id: m.id });
  }
});
process.on('disconnect', () => process.kill(process.pid, 'SIGTERM'));`;

const MiB = (n: number) => Math.round((n / 2 ** 20) * 10) / 10;
const vmRss = (pid: number) => Number(/VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? NaN) * 1024;

/** `perSession` calls back to back on every session; resolves with the wall-clock seconds taken. */
async function drive(sessions: readonly LoadSession[], tool: string, perSession: number, lat?: number[]): Promise<number> {
  const t0 = performance.now();
  await Promise.all(
    sessions.map(async (s) => {
      for (let i = 0; i < perSession; i++) {
        const c0 = performance.now();
        await s.call(tool, argsFor(tool));
        lat?.push(performance.now() - c0);
      }
    }),
  );
  return (performance.now() - t0) / 1000;
}

/** This process's CPU (µs): the load generator's share of the machine. */
const selfCpuUs = () => {
  const u = process.cpuUsage();
  return u.user + u.system;
};

interface TreeWindow {
  calls: number;
  secs: number;
  /** CPU µs per call: the proxy process, the servers it started, this load generator. */
  proxy: number;
  server: number;
  load: number;
  /** Peak RSS in the window, bytes: the proxy process, its children together. */
  peakProxy: number;
  peakServer: number;
  /** The proxy's CPU per call by thread: main thread user, main thread system (syscalls), other threads (GC, compilers). */
  threads: ThreadCpu;
  /** The server(s)' CPU per call: main threads, other threads (a Node server's compilers and GC helpers). */
  serverThreads: { main: number; other: number };
  /** Every call's latency, ms. */
  lat: number[];
}

/** CPU µs of each thread of a process by thread id (all Node's threads are named `node`: V8's platform workers, which run
 * GC helpers and compilers, libuv's pool); the main thread as `(main)`. */
function threadsById(pid: number): Map<string, number> {
  const out = new Map<string, number>();
  let tids: string[] = [];
  try {
    tids = readdirSync(`/proc/${pid}/task`);
  } catch {
    return out;
  }
  for (const tid of tids) {
    try {
      const name = tid === String(pid) ? '(main)' : tid;
      const stat = readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8');
      const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      const us = ((Number(f[11]) + Number(f[12])) / 100) * 1e6; // USER_HZ, as bench/lib/cpu.ts assumes without getconf
      if (Number.isFinite(us)) out.set(name, (out.get(name) ?? 0) + us);
    } catch {
      /* the thread ended */
    }
  }
  return out;
}

/** A serving tree under load: the proxy process `root`, the servers it started, its sessions (open, warmed up). */
interface System {
  name: string;
  root: number;
  sessions: LoadSession[];
  tool: string;
}

/**
 * Measured windows on each system, in `slices` slices taken in turn (A B C A B C …) so that a neighbour's burst
 * on the shared machine lands on all alike; `perSession` calls per session in all.
 */
async function windows(systems: readonly System[], perSession: number, slices: number): Promise<Map<string, TreeWindow>> {
  const trees = systems.map((sys) => ({ sys, kids: treePids(sys.root).filter((p) => p !== sys.root) }));
  const out = new Map<string, TreeWindow>();
  for (const { sys } of trees)
    out.set(sys.name, {
      calls: 0,
      secs: 0,
      proxy: 0,
      server: 0,
      load: 0,
      peakProxy: 0,
      peakServer: 0,
      threads: { mainUser: 0, mainSys: 0, other: 0 },
      serverThreads: { main: 0, other: 0 },
      lat: [],
    });
  const sampler = setInterval(() => {
    for (const { sys, kids } of trees) {
      const w = out.get(sys.name)!;
      w.peakProxy = Math.max(w.peakProxy, rssBytes(sys.root));
      w.peakServer = Math.max(
        w.peakServer,
        kids.reduce((n, p) => n + rssBytes(p), 0),
      );
    }
  }, 100);
  for (let k = 0; k < slices; k++) {
    const each = Math.floor(perSession / slices) + (k < perSession % slices ? 1 : 0);
    for (const { sys, kids } of trees) {
      const w = out.get(sys.name)!;
      const [p0, k0, l0, t0, s0] = [cpuUs(sys.root), cpuOf(kids), selfCpuUs(), threadCpuUs(sys.root), serverThreadsUs(kids)];
      w.secs += await drive(sys.sessions, sys.tool, each, w.lat);
      const [p1, k1, l1, t1, s1] = [cpuUs(sys.root), cpuOf(kids), selfCpuUs(), threadCpuUs(sys.root), serverThreadsUs(kids)];
      w.serverThreads.main += s1.main - s0.main;
      w.serverThreads.other += s1.other - s0.other;
      w.calls += each * sys.sessions.length;
      [w.proxy, w.server, w.load] = [w.proxy + p1 - p0, w.server + k1 - k0, w.load + l1 - l0];
      w.threads.mainUser += t1.mainUser - t0.mainUser;
      w.threads.mainSys += t1.mainSys - t0.mainSys;
      w.threads.other += t1.other - t0.other;
    }
  }
  clearInterval(sampler);
  for (const w of out.values()) {
    [w.proxy, w.server, w.load] = [w.proxy / w.calls, w.server / w.calls, w.load / w.calls];
    w.threads = { mainUser: w.threads.mainUser / w.calls, mainSys: w.threads.mainSys / w.calls, other: w.threads.other / w.calls };
    w.serverThreads = { main: w.serverThreads.main / w.calls, other: w.serverThreads.other / w.calls };
  }
  return out;
}

/** The servers' main threads and their other threads together, µs. */
function serverThreadsUs(pids: readonly number[]): { main: number; other: number } {
  let [main, other] = [0, 0];
  for (const p of pids) {
    const t = threadCpuUs(p);
    if (Number.isFinite(t.mainUser)) [main, other] = [main + t.mainUser + t.mainSys, other + t.other];
  }
  return { main, other };
}

/** A window's latency distribution: quantiles, the mean, and how much of the time the calls above twice the median took beyond it. */
function latencyText(lat: readonly number[]): string {
  if (lat.length === 0) return 'no calls';
  const sorted = Float64Array.from(lat).sort();
  const q = (p: number) => sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))]!;
  const sum = lat.reduce((n, x) => n + x, 0);
  const p50 = q(0.5);
  const slow = lat.filter((x) => x > 2 * p50);
  const excess = slow.reduce((n, x) => n + x - p50, 0);
  const f = (x: number) => x.toFixed(2);
  return (
    `latency ms: p50 ${f(p50)}, p90 ${f(q(0.9))}, p99 ${f(q(0.99))}, max ${f(sorted[sorted.length - 1]!)}, mean ${f(sum / lat.length)} ` +
    `(${(sum / lat.length / p50).toFixed(2)}× p50); ${slow.length} calls over 2× p50 (${((100 * slow.length) / lat.length).toFixed(1)} %), ` +
    `their time beyond p50 ${((100 * excess) / sum).toFixed(1)} % of the window`
  );
}

function printWindow(name: string, w: TreeWindow): void {
  const r = Math.round;
  process.stdout.write(
    `tree ${name}, c=${C}: ${w.calls} calls, ${r(w.calls / w.secs)} calls/s; CPU µs/call proxy ${r(w.proxy)}, server(s) ${r(w.server)}, ` +
      `load generator ${r(w.load)}, all ${r(w.proxy + w.server + w.load)}; peak RSS proxy ${MiB(w.peakProxy)} + server(s) ${MiB(w.peakServer)} = ` +
      `${MiB(w.peakProxy + w.peakServer)} MiB\n  proxy by thread, µs/call: main user ${r(w.threads.mainUser)}, main system ${r(w.threads.mainSys)}, ` +
      `other threads ${r(w.threads.other)}; server(s): main threads ${r(w.serverThreads.main)}, other threads ${r(w.serverThreads.other)}\n` +
      `  ${latencyText(w.lat)}\n`,
  );
}

/** The /mcp bench's peers, each fronting its own server-everything, sessions open and warmed up; and how to stop them. */
async function startPeers(perSession: number): Promise<{ systems: System[]; stop: () => Promise<void> }> {
  const got = installPeers((m) => process.stdout.write(`${m}\n`));
  for (const n of got.notes) process.stdout.write(`peers: ${n}\n`);
  const systems: System[] = [];
  const children: ChildProcess[] = [];
  const stop = async () => {
    for (const sys of systems) await Promise.all(sys.sessions.map((s) => s.close().catch(() => undefined)));
    await Promise.all(children.map((c) => stopPeer(c)));
  };
  try {
    const only = args.find((a) => a.startsWith('--peers='))?.slice('--peers='.length);
    for (const name of (Object.keys(got.bins) as PeerName[]).filter((n) => only === undefined || only.split(',').includes(n))) {
      const answers = (url: URL) => probe(() => new McpLoadSession(url), 'echo');
      const { child, url } = await servePeer(name, got.bins[name]!, [process.execPath, EVERYTHING, 'stdio'], answers, 60_000);
      children.push(child);
      const sessions = Array.from({ length: C }, () => new McpLoadSession(url));
      await Promise.all(sessions.map((s) => s.open()));
      await warm(sessions, () => new McpLoadSession(url), 'echo', perSession);
      systems.push({ name, root: child.pid!, sessions, tool: 'echo' });
    }
  } catch (e) {
    await stop();
    throw e;
  }
  return { systems, stop };
}

/** One session opened, one call, the session deleted: true when all of it worked. */
async function probe(newSession: () => LoadSession, tool: string): Promise<boolean> {
  const s = newSession();
  try {
    await s.open();
    await s.call(tool, argsFor(tool));
    return true;
  } finally {
    await s.close().catch(() => undefined);
  }
}

async function direct(perSession: number): Promise<void> {
  const server = new DirectStdioServer([process.execPath, EVERYTHING, 'stdio']);
  try {
    await server.open();
    const sessions = Array.from({ length: C }, () => server.session());
    await warm(sessions, () => server.session(), 'echo', perSession);
    const cpu0 = cpuUs(server.pid);
    const s = await drive(sessions, 'echo', perSession);
    const n = perSession * C;
    process.stdout.write(`direct stdio, c=${C}: ${n} calls, ${Math.round(n / s)} calls/s; server ${Math.round((cpuUs(server.pid) - cpu0) / n)} µs CPU/call\n`);
  } finally {
    await server.stop();
  }
}

async function gateway(perSession: number, others: readonly System[], slices: number): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'voxgate-mcp-cpu-'));
  const { env, httpPort: port } = await gatewayEnv({ dataDir: dir, apiKey: API_KEY, configFile: join(dir, 'config.json') });
  writeFileSync(
    join(dir, 'config.json'),
    JSON.stringify({
      mcp: { servers: { everything: { command: process.execPath, args: [EVERYTHING] }, ...(BUILTIN ? { b: { tools: ['current_time'] } } : {}) } },
    }),
  );
  const child = fork(join(process.env['MCPCPU_ROOT'] ?? ROOT, 'gateway/dist/main.js'), [], {
    cwd: ROOT,
    execArgv: ['--expose-gc', ...gatewayNodeArgs(), ...GATEWAY_ARGS, '--import', `data:text/javascript,${encodeURIComponent(PROBE)}`],
    env: { ...process.env, ...gatewayStartEnv(), ...env, ...GATEWAY_ENV },
    // --gateway-stdout=<file>: what the gateway prints (e.g. a V8 trace asked for with --gateway-arg) goes there.
    stdio: ['ignore', STDOUT_FILE === undefined ? 'ignore' : openSync(STDOUT_FILE, 'w'), 'inherit', 'ipc'],
  });
  const ask = ipcAsk(child);
  const url = new URL(`http://127.0.0.1:${port}/mcp`);
  const newSession = () => new McpLoadSession(url, { authorization: `Bearer ${API_KEY}` });
  try {
    await until('ready', async () => (await fetch(`http://127.0.0.1:${port}/readyz`)).status === 200, 60_000, 200);
    await until('server-everything', () => probe(newSession, 'mcp__everything__echo'), 60_000, 200);
    if (BUILTIN) await until('the built-in tool', () => probe(newSession, GATEWAY_TOOL), 60_000, 200);
    await new Promise((r) => setTimeout(r, 1000));
    const idle = vmRss(child.pid!);
    const mapsIdle = residentByKind(child.pid!);
    const spacesIdle = (await ask<{ spaces: string }>({ cmd: 'spaces' })).spaces;
    const sessions = Array.from({ length: C }, newSession);
    await Promise.all(sessions.map((s) => s.open()));
    await warm(sessions, newSession, GATEWAY_TOOL, perSession);
    await ask({ cmd: 'reset' });
    await ask({ cmd: 'mark', text: 'window start' });
    mkdirSync(join(ROOT, 'bench/results/prof'), { recursive: true }); // the probe writes there; a missing folder hung the run
    if (args.includes('--profile')) await ask({ cmd: 'profile-start' });
    if (args.includes('--alloc') || args.includes('--survivors')) await ask({ cmd: 'alloc-start', survivors: args.includes('--survivors') });
    // --strace: the gateway's syscalls in the window, counted (strace -c), to compare writes per call.
    const strace = args.some((a) => a === '--strace' || a.startsWith('--strace='))
      ? spawn('strace', ['-c', '-f', '-e', `trace=${STRACE_SET}`, '-p', String(child.pid)], { stdio: ['ignore', 'ignore', 'pipe'] })
      : undefined;
    const straceOut: Buffer[] = [];
    strace?.stderr.on('data', (d: Buffer) => straceOut.push(d));
    if (strace) await new Promise((r) => setTimeout(r, 500));
    // --segments: the gateway main thread's timed reads and writes in the window (perf trace; bench/tools/mcp-segments.ts).
    const perfFile = join(dir, 'perf-trace.txt');
    const perf = args.includes('--segments')
      ? spawn('perf', ['trace', '-t', String(child.pid), '-e', 'read,write,writev,epoll_pwait,epoll_wait', '-o', perfFile], { stdio: 'ignore' })
      : undefined;
    if (perf) await new Promise((r) => setTimeout(r, 1500));
    const byName0 = threadsById(child.pid!);
    const minflt0 = minorFaults(child.pid!);
    const all = await windows([{ name: 'voxgate', root: child.pid!, sessions, tool: GATEWAY_TOOL }, ...others], perSession, slices);
    await ask({ cmd: 'mark', text: 'window end' });
    const w = all.get('voxgate')!;
    const mapsLoaded = residentByKind(child.pid!);
    const spacesLoaded = (await ask<{ spaces: string }>({ cmd: 'spaces' })).spaces;
    if (strace) {
      strace.kill('SIGINT');
      await new Promise((r) => strace.once('exit', r));
      process.stdout.write(`gateway syscalls in the window (${perSession * C} calls):\n${Buffer.concat(straceOut).toString()}`);
    }
    if (perf) {
      perf.kill('SIGINT');
      await new Promise((r) => perf.once('exit', r));
      process.stdout.write(segmentsText(readFileSync(perfFile, 'utf8')));
    }
    if (args.includes('--profile')) await ask({ cmd: 'profile-stop', file: join(ROOT, 'bench/results/prof/mcp-cpu.cpuprofile') });
    if (args.includes('--alloc') || args.includes('--survivors')) {
      const file = join(ROOT, 'bench/results/prof/mcp-cpu.heapprofile');
      await ask({ cmd: 'alloc-stop', file });
      printAllocations(file, perSession * C);
    }
    const n = perSession * C;
    const { gcs, mem } = await ask<{ gcs: Record<string, { count: number; ms: number }>; mem: NodeJS.MemoryUsage }>({ cmd: 'gc' });
    const gcText = Object.entries(gcs)
      .map(([k, g]) => `${k} ${g.count}× ${Math.round(g.ms)} ms`)
      .join(', ');
    process.stdout.write(
      `voxgate /mcp, c=${C}: ${n} calls, ${Math.round(n / w.secs)} calls/s; gateway ${Math.round(w.proxy)} µs CPU/call, hosted server ` +
        `${Math.round(w.server)} µs; GC in the window: ${gcText}; heap after GC ${MiB(mem.heapUsed)} MiB (sessions open)\n`,
    );
    for (const [name, pw] of all) printWindow(name, pw);
    if (STDOUT_FILE !== undefined) process.stdout.write(traceCounts(STDOUT_FILE, n));
    const byName1 = threadsById(child.pid!);
    process.stdout.write(`  gateway minor page faults per call: ${((minorFaults(child.pid!) - minflt0) / n).toFixed(2)}\n`);
    const threadText = [...byName1]
      .map(([k, v]) => [k, (v - (byName0.get(k) ?? 0)) / n] as const)
      .filter(([, v]) => v >= 1)
      .sort((a, b) => b[1] - a[1])
      .map(([k, v]) => `${k} ${Math.round(v)}`)
      .join(', ');
    process.stdout.write(`  gateway threads by id, µs/call: ${threadText}\n`);
    await Promise.all(sessions.map((s) => s.close()));
    await new Promise((r) => setTimeout(r, 2000));
    const after = vmRss(child.pid!);
    const mapsAfter = residentByKind(child.pid!);
    const spacesAfter = (await ask<{ spaces: string }>({ cmd: 'spaces' })).spaces;
    const { mem: memAfter } = await ask<{ mem: NodeJS.MemoryUsage }>({ cmd: 'gc' });
    process.stdout.write(
      `  RSS: idle ${MiB(idle)}, peak ${MiB(w.peakProxy)}, 2 s after every session was deleted ${MiB(after)} MiB (heap after GC ${MiB(memAfter.heapUsed)} MiB)\n`,
    );
    process.stdout.write(
      `  resident by kind: idle ${formatResident(mapsIdle)}\n    end of the window ${formatResident(mapsLoaded)}\n    after ${formatResident(mapsAfter)}\n`,
    );
    process.stdout.write(`  V8 heap spaces, used/committed MiB (no GC): idle ${spacesIdle}\n    end of the window ${spacesLoaded}\n    after ${spacesAfter}\n`);
  } finally {
    child.kill('SIGTERM');
    await new Promise((r) => child.once('exit', r));
    rmSync(dir, { recursive: true, force: true });
  }
}

/**
 * What a V8 trace (--gateway-arg=--trace-opt, --trace-deopt, --trace-gc-nvp, printed to --gateway-stdout) holds between
 * the probe's window marks: optimizations finished, deoptimizations, collections by kind and their pauses.
 */
function traceCounts(file: string, calls: number): string {
  const text = readFileSync(file, 'utf8');
  const from = text.indexOf('@@mcp-cpu window start');
  const to = text.indexOf('@@mcp-cpu window end');
  if (from < 0 || to < 0) return '  trace: no window marks in the gateway output\n';
  const lines = text.slice(from, to).split('\n');
  const count = (re: RegExp) => lines.filter((l) => re.test(l)).length;
  const gcs = new Map<string, { n: number; pause: number }>();
  // Scavenges' promoted and surviving bytes (--trace-gc-nvp's `promoted=` and `new_space_survived=`): what a call
  // leaves alive past a young collection, which does not move with the machine's load (issue 21, `mcpc1c`).
  let promoted = 0;
  let survived = 0;
  const field = (l: string, name: string) => Number(new RegExp(`\\b${name}=(\\d+)`).exec(l)?.[1] ?? 0);
  for (const l of lines) {
    const kind = /\bgc=(\w+)/.exec(l)?.[1];
    if (kind === undefined) continue;
    const g = gcs.get(kind) ?? { n: 0, pause: 0 };
    gcs.set(kind, { n: g.n + 1, pause: g.pause + Number(/\bpause=([\d.]+)/.exec(l)?.[1] ?? 0) });
    if (kind === 's') {
      promoted += field(l, 'promoted');
      survived += field(l, 'new_space_survived');
    }
  }
  const gcText = [...gcs].map(([k, g]) => `${k} ${g.n}× (pause ${g.pause.toFixed(1)} ms)`).join(', ') || 'none traced';
  const scavenges = gcs.get('s')?.n ?? 0;
  const youngText = scavenges
    ? `; scavenges promoted ${Math.round(promoted / calls)} B per call, survived ${Math.round(survived / scavenges / 1024)} KB per scavenge`
    : '';
  return (
    `  trace in the window (${calls} calls): optimized ${count(/^\[completed optimizing/)}, marked ${count(/^\[marking .* for optimization/)}, ` +
    `deoptimized ${count(/^\[bailout \(kind: deopt/)}; GC (--trace-gc-nvp): ${gcText}${youngText}\n`
  );
}

interface AllocNode {
  callFrame: { functionName: string; url: string; lineNumber: number };
  selfSize: number;
  children: AllocNode[];
}

/** Bytes allocated per call by function (self), and by package, from a sampling heap profile. */
function printAllocations(file: string, calls: number): void {
  const { head } = JSON.parse(readFileSync(file, 'utf8')) as { head: AllocNode };
  const byFn = new Map<string, number>();
  const byPkg = new Map<string, number>();
  let total = 0;
  const walk = (n: AllocNode) => {
    const url = n.callFrame.url.replace(/^.*node_modules\//, 'nm/').replace(/^file:\/\/.*\/gateway\/dist\//, 'gw/');
    const key = `${n.callFrame.functionName || '(anonymous)'}  ${url}:${n.callFrame.lineNumber + 1}`;
    byFn.set(key, (byFn.get(key) ?? 0) + n.selfSize);
    const pkg = url.startsWith('nm/')
      ? url
          .split('/')
          .slice(1, url.split('/')[1]!.startsWith('@') ? 3 : 2)
          .join('/')
      : url.split('/')[0] || '(native)';
    byPkg.set(pkg, (byPkg.get(pkg) ?? 0) + n.selfSize);
    total += n.selfSize;
    n.children.forEach(walk);
  };
  walk(head);
  process.stdout.write(`allocated (sampled): ${Math.round(total / calls)} B per call; by package:\n`);
  for (const [k, v] of [...byPkg].sort((a, b) => b[1] - a[1]).slice(0, 15)) process.stdout.write(`  ${String(Math.round(v / calls)).padStart(7)} B  ${k}\n`);
  process.stdout.write('by function (self):\n');
  for (const [k, v] of [...byFn].sort((a, b) => b[1] - a[1]).slice(0, 30)) process.stdout.write(`  ${String(Math.round(v / calls)).padStart(7)} B  ${k}\n`);
}

const perSession = Math.max(1, Math.round(CALLS / C));
/**
 * The warm-up before the window: --warm=<calls> in all (default: a fifth of the window's), on the window's sessions,
 * or with --warm-c=<k> on k sessions of its own, closed afterwards (to warm at another concurrency than the window's).
 */
async function warm(sessions: readonly LoadSession[], newSession: () => LoadSession, tool: string, perSession: number): Promise<void> {
  const calls = args.find((a) => a.startsWith('--warm='))?.slice('--warm='.length);
  const k = Number(args.find((a) => a.startsWith('--warm-c='))?.slice('--warm-c='.length) ?? C);
  const total = calls === undefined ? Math.max(1, Math.floor(perSession / 5)) * C : Number(calls);
  if (k === C) return void (await drive(sessions, tool, Math.max(1, Math.round(total / C))));
  const own = Array.from({ length: k }, newSession);
  try {
    await Promise.all(own.map((s) => s.open()));
    await drive(own, tool, Math.max(1, Math.round(total / k)));
  } finally {
    await Promise.all(own.map((s) => s.close().catch(() => undefined)));
  }
}
if (args.includes('--direct')) await direct(perSession);
if (args.some((a) => a === '--peers' || a.startsWith('--peers='))) {
  const peers = await startPeers(perSession);
  try {
    await gateway(perSession, peers.systems, 4);
  } finally {
    await peers.stop();
  }
} else await gateway(perSession, [], 1);
