/**
 * The /mcp path's cost per call, for before/after comparisons that hold on a busy machine (issue 21):
 *   npm run build && nice -n 10 npx tsx bench/tools/mcp-cpu.ts [concurrency=50] [calls=3000] [--direct] [--profile]
 * Starts the compiled gateway hosting server-everything over stdio (the /mcp bench's config), opens
 * `concurrency` sessions, warms up, then makes `calls` tools/call of `echo` back to back per session and prints
 * the gateway's process CPU per call (utime + stime), the hosted server's, the gateway's garbage collections
 * in the window (count and pause time, by kind), its heap after GC, and its RSS before, at the peak and after
 * every session was deleted. --direct also drives a server-everything of its own on its pipe (no proxy), the
 * same calls, for the server's own CPU per call and rate. --profile writes the gateway's CPU profile of the
 * window to bench/results/prof/mcp-cpu.cpuprofile (read it with bench/tools/top-self.ts). MCPCPU_ROOT=<dir> runs
 * <dir>/gateway/dist/main.js instead (a copy of another build, for alternating before/after runs). The gateway gets the
 * node options package.json's start gives it (VOXGATE_GATEWAY_NODE_ARGS replaces them: bench/lib/compiled.ts).
 */
import { fork, spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gatewayNodeArgs } from '../lib/compiled.js';
import { cpuUs } from '../lib/cpu.js';
import { DirectStdioServer } from '../lib/mcp-direct.js';
import { McpLoadSession, type LoadSession } from '../lib/mcp-load.js';
import { treePids } from '../lib/proc-tree.js';
import { gatewayEnv, ipcAsk } from '../lib/gateway-env.js';
import { ROOT } from '../lib/procs.js';
import { until } from '../scenarios/measure.js';

const args = process.argv.slice(2);
const nums = args.filter((a) => /^\d+$/.test(a)).map(Number);
const C = nums[0] ?? 50;
const CALLS = nums[1] ?? 3000;
const API_KEY = 'mcp-cpu-key-0123456789abcdef';
const EVERYTHING = join(ROOT, 'node_modules/@modelcontextprotocol/server-everything/dist/index.js');
const ECHO = { message: 'hello from the bench' };

