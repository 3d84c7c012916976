/**
 * The saturated voice relay row alone, gateway and bare relay alternating, judged by what load does not move:
 * process CPU per relayed frame (/proc/<pid>/stat), garbage collections per 1 000 frames and the bytes allocated per
 * frame (V8's sampling heap profiler, freed objects included: bench/tools/alloc-probe.ts), with the top allocation
 * sites of each side.
 *   node --conditions=voxgate-source --import tsx bench/tools/voice-cpu.ts [rounds=3] [seconds=4] [ws|udp] [--alloc] [--profile]
 * `--alloc`: one more round per side with the heap sampler on (it costs CPU, so the CPU rounds run without it).
 * `--dist`: the compiled gateway (gateway/dist/main.js) instead of its sources under tsx.
 * `--strace`: one more round per side under `strace -c -f`, for the system calls per frame.
 * `--profile`: a CPU profile of each side's last CPU round, in bench/results/prof/voice-cpu-{gateway,relay}.cpuprofile.
 * `--paced`: the warm round is the bench's paced row instead (100 devices, one frame each per 60 ms, 5 s), as the bench
 *   runs before its saturated row.
 * `--paced-only`: every round (the warm one and the measured ones) paced, none saturated; `--devices=N`: the paced
 *   rounds' devices (default 100; 400 is where frames were lost during full collections). Each round prints the
 *   kernel's UDP receive-buffer drops (`RcvbufErrors` in /proc/net/snmp, the whole machine's) during it.
 * VC_GATEWAY_ARGS / VC_RELAY_ARGS: node options for the gateway's / the bare relay's process (space-separated); the
 *   gateway's come after those it ships with (bench/lib/compiled.ts, which VOXGATE_GATEWAY_NODE_ARGS replaces).
 * VC_GATEWAY_ENV: environment variables for the gateway's process only (`NAME=value NAME2=value`, e.g. a malloc tunable).
 * `--gc`: as the bench's rows do (their memory reading), forced garbage collections in each process once every session
 *   is open, just before the measured frames.
 */
