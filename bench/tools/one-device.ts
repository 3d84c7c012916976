/**
 * The "one device, many callers" WebSocket row alone: calls to one device through the gateway against the floor's
 * serialising route (bench/floors/serial.ts) on its own device, alternating, judged by process CPU per call
 * (/proc/<pid>/stat) of the server and of the device simulator, and with `--strace` by the system calls per call.
 *   node --conditions=voxgate-source --import tsx bench/tools/one-device.ts [rounds=3] [seconds=2] [concurrency=16] [warm-up seconds=1] [--strace] [--profile]
 *     [--devices=N] [--mqtt] [--alloc] [--survivors] [--trace-gc] [--gc-nvp] [--setup-burst] [--bench-warm] [--pretenured] [--hold=S] [--deopts] [--strace-seq] [--segments] [--idle=S]
 *     [--gateway-arg=<node option>]... [--floor-arg=<node option>]... [--gateway-env=NAME=value]... [--floor-env=NAME=value]...
 * `--profile`: CPU profiles of the gateway's and the floor's last round, bench/results/prof/one-device-{gateway,floor}.cpuprofile.
 * `--devices=N` (default 1): calls spread over N devices; with N > 1 the floor is the pipelined route (as the bench's
 * many-device rows), not the serialising one. `--mqtt`: the devices connect over MQTT, the floor is mqtt-relay.ts.
 * `--alloc`: in the last round, bytes allocated per call and garbage collections of each server (alloc-probe.ts), and
 * the gateway's top allocation sites: counts that the machine's load does not move (`--survivors`: only the objects of
 * that round the young collections did not free, i.e. what they copied or promoted). `--trace-gc`: both servers run
 * with node's --trace-gc; the last collections of each are printed at the end. `--gc-nvp`: both servers run with
 * --trace-gc-nvp; each round adds a line of its young collections (gc-nvp.ts: scavenges per 10 000 calls, bytes promoted
 * and copied per scavenge, pauses per call, full collections). `--setup-burst`: after the warm-up the gateway's devices
 * reconnect all at once (their setup requests in one burst, the young generation at its full size), then the gateway
 * warms up again. `--bench-warm`: before the rows' own warm-up, the quick bench's start-up legs (call-path.ts: many devices
 * at concurrency 64, one device at 16, many at 1, counted in calls), for both sides. `--pretenured`: the gateway runs with
 * --trace-pretenuring-statistics; at the end the allocation sites V8 tenured are named (pretenured.ts, gdb). `--hold=S`:
 * both servers stay up S seconds after the rounds (to attach a debugger). `--deopts`: both servers run with
 * --trace-deopt; each round prints how many deoptimisations it saw and the functions most deoptimised (a function that
 * is deoptimised over and over in a warm process is recompiled each time, on the compiler's thread). `--idle=S`: each
 * server's CPU over S seconds after the warm-up with its devices connected and no calls (profiled with `--profile`). `--gateway-arg=`: a node option for the
 * gateway's process only (e.g. a V8 flag), repeatable; `--floor-arg=` the same for the floor's process (what the floor
 * would do with the flag). `--gateway-env=`/`--floor-env=`: an environment variable for that process only (e.g.
 * MALLOC_ARENA_MAX=2). Each line ends with the process's RSS at the end of the round. `--strace-seq`: each server traced with timestamps for one more
 * round; how long a device's reply waits for the next request written to that device, and the system calls in between
 * (strace-seq.ts): with one device and queued callers, that wait is what the serialised queue multiplies. `--segments`:
 * after the rounds, one more round per server (gateway, floor, gateway, floor: `--segments=N` pairs) with the load generator,
 * the server and the device simulator under one `perf record` of their system calls; the round trip cut into what each process
 * and the kernel add, and what the server does after each write (call-segments.ts; meant for concurrency 1).
 * `--segment-samples=µs`: those rounds sample the server's CPU too (both servers run with --perf-basic-prof), and each
 * window's samples are named by the JS that ran (by package or gateway folder, by function, native leaves).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createWriteStream, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { spawnGateway } from '../lib/compiled.js';
import { cpuUs } from '../lib/cpu.js';
import { rssBytes } from '../lib/proc-tree.js';
import { runLoad } from '../lib/load.js';
import { gatewayEnv } from '../lib/gateway-env.js';
import { ROOT, spawnTs, stopAll, type Proc } from '../lib/procs.js';
import { API_KEY, BODY, QUEUE_LIMIT } from '../scenarios/bench.js';
import { Fleet } from '../scenarios/env.js';
import { callPath, metric, serialPath, until } from '../scenarios/measure.js';
import { ALLOC_PROBE_URL } from './alloc-probe.js';
import { PROBE_JS } from './heap-probe.js';
import { describeGc, describePhases, GcNvp } from '../lib/gc-nvp.js';
import { replyToNext } from './strace-seq.js';
import { describeAttribution, describeSegments, traced as segmentTraced } from './call-segments.js';
import { describeTenured, PretenureTrace } from './pretenured.js';

const args = process.argv.slice(2);
const flags = new Set(args.filter((a) => a.startsWith('--')));
const [rounds = 3, seconds = 2, concurrency = 16, warmS = 1] = args.filter((a) => /^\d/.test(a)).map(Number);
const devices = Number(args.find((a) => a.startsWith('--devices='))?.slice('--devices='.length) ?? 1);
const mqtt = flags.has('--mqtt');
const repeated = (name: string) => args.filter((a) => a.startsWith(`--${name}=`)).map((a) => a.slice(name.length + 3));
const envOf = (name: string) => Object.fromEntries(repeated(name).map((kv) => [kv.slice(0, kv.indexOf('=')), kv.slice(kv.indexOf('=') + 1)]));
const dataDir = mkdtempSync(join(tmpdir(), 'voxgate-one-device-'));
writeFileSync(join(dataDir, 'config.json'), '{}');

/** CPU µs of a process's main thread (user, system) and of its other threads (V8's compilers and GC helpers, libuv's pool). */
function cpuSplit(pid: number | undefined): [number, number, number] {
  const out: [number, number, number] = [0, 0, 0];
  for (const tid of readdirSync(`/proc/${pid}/task`)) {
    try {
      const f = readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8').split(') ')[1]!.split(' ');
      const [user, sys] = [Number(f[11]) * 1e4, Number(f[12]) * 1e4];
      if (tid === String(pid)) [out[0], out[1]] = [user, sys];
      else out[2] += user + sys;
    } catch {
      /* the thread ended */
    }
  }
  return out;
}