const PROBE = `import { PerformanceObserver } from 'node:perf_hooks';
import { Session } from 'node:inspector';
import { writeFileSync } from 'node:fs';
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
  if (m.cmd === 'reset') { gcs = {}; return process.send({ id: m.id }); }
  if (m.cmd === 'gc') { const out = gcs; globalThis.gc(); globalThis.gc(); return process.send({ id: m.id, gcs: out, mem: process.memoryUsage() }); }
  if (m.cmd === 'profile-start') {
    prof = new Session(); prof.connect(); await post('Profiler.enable'); await post('Profiler.setSamplingInterval', { interval: 200 }); await post('Profiler.start');
    return process.send({ id: m.id });
  }
  if (m.cmd === 'alloc-start') {
    prof = new Session(); prof.connect(); await post('HeapProfiler.enable');
    await post('HeapProfiler.startSampling', { samplingInterval: 1024, includeObjectsCollectedByMajorGC: true, includeObjectsCollectedByMinorGC: true });
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
async function drive(sessions: readonly LoadSession[], tool: string, perSession: number): Promise<number> {
  const t0 = performance.now();
  await Promise.all(
    sessions.map(async (s) => {
      for (let i = 0; i < perSession; i++) await s.call(tool, ECHO);
    }),
  );
  return (performance.now() - t0) / 1000;
}

async function direct(perSession: number): Promise<void> {
  const server = new DirectStdioServer([process.execPath, EVERYTHING, 'stdio']);
  try {
    await server.open();
    const sessions = Array.from({ length: C }, () => server.session());
    await drive(sessions, 'echo', Math.max(1, Math.floor(perSession / 5)));
    const cpu0 = cpuUs(server.pid);
    const s = await drive(sessions, 'echo', perSession);
    const n = perSession * C;
    process.stdout.write(`direct stdio, c=${C}: ${n} calls, ${Math.round(n / s)} calls/s; server ${Math.round((cpuUs(server.pid) - cpu0) / n)} µs CPU/call\n`);
  } finally {
    await server.stop();
  }
}

async function gateway(perSession: number): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'voxgate-mcp-cpu-'));
  const { env, httpPort: port } = await gatewayEnv({ dataDir: dir, apiKey: API_KEY, configFile: join(dir, 'config.json') });
  writeFileSync(join(dir, 'config.json'), JSON.stringify({ mcp: { servers: { everything: { command: process.execPath, args: [EVERYTHING] } } } }));
  const child = fork(join(process.env['MCPCPU_ROOT'] ?? ROOT, 'gateway/dist/main.js'), [], {
    cwd: ROOT,
    execArgv: ['--expose-gc', ...gatewayNodeArgs(), '--import', `data:text/javascript,${encodeURIComponent(PROBE)}`],
    env: { ...process.env, ...env },
    stdio: ['ignore', 'ignore', 'inherit', 'ipc'],
  });
  const ask = ipcAsk(child);
  const url = new URL(`http://127.0.0.1:${port}/mcp`);
  const newSession = () => new McpLoadSession(url, { authorization: `Bearer ${API_KEY}` });
  try {
    await until('ready', async () => (await fetch(`http://127.0.0.1:${port}/readyz`)).status === 200, 60_000, 200);
    await until(
      'server-everything',
      async () => {
        const s = newSession();
        try {
          await s.open();
          await s.call('mcp__everything__echo', ECHO);
          return true;
        } finally {
          await s.close().catch(() => undefined);
        }
      },
      60_000,
      200,
    );
    await new Promise((r) => setTimeout(r, 1000));
    const idle = vmRss(child.pid!);
    const sessions = Array.from({ length: C }, newSession);
    await Promise.all(sessions.map((s) => s.open()));
    await drive(sessions, 'mcp__everything__echo', Math.max(1, Math.floor(perSession / 5)));
    const serverPid = treePids(child.pid!).find((p) => p !== child.pid)!;
    await ask({ cmd: 'reset' });
    mkdirSync(join(ROOT, 'bench/results/prof'), { recursive: true }); // the probe writes there; a missing folder hung the run
    if (args.includes('--profile')) await ask({ cmd: 'profile-start' });
    if (args.includes('--alloc')) await ask({ cmd: 'alloc-start' });
    // --strace: the gateway's syscalls in the window, counted (strace -c), to compare writes per call.
    const strace = args.includes('--strace')
      ? spawn('strace', ['-c', '-f', '-e', 'trace=write,writev,read,readv,epoll_wait', '-p', String(child.pid)], { stdio: ['ignore', 'ignore', 'pipe'] })
      : undefined;
    const straceOut: Buffer[] = [];
    strace?.stderr.on('data', (d: Buffer) => straceOut.push(d));
    if (strace) await new Promise((r) => setTimeout(r, 500));
    let peak = 0;
    const sampler = setInterval(() => (peak = Math.max(peak, vmRss(child.pid!))), 100);
    const [g0, s0] = [cpuUs(child.pid), cpuUs(serverPid)];
    const secs = await drive(sessions, 'mcp__everything__echo', perSession);
    const [g1, s1] = [cpuUs(child.pid), cpuUs(serverPid)];
    clearInterval(sampler);
    if (strace) {
      strace.kill('SIGINT');
      await new Promise((r) => strace.once('exit', r));
      process.stdout.write(`gateway syscalls in the window (${perSession * C} calls):\n${Buffer.concat(straceOut).toString()}`);
    }
    if (args.includes('--profile')) await ask({ cmd: 'profile-stop', file: join(ROOT, 'bench/results/prof/mcp-cpu.cpuprofile') });
    if (args.includes('--alloc')) {
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
      `voxgate /mcp, c=${C}: ${n} calls, ${Math.round(n / secs)} calls/s; gateway ${Math.round((g1 - g0) / n)} µs CPU/call, hosted server ` +
        `${Math.round((s1 - s0) / n)} µs; GC in the window: ${gcText}; heap after GC ${MiB(mem.heapUsed)} MiB (sessions open)\n`,
    );
    await Promise.all(sessions.map((s) => s.close()));
    await new Promise((r) => setTimeout(r, 2000));
    const after = vmRss(child.pid!);
    const { mem: memAfter } = await ask<{ mem: NodeJS.MemoryUsage }>({ cmd: 'gc' });
    process.stdout.write(
      `  RSS: idle ${MiB(idle)}, peak ${MiB(peak)}, 2 s after every session was deleted ${MiB(after)} MiB (heap after GC ${MiB(memAfter.heapUsed)} MiB)\n`,
    );
  } finally {
    child.kill('SIGTERM');
    await new Promise((r) => child.once('exit', r));
    rmSync(dir, { recursive: true, force: true });
  }
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
if (args.includes('--direct')) await direct(perSession);
await gateway(perSession);