import { fork, spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { gatewayNodeArgs, gatewayStartEnv } from '../lib/compiled.js';
import { cpuUs } from '../lib/cpu.js';
import { rssBytes } from '../lib/proc-tree.js';
import { gatewayEnv, voiceRelayEnv } from '../lib/gateway-env.js';
import { Proc, ROOT, spawnTs, stopAll, type Reply } from '../lib/procs.js';
import { runVoiceLoad } from '../lib/voice.js';
import { API_KEY } from '../scenarios/bench.js';
import { count, metric, until } from '../scenarios/measure.js';
import { MEMORY_PROBE_IMPORT } from '../procs/ipc.js';
import { ALLOC_PROBE_URL } from './alloc-probe.js';
import { PROBE_JS } from './heap-probe.js';

/** CPU µs of the main thread of `pid` and of its other threads (GC helpers, compilers, libuv's pool). */
function threadCpu(pid: number | undefined): Map<string, number> {
  const out = new Map<string, number>();
  for (const tid of readdirSync(`/proc/${pid}/task`)) {
    try {
      const stat = readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8');
      const name = tid === String(pid) ? 'main' : 'other threads';
      const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      out.set(name, (out.get(name) ?? 0) + (Number(f[11]) + Number(f[12])) * 1e4);
      if (tid === String(pid)) {
        out.set('main user', Number(f[11]) * 1e4);
        out.set('main sys', Number(f[12]) * 1e4);
        // Counts, not µs: the main thread's page faults and context switches (woken from epoll, or preempted).
        out.set('#minflt', Number(f[7]));
        const status = readFileSync(`/proc/${pid}/task/${tid}/status`, 'utf8');
        out.set('#wakeups', Number(/voluntary_ctxt_switches:\s+(\d+)/.exec(status)?.[1] ?? NaN));
        out.set('#preempted', Number(/nonvoluntary_ctxt_switches:\s+(\d+)/.exec(status)?.[1] ?? NaN));
      }
    } catch {
      /* the thread ended */
    }
  }
  return out;
}

const args = process.argv.slice(2);
const flags = new Set(args.filter((a) => a.startsWith('--')));
const [rounds = 3, seconds = 4] = args.filter((a) => /^\d/.test(a)).map(Number);
const transport = args.includes('udp') ? ('udp' as const) : ('ws' as const);
const probes = ['--import', ALLOC_PROBE_URL, '--import', `data:text/javascript,${encodeURIComponent(PROBE_JS)}`];
const profDir = join(ROOT, 'bench/results/prof');
const pacedDevices = Number(args.find((a) => a.startsWith('--devices='))?.slice('--devices='.length) ?? 100);

/** The kernel's count of UDP datagrams dropped for a full receive buffer (all sockets of the machine). */
function udpRcvbufErrors(): number {
  const udp = readFileSync('/proc/net/snmp', 'utf8')
    .split('\n')
    .filter((l) => l.startsWith('Udp: '));
  const [names, values] = udp.map((l) => l.split(/\s+/));
  return Number(values?.[names?.indexOf('RcvbufErrors') ?? -1] ?? NaN);
}

const dataDir = mkdtempSync(join(tmpdir(), 'voxgate-voice-cpu-'));
writeFileSync(join(dataDir, 'config.json'), '{}');
try {
  const voiceServer = spawnTs('voice-server', 'bench/floors/voice-server.ts');
  const upstreamUrl = (await voiceServer.hello)['url'] as string;
  const base = await gatewayEnv({ dataDir, apiKey: API_KEY, configFile: join(dataDir, 'config.json') });
  const { httpPort, mqttPort } = base;
  const voiceEnv = {
    ...base.env,
    ...voiceRelayEnv(upstreamUrl),
    ...gatewayStartEnv(),
    ...Object.fromEntries(
      (process.env['VC_GATEWAY_ENV'] ?? '')
        .split(' ')
        .filter(Boolean)
        .map((kv) => [kv.slice(0, kv.indexOf('=')), kv.slice(kv.indexOf('=') + 1)]),
    ),
  };
  const gatewayArgs = [...gatewayNodeArgs(), ...probes, ...(process.env['VC_GATEWAY_ARGS'] ?? '').split(' ').filter(Boolean)];
  // --dist: the compiled gateway as `npm start` runs it (build it first: npx tsc -b tsconfig.build.json).
  const gateway = flags.has('--dist')
    ? new Proc(
        'voice-gateway',
        fork(ROOT + 'gateway/dist/main.js', [], {
          cwd: ROOT,
          // The bench's memory probe ({cmd:'mem'}), which the sources' entry (bench/procs/gateway.ts) serves itself.
          execArgv: ['--expose-gc', ...gatewayArgs, '--import', MEMORY_PROBE_IMPORT],
          env: { ...process.env, ...voiceEnv },
          stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
          serialization: 'json',
        }),
      )
    : spawnTs('voice-gateway', 'bench/procs/gateway.ts', { env: voiceEnv, nodeArgs: gatewayArgs });
  const relay = spawnTs('voice-relay', 'bench/floors/voice-relay.ts', {
    env: { VOICE_UPSTREAM_URL: upstreamUrl },
    nodeArgs: [...probes, ...(process.env['VC_RELAY_ARGS'] ?? '').split(' ').filter(Boolean)],
  });
  const relayHello = await relay.hello;
  const gwUrl = `http://127.0.0.1:${httpPort}`;
  await until('the gateway', async () => (await fetch(`${gwUrl}/readyz`).catch(() => undefined))?.status === 200, 60_000, 100);
  const targets = {
    gateway: transport === 'ws' ? { url: `ws://127.0.0.1:${httpPort}/xiaozhi/v1/`, expectMcp: true } : { url: `mqtt://127.0.0.1:${mqttPort}`, expectMcp: true },
    relay:
      transport === 'ws'
        ? { url: `ws://127.0.0.1:${String(relayHello['port'])}/xiaozhi/v1/`, expectMcp: false }
        : { url: `mqtt://127.0.0.1:${String(relayHello['mqttPort'])}`, expectMcp: false },
  };
  let macGroup = 0;
  const one = async (side: 'gateway' | 'relay', proc: Proc, mode: 'warm' | 'cpu' | 'alloc' | 'profile' | 'strace') => {
    const paced = (mode === 'warm' && flags.has('--paced')) || flags.has('--paced-only');
    const drops0 = udpRcvbufErrors();
    let c0 = NaN;
    let t0 = new Map<string, number>();
    let strace: ChildProcess | undefined;
    const straceOut: string[] = [];
    const load0 = loadavg()[0]!;
    const r = await runVoiceLoad({
      transport,
      ...targets[side],
      version: 1,
      devices: paced ? pacedDevices : 10,
      pace: paced ? 'paced' : 'saturate',
      window: paced ? 1 : 8,
      seconds: paced && !flags.has('--paced-only') ? 5 : seconds,
      macGroup: macGroup++,
      connectTimeoutMs: 30_000,
      drainMs: 5_000,
      whenOpen: async () => {
        if (flags.has('--gc')) await proc.request({ cmd: 'mem' }, 30_000);
        await proc.request({ cmd: 'alloc-start', sample: mode === 'alloc' });
        if (mode === 'profile') await proc.request({ cmd: 'profile' });
        if (mode === 'strace') {
          strace = spawn('strace', ['-c', '-f', '-p', String(proc.child.pid)], { stdio: ['ignore', 'ignore', 'pipe'] });
          strace.stderr!.on('data', (d: Buffer) => straceOut.push(d.toString()));
          await new Promise((r) => setTimeout(r, 500));
        }
        c0 = cpuUs(proc.child.pid);
        t0 = threadCpu(proc.child.pid);
      },
    });
    const cpu = cpuUs(proc.child.pid) - c0;
    const threads = [...threadCpu(proc.child.pid)]
      .map(([k, v]) => [k, (v - (t0.get(k) ?? 0)) / r.received] as const)
      .filter(([k, v]) => v >= 0.5 || k.startsWith('#'))
      .map(([k, v]) => (k.startsWith('#') ? `${k.slice(1)} ${(v * 1000).toFixed(0)}/1k frames` : `${k} ${v.toFixed(1)}`))
      .join(', ');
    let extra = `\n  threads (µs/frame): ${threads}`;
    if (strace) {
      const done = new Promise((r) => strace!.once('close', r));
      strace.kill('SIGINT');
      await done;
      const lines = straceOut
        .join('')
        .split('\n')
        .filter((l) => /^\s*[\d.]+\s+[\d.]+\s+\d+\s+\d+/.test(l));
      extra +=
        `\n  syscalls per 1 000 frames (${r.received} frames): ` +
        lines
          .map((l) => l.trim().split(/\s+/))
          .map((f) => [f[f.length - 1]!, Number(f[3])] as const)
          .filter(([, n]) => (n * 1000) / r.received >= 1)
          .map(([name, n]) => `${name} ${((n * 1000) / r.received).toFixed(0)}`)
          .join(', ');
    }
    {
      const a = await proc.request<
        Reply & { gc: Record<string, { count: number; ms: number }>; oldGrowth: number; bytes: number; top: Array<[string, number]> }
      >({
        cmd: 'alloc-stop',
        top: 14,
      });
      const gcs = Object.entries(a.gc).map(
        ([k, g]) => `${k} ${((g.count * 1000) / r.received).toFixed(2)}/1k frames ${((g.ms * 1000) / r.received).toFixed(2)} µs/frame`,
      );
      extra += `  gc: ${gcs.join(', ')}; old space ${(a.oldGrowth / r.received).toFixed(1)} B/frame`;
      if (mode === 'alloc')
        extra +=
          `\n  allocated ~${(a.bytes / r.received).toFixed(0)} B/frame\n` +
          a.top.map(([site, b]) => `    ${(b / r.received).toFixed(1).padStart(7)} B/frame  ${site}`).join('\n');
    }
    if (mode === 'profile') {
      mkdirSync(profDir, { recursive: true });
      await proc.request({ cmd: 'profile', file: join(profDir, `voice-cpu-${side}.cpuprofile`) });
    }
    const load = `${load0.toFixed(1)}→${loadavg()[0]!.toFixed(1)}`;
    console.log(
      `${mode.padEnd(7)} ${side.padEnd(7)} ${(cpu / r.received).toFixed(1).padStart(6)} µs/frame  ${r.perSecond.toFixed(0).padStart(6)} frames/s  ` +
        `lost ${r.lost} corrupt ${r.corrupt}  udp drops ${udpRcvbufErrors() - drops0}  load ${load}  rss ${(rssBytes(proc.child.pid!) / 2 ** 20).toFixed(0)} MiB${extra}`,
    );
    if (side === 'gateway') await until('gateway sessions to end', async () => (await metric(gwUrl, 'voxgate_voice_sessions_active')) === 0, 30_000, 50);
    else await until('relay sessions to end', async () => (await count(relay)) === 0, 30_000, 50);
    return cpu / r.received;
  };
  // A round each first: the JIT and the first sessions' set-up stay out of the figures.
  await one('gateway', gateway, 'warm');
  await one('relay', relay, 'warm');
  const sums = { gateway: [] as number[], relay: [] as number[] };
  for (let i = 0; i < rounds; i++) {
    const mode = flags.has('--profile') && i === rounds - 1 ? 'profile' : 'cpu';
    sums.gateway.push(await one('gateway', gateway, mode));
    sums.relay.push(await one('relay', relay, mode));
  }
  const med = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
  if (rounds > 0)
    console.log(
      `median CPU per frame: gateway ${med(sums.gateway).toFixed(1)} µs, bare relay ${med(sums.relay).toFixed(1)} µs, ` +
        `ratio ${(med(sums.gateway) / med(sums.relay)).toFixed(3)}`,
    );
  if (flags.has('--strace')) {
    await one('gateway', gateway, 'strace');
    await one('relay', relay, 'strace');
  }
  if (flags.has('--alloc')) {
    await one('gateway', gateway, 'alloc');
    await one('relay', relay, 'alloc');
  }
} finally {
  await stopAll();
  rmSync(dataDir, { recursive: true, force: true });
}