/** System calls of `pid` (all threads) while `work` runs, from `strace -c -f` (or `traceArgs`, e.g. a timed sequence to a file). */
async function straced<T>(pid: number, work: () => Promise<T>, traceArgs = ['-c']): Promise<{ result: T; calls: Map<string, number> }> {
  const out: string[] = [];
  const st: ChildProcess = spawn('strace', [...traceArgs, '-f', '-p', String(pid)], { stdio: ['ignore', 'ignore', 'pipe'] });
  st.stderr!.on('data', (d: Buffer) => out.push(d.toString()));
  await new Promise((r) => setTimeout(r, 500));
  const result = await work();
  const closed = new Promise((r) => st.once('close', r));
  st.kill('SIGINT');
  await closed;
  const calls = new Map<string, number>();
  for (const line of out.join('').split('\n')) {
    const f = line.trim().split(/\s+/);
    if (f.length >= 5 && /^\d+$/.test(f[3]!) && /^[a-z_0-9]+$/.test(f[f.length - 1]!)) calls.set(f[f.length - 1]!, Number(f[3]));
  }
  return { result, calls };
}

try {
  const probes = [
    `--import=data:text/javascript,${encodeURIComponent(PROBE_JS)}`,
    ...(flags.has('--alloc') ? [`--import=${ALLOC_PROBE_URL}`] : []),
    ...(flags.has('--trace-gc') ? ['--trace-gc'] : []),
    ...(flags.has('--gc-nvp') ? ['--trace-gc-nvp'] : []),
    ...(flags.has('--deopts') ? ['--trace-deopt'] : []),
  ];
  const gatewayOnly = flags.has('--pretenured') ? ['--trace-pretenuring-statistics'] : [];
  // --segment-samples=µs: the segments' rounds sample the server's CPU too, its JS frames named (perf map files).
  // (--perf-basic-prof also writes V8's log, by default into the working directory: it goes to the data directory.)
  if (args.some((a) => a.startsWith('--segment-samples=')))
    probes.push('--perf-basic-prof', '--interpreted-frames-native-stack', `--logfile=${join(dataDir, 'v8-%p.log')}`, '--no-logfile-per-isolate');
  const { env, httpPort, mqttPort } = await gatewayEnv({ dataDir, apiKey: API_KEY, configFile: join(dataDir, 'config.json') });
  // The compiled gateway when its build is fresh (as the bench runs it), else its sources under tsx.
  const { proc: gateway, how } = spawnGateway('gateway', {
    env: {
      ...env,
      GATEWAY_CALL_QUEUE_LIMIT: String(QUEUE_LIMIT),
      ...envOf('gateway-env'),
    },
    nodeArgs: [...probes, ...gatewayOnly, ...repeated('gateway-arg')],
  });
  const pretenure = flags.has('--pretenured') ? new PretenureTrace(gateway.child.stdout, gateway.child.pid!) : undefined;
  console.log(`gateway: ${how}`);
  // --gateway-stdout=FILE (--floor-stdout=FILE): the gateway's (the floor's) whole stdout (its log, and what V8's --trace-* options print) kept in FILE.
  const stdoutFile = args.find((a) => a.startsWith('--gateway-stdout='))?.slice('--gateway-stdout='.length);
  if (stdoutFile) gateway.child.stdout?.pipe(createWriteStream(stdoutFile));
  const fleet = new Fleet([spawnTs('fleet0', 'bench/fleet/fleet.ts')]);
  const floorOptions = { nodeArgs: [...probes, ...repeated('floor-arg')], env: envOf('floor-env') };
  const relay = mqtt ? spawnTs('mqtt-relay', 'bench/floors/mqtt-relay.ts', floorOptions) : spawnTs('ws-relay', 'bench/floors/ws-relay.ts', floorOptions);
  const gwUrl = `http://127.0.0.1:${httpPort}`;
  const floorStdout = args.find((a) => a.startsWith('--floor-stdout='))?.slice('--floor-stdout='.length);
  if (floorStdout) relay.child.stdout?.pipe(createWriteStream(floorStdout));
  const hello = await relay.hello;
  const floorPort = hello['port'] as number;
  const floorUrl = `http://127.0.0.1:${floorPort}`;
  const transport = mqtt ? ('mqtt' as const) : ('ws' as const);
  const gwTarget = mqtt ? `mqtt://127.0.0.1:${mqttPort}` : `ws://127.0.0.1:${httpPort}/xiaozhi/v1/`;
  const floorTarget = mqtt ? `mqtt://127.0.0.1:${hello['mqttPort'] as number}` : `ws://127.0.0.1:${floorPort}/xiaozhi/v1/`;
  await fleet.procs[0]!.hello;
  await until('the gateway', async () => (await fetch(`${gwUrl}/readyz`).catch(() => undefined))?.status === 200, 60_000, 100);
  const common = { mode: 'device' as const, transport, count: devices, sources: [], timeoutMs: 30_000 };
  await fleet.connect({ ...common, group: 'gw', waitFor: 'ready', url: gwTarget, macGroup: 1 });
  await fleet.connect({ ...common, group: 'floor', waitFor: 'open', url: floorTarget, macGroup: 2 });
  await until('the devices ready', async () => (await metric(gwUrl, 'voxgate_devices_ready')) >= devices, 30_000);
  const fleetPid = fleet.procs[0]!.child.pid;
  const sides = [
    { name: 'gateway', proc: gateway, url: gwUrl, path: callPath(1, devices), key: API_KEY as string | undefined },
    { name: 'floor', proc: relay as Proc, url: floorUrl, path: devices === 1 ? serialPath(2, 1) : callPath(2, devices), key: undefined },
  ];
  // --bench-warm: first the quick bench's start-up legs (call-path.ts's warmUp: many devices at concurrency 64, one device at
  // 16, many at 1, counted in calls), so the rows start from the state the bench's rows start from.
  if (flags.has('--bench-warm'))
    for (const s of sides)
      for (const [path, connections, amount, maxS] of [
        [callPath(s.name === 'gateway' ? 1 : 2, devices), 64, 4_000, 2],
        [s.name === 'gateway' ? callPath(1, 1) : serialPath(2, 1), 16, 1_500, 0.75],
        [callPath(s.name === 'gateway' ? 1 : 2, devices), 1, 2_000, 1.5],
      ] as const)
        await runLoad({ baseUrl: s.url, path, body: BODY, connections, amount, maxS, ...(s.key ? { apiKey: s.key } : {}) });
  for (const s of sides)
    await runLoad({ baseUrl: s.url, path: s.path, body: BODY, connections: concurrency, durationS: warmS, ...(s.key ? { apiKey: s.key } : {}) });
  // --setup-burst: every gateway device reconnects after the warm-up, so their setup requests (initialize, tools/list)
  // come in one burst while the young generation is at its full size, as when a fleet dials in to a running gateway.
  if (flags.has('--setup-burst')) {
    await fleet.close('gw');
    await until('the devices gone', async () => (await metric(gwUrl, 'voxgate_devices_connected')) === 0, 30_000, 50);
    await fleet.connect({ ...common, group: 'gw', waitFor: 'ready', url: gwTarget, macGroup: 1 });
    await until('the devices ready again', async () => (await metric(gwUrl, 'voxgate_devices_ready')) >= devices, 30_000);
    for (const s of sides.slice(0, 1))
      await runLoad({ baseUrl: s.url, path: s.path, body: BODY, connections: concurrency, durationS: warmS, ...(s.key ? { apiKey: s.key } : {}) });
  }
  // CPU a server spends with its devices connected and no call running: a per-second cost that per-call figures divide.
  const idleS = Number(args.find((a) => a.startsWith('--idle='))?.slice('--idle='.length) ?? 0);
  if (idleS > 0) {
    // With --profile the idle window is profiled too (one-device-<side>-idle.cpuprofile): what runs with no call.
    if (flags.has('--profile')) for (const s of sides) await s.proc.request({ cmd: 'profile' });
    const c0 = sides.map((s) => cpuUs(s.proc.child.pid));
    const t0 = sides.map((s) => cpuSplit(s.proc.child.pid));
    await new Promise((r) => setTimeout(r, idleS * 1000));
    sides.forEach((s, i) => {
      const t1 = cpuSplit(s.proc.child.pid);
      const ms = (a: number, b: number) => ((a - b) / idleS / 1000).toFixed(2);
      console.log(
        `${s.name} idle: ${ms(cpuUs(s.proc.child.pid), c0[i]!)} ms of CPU per second (main: user ${ms(t1[0], t0[i]![0])}, sys ${ms(t1[1], t0[i]![1])}; other threads ${ms(t1[2], t0[i]![2])})`,
      );
    });
    if (flags.has('--profile')) {
      mkdirSync(join(ROOT, 'bench/results/prof'), { recursive: true });
      for (const s of sides) await s.proc.request({ cmd: 'profile', file: join(ROOT, `bench/results/prof/one-device-${s.name}-idle.cpuprofile`) });
    }
  }
  const nvp = new Map(sides.map((s) => [s.name, new GcNvp(flags.has('--gc-nvp') ? s.proc.child.stdout : undefined)]));
  const deopts = new Map<string, Map<string, number>>();
  for (const s of sides) {
    const seen = new Map<string, number>();
    deopts.set(s.name, seen);
    if (flags.has('--deopts'))
      s.proc.child.stdout?.on('data', (chunk: Buffer) => {
        for (const m of chunk.toString().matchAll(/bailout \(kind: ([^,]+), reason: ([^)]*)\): begin\. deoptimizing 0x[0-9a-f]+ <JSFunction ([^ >]*)/g))
          seen.set(`${m[3]} (${m[1]}: ${m[2]})`, (seen.get(`${m[3]} (${m[1]}: ${m[2]})`) ?? 0) + 1);
      });
  }
  const run = async (s: (typeof sides)[number]) => {
    deopts.get(s.name)!.clear();
    const pids = [s.proc.child.pid, fleetPid];
    const c0 = pids.map(cpuUs);
    const split0 = cpuSplit(s.proc.child.pid);
    const load0 = loadavg()[0]!;
    nvp.get(s.name)!.open();
    const r = await runLoad({ baseUrl: s.url, path: s.path, body: BODY, connections: concurrency, durationS: seconds, ...(s.key ? { apiKey: s.key } : {}) });
    const [server, device] = pids.map((p, i) => (cpuUs(p) - c0[i]!) / r.ok);
    const gc = nvp.get(s.name)!.close();
    const split1 = cpuSplit(s.proc.child.pid);
    const user = (split1[0] - split0[0]) / r.ok;
    const sys = (split1[1] - split0[1]) / r.ok;
    const threads = (split1[2] - split0[2]) / r.ok;
    if (flags.has('--deopts')) {
      const seen = [...deopts.get(s.name)!].sort((a, b) => b[1] - a[1]);
      console.log(
        `${s.name}: ${seen.reduce((n, [, k]) => n + k, 0)} deoptimisations; ${seen
          .slice(0, 8)
          .map(([f, k]) => `${k}× ${f}`)
          .join('; ')}`,
      );
    }
    return { r, server: server!, device: device!, user, sys, threads, gc, load: `${load0.toFixed(1)}→${loadavg()[0]!.toFixed(1)}` };
  };
  for (let i = 0; i < rounds; i++) {
    for (const s of sides) {
      const profile = flags.has('--profile') && i === rounds - 1;
      const alloc = flags.has('--alloc') && i === rounds - 1;
      if (profile) await s.proc.request({ cmd: 'profile' });
      if (alloc) await s.proc.request({ cmd: 'alloc-start', sample: true, interval: 1024, survivors: flags.has('--survivors') });
      const m = await run(s);
      if (alloc) {
        const a = await s.proc.request({ cmd: 'alloc-stop', top: Number(process.env['ALLOC_TOP'] ?? (s.name === 'gateway' ? 30 : 10)) });
        const gcs = Object.entries(a['gc'] as Record<string, { count: number; ms: number }>).map(([k, g]) => `${k} ${g.count} (${g.ms.toFixed(0)} ms)`);
        console.log(`${s.name} allocated ${((a['bytes'] as number) / m.r.ok).toFixed(0)} B/call over ${m.r.ok} calls; gc: ${gcs.join(', ')}`);
        for (const [site, bytes] of a['top'] as Array<[string, number]>) console.log(`  ${(bytes / m.r.ok).toFixed(0).padStart(6)} B/call  ${site}`);
      }
      if (profile) {
        mkdirSync(join(ROOT, 'bench/results/prof'), { recursive: true });
        await s.proc.request({ cmd: 'profile', file: join(ROOT, `bench/results/prof/one-device-${s.name}.cpuprofile`) });
      }
      console.log(
        `${s.name.padEnd(7)} c=${concurrency}: ${m.r.perSecond.toFixed(0).padStart(5)} calls/s  server ${m.server.toFixed(0).padStart(4)} µs/call (main: user ${m.user.toFixed(0)}, sys ${m.sys.toFixed(0)}; other threads ${m.threads.toFixed(0)})  ` +
          `device ${m.device.toFixed(0).padStart(4)} µs/call  p50 ${m.r.p50.toFixed(2)} ms  errors ${m.r.non2xx + m.r.errors + m.r.timeouts}  load ${m.load}  ` +
          `rss ${(rssBytes(s.proc.child.pid!) / 2 ** 20).toFixed(0)} MiB`,
      );
      if (flags.has('--gc-nvp')) console.log(`${s.name.padEnd(7)} gc: ${describeGc(m.gc, m.r.ok)}\n        ms per scavenge: ${describePhases(m.gc)}`);
    }
  }
  if (flags.has('--trace-gc'))
    for (const s of sides)
      for (const line of [...s.proc.stdout.filter((l) => /Mark-Compact/.test(l)).slice(-4), ...s.proc.stdout.filter((l) => /Scavenge/.test(l)).slice(-3)])
        console.log(`${s.name}: ${line}`);
  if (flags.has('--strace'))
    for (const s of sides) {
      for (const [who, pid] of [
        ['server', s.proc.child.pid!],
        ['device', fleetPid!],
      ] as const) {
        const { result, calls } = await straced(pid, () => run(s));
        const per = [...calls]
          .filter(([, n]) => n / result.r.ok >= 0.05)
          .map(([k, n]) => `${k} ${(n / result.r.ok).toFixed(2)}`)
          .join(', ');
        console.log(`strace ${s.name} ${who}: ${result.r.ok} calls; per call: ${per}`);
      }
    }
  if (flags.has('--strace-seq'))
    for (const s of sides) {
      const file = join(dataDir, `${s.name}.strace`);
      const traced = ['-ttt', '-s', '12', '-e', 'trace=read,writev,write,epoll_pwait', '-o', file];
      const { result } = await straced(s.proc.child.pid!, () => run(s), traced);
      const r = replyToNext(file);
      console.log(
        `strace-seq ${s.name}: ${result.r.ok} calls, ${r.replies} replies followed by a request; reply read → next request written ` +
          `p10/p50/p90 ${r.us.map((x) => x.toFixed(0)).join(' / ')} µs; system calls between p50 ${r.between[0]}, p90 ${r.between[1]}, ` +
          `none ${(r.atOnce * 100).toFixed(0)} %; typical: [${r.typical}]`,
      );
    }
  if (flags.has('--segments') || args.some((a) => a.startsWith('--segments='))) {
    const pairs = Number(args.find((a) => a.startsWith('--segments='))?.slice('--segments='.length) ?? 1);
    const samplePeriod = Number(args.find((a) => a.startsWith('--segment-samples='))?.slice('--segment-samples='.length) ?? 0);
    for (let i = 0; i < pairs; i++)
      for (const s of sides) {
        const file = join(tmpdir(), `one-device-segments-${s.name}-${i}.data`);
        const pids = { server: s.proc.child.pid!, device: fleetPid!, client: process.pid };
        const { result, seg, attribution } = await segmentTraced(pids, file, () => run(s), samplePeriod);
        console.log(`segments ${s.name} (${result.r.perSecond.toFixed(0)} calls/s, load ${result.load}): ${describeSegments(seg)}`);
        for (const a of attribution) console.log(describeAttribution(a));
      }
    // The perf map files the servers wrote (/tmp/perf-<pid>.map, read above) and the recorded data go.
    for (const s of sides) if (samplePeriod > 0) rmSync(`/tmp/perf-${s.proc.child.pid}.map`, { force: true });
    for (let i = 0; i < pairs; i++)
      for (const s of sides) for (const f of ['', '.cpu']) rmSync(join(tmpdir(), `one-device-segments-${s.name}-${i}.data${f}`), { force: true });
  }
  if (pretenure) {
    const sites = await pretenure.tenured();
    console.log(`gateway: ${pretenure.decisions.length} pretenuring decisions; ${sites.length} sites tenured at the end:`);
    for (const line of describeTenured(sites)) console.log(`  ${line}`);
  }
  // --hold=S: the processes stay up S seconds after the rounds (to attach a debugger, e.g. gdb -p <gateway pid>).
  const holdS = Number(args.find((a) => a.startsWith('--hold='))?.slice('--hold='.length) ?? 0);
  if (holdS > 0) {
    console.log(`holding ${holdS} s: gateway pid ${gateway.child.pid}, floor pid ${relay.child.pid}`);
    await new Promise((r) => setTimeout(r, holdS * 1000));
  }
} finally {
  await stopAll();
  rmSync(dataDir, { recursive: true, force: true });
}
