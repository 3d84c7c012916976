/**
 * Voxgate benchmarks: the gateway against floors measured in the same run.
 *
 *   npm run bench                 full (fleet 100 000 requested, 10 min soak)
 *   npm run bench -- --quick      under 5 minutes on 2 cores (fleet 10 000, 4 s soak, ~25 s of relayed audio)
 *   npm run bench -- --tiny       seconds; for the correctness test (20 devices)
 *   options: --out <file> (default bench/results/latest.json), --only ws,mqtt,fleet,voice,converse,mcp,cluster (storm/soak need fleet),
 *            --profile (the gateways under --cpu-prof; WebSocket call path unless --only says otherwise, e.g.
 *            --only mqtt or --only voice; profiles in bench/results/prof/, read them with bench/tools/top-self.ts),
 *            --mqtt-gateway-peer <dir> (a checkout of 78/xiaozhi-mqtt-gateway, `npm install` run in it: the MQTT+UDP voice
 *            rows measure it beside the gateway; also VOXGATE_BENCH_MQTT_GATEWAY=<dir>)
 *
 * Processes: this runner (the load generator, autocannon), the gateway (compiled, gateway/dist/main.js, as `npm start`
 * runs it; run.sh builds it first; from its sources through tsx only when that build is stale), the floors
 * (bench/floors/*), and fleet processes (bench/fleet/fleet.ts) holding the simulated devices; the cluster rows add a
 * nats-server and two clustered gateways. Every child is killed at the end, on failure too.
 *
 * The scenarios are in bench/scenarios/: call-path.ts, fleet.ts (with storm and soak), voice.ts, converse.ts, mcp.ts (/mcp against supergateway and mcp-proxy,
 * installed at run time into a cache outside the repository), cluster.ts.
 */
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { gatewayNodeArgs, startGateway } from './lib/compiled.js';
import { fleetCaps, gatewayEnv } from './lib/gateway-env.js';
import { ROOT, killAllNow, livePids, spawnTs, stopAll } from './lib/procs.js';
import { limits, machine } from './lib/system.js';
import { GATEWAY_START_MS, QUEUE_LIMIT, API_KEY, SOURCES_BASE, benchFromArgs, type Bench, type Result } from './scenarios/bench.js';
import { callPathScenario } from './scenarios/call-path.js';
import { clusterScenarios } from './scenarios/cluster.js';
import { Fleet, type Env } from './scenarios/env.js';
import { fleetScenarios } from './scenarios/fleet.js';
import { mem, ratio, round } from './scenarios/measure.js';
import { voiceScenarios } from './scenarios/voice.js';
import { converseScenarios } from './scenarios/converse.js';
import { mcpScenarios } from './scenarios/mcp.js';

async function main(b: Bench): Promise<void> {
  const lim = limits();
  const m = machine();
  // Every connected device costs the gateway one descriptor and each fleet process one per device it holds.
  const fdBudget = lim.nofileSoft - 1000;
  const fleetN = Math.min(b.settings.fleetN, fdBudget);
  const fleetParams: Record<string, unknown> = { requested: b.settings.fleetN, nofile: lim.nofileSoft, nofileHard: lim.nofileHard };
  if (fleetN < b.settings.fleetN)
    fleetParams['cappedBy'] =
      `RLIMIT_NOFILE ${lim.nofileSoft} per process (hard ${lim.nofileHard}${lim.canRaiseNofile ? '' : ', no CAP_SYS_RESOURCE to raise it'})`;
  // A connection from an explicit source address costs a kernel bind() that slows down badly once thousands
  // of ports sit in TIME_WAIT (after the storm's drop it dominated the device simulators' CPU). So source
  // addresses are used only when one address's ports could not hold the fleet: with tcp_tw_reuse on for
  // loopback (1 or 2) an unbound connect() reuses TIME_WAIT ports, so only the open connections count;
  // without it the storm's TIME_WAIT ports count too.
  const twReuse = lim.tcpTwReuse >= 1;
  const perSource = Math.floor(lim.ephemeralPorts * (twReuse ? 0.8 : 0.4));
  const nSources = fleetN <= perSource ? 0 : Math.ceil(fleetN / perSource);
  const sources = Array.from({ length: nSources }, (_, i) => `127.0.0.${SOURCES_BASE + i}`);
  fleetParams['sources'] = sources.length;
  b.log(`mode ${b.mode}; ${m.cpus} cpus (${m.model}), ${m.memGiB} GiB, node ${m.node}`);
  b.log(
    `limits: nofile ${lim.nofileSoft}/${lim.nofileHard} (can raise: ${lim.canRaiseNofile}), ports ${lim.portRange} (${lim.ephemeralPorts} per source address), file-max ${lim.fileMax}, somaxconn ${lim.somaxconn}, syn backlog ${lim.synBacklog}, tw_reuse ${lim.tcpTwReuse}`,
  );
  if (fleetParams['cappedBy']) b.log(`fleet capped at ${fleetN} devices: ${String(fleetParams['cappedBy'])}`);

  const dataDir = mkdtempSync(join(tmpdir(), 'voxgate-bench-'));
  writeFileSync(join(dataDir, 'config.json'), '{}');
  try {
    const profDir = join(ROOT, 'bench/results/prof');
    if (b.profile) mkdirSync(profDir, { recursive: true });
    const fleetProcs = Math.max(1, Math.ceil(fleetN / 6000));
    // With --profile the device simulators are profiled too: they share the 2 cores with the gateway.
    const fleetArgs = b.profile ? { nodeArgs: ['--cpu-prof', '--cpu-prof-dir', join(profDir, 'fleet')] } : {};
    const fleet = new Fleet(Array.from({ length: fleetProcs }, (_, i) => spawnTs(`fleet${i}`, 'bench/fleet/fleet.ts', fleetArgs)));
    const wsRelay = spawnTs('ws-relay', 'bench/floors/ws-relay.ts');
    const mqttRelay = spawnTs('mqtt-relay', 'bench/floors/mqtt-relay.ts');
    // The fleet floor that writes the gateway's rows runs SQLite with the gateway's WebAssembly options (Liftoff only).
    const bareWs = spawnTs('bare-ws', 'bench/floors/bare-ws.ts', { nodeArgs: gatewayNodeArgs().filter((a) => a.includes('wasm')) });
    // Compiled, as `npm start` runs it (run.sh builds first); from sources through tsx only when the build is stale.
    const [started] = await Promise.all([
      startGateway('gateway', {
        env: async (ports) => ({
          ...(await gatewayEnv({ dataDir, apiKey: API_KEY, configFile: join(dataDir, 'config.json'), ...ports })).env,
          GATEWAY_CALL_QUEUE_LIMIT: String(QUEUE_LIMIT),
          ...fleetCaps(fleetN),
          GATEWAY_MQTT_MAX_CONNECTIONS: '300',
        }),
        nodeArgs: b.profile ? ['--cpu-prof', '--cpu-prof-dir', profDir] : [],
        readyMs: GATEWAY_START_MS,
      }),
      ...fleet.procs.map((p) => p.hello),
      wsRelay.hello,
      mqttRelay.hello,
      bareWs.hello,
    ]);
    const { proc: gateway, how: gatewayHow, url: gwUrl, mqttPort } = started;
    b.log(`gateway on ${gwUrl} (mqtt ${mqttPort}), ${gatewayHow}; ${fleetProcs} fleet process(es); floors up`);
    const env: Env = { gateway, gwUrl, gwMqtt: `mqtt://127.0.0.1:${mqttPort}`, wsRelay, mqttRelay, bareWs, fleet, sources, fleetN, fleetParams };

    // Idle: the started gateway with no device and no call yet, after GC.
    const idle = await mem(gateway);
    b.results.push({
      name: 'idle.rss',
      value: idle.rss,
      unit: 'B',
      floor: null,
      ratio: null,
      params: {
        heapUsed: idle.heapUsed,
        external: idle.external,
        gateway: gatewayHow,
        note: 'started gateway, no device, after GC: the start-up transient (left idle, V8 settles it 30–40 MiB lower within a minute)',
      },
    });
    b.log(`idle gateway: rss ${(idle.rss / 2 ** 20).toFixed(1)} MiB, heap ${(idle.heapUsed / 2 ** 20).toFixed(1)} MiB`);

    let ws: Map<string, number> | undefined;
    let mq: Map<string, number> | undefined;
    if (b.only.has('ws')) ws = await callPathScenario(b, env, 'ws');
    if (b.only.has('mqtt')) mq = await callPathScenario(b, env, 'mqtt');
    if (ws && mq)
      for (const [k, v] of mq) {
        const [devices, concurrency] = k.split('/').map(Number);
        const w = ws.get(k)!;
        b.results.push({
          name: 'mqtt_vs_ws.calls_per_s',
          value: round(v),
          unit: 'calls/s',
          floor: round(w),
          ratio: ratio(v, w),
          params: { devices, concurrency, note: 'floor = the gateway over WebSocket; target ratio >= 0.5' },
        });
      }
    if (b.only.has('fleet')) await fleetScenarios(b, env);
    if (b.only.has('voice')) await voiceScenarios(b, dataDir);
    if (b.only.has('converse')) await converseScenarios(b, dataDir);
    if (b.only.has('mcp')) await mcpScenarios(b, dataDir);
    if (b.only.has('cluster')) {
      // An optional service: without nats-server the cluster rows are skipped with a note, as the tests skip theirs.
      if (hasNatsServer()) await clusterScenarios(b, env, dataDir);
      else b.log('cluster rows skipped: nats-server is not installed (on PATH); install it (Debian: apt-get install nats-server) to measure them');
    }

    const doc = { date: new Date().toISOString(), machine: m, results: b.results };
    mkdirSync(dirname(b.outFile), { recursive: true });
    writeFileSync(b.outFile, JSON.stringify(doc, null, 2) + '\n');
    printTable(b.results);
    b.log(`wrote ${b.outFile}`);
  } finally {
    await stopAll();
    rmSync(dataDir, { recursive: true, force: true });
    const left = livePids();
    if (left.length > 0) b.log(`children still alive after stop: ${left.join(', ')}`);
  }
}

function hasNatsServer(): boolean {
  const r = spawnSync('nats-server', ['--version'], { stdio: 'ignore' });
  return r.error === undefined && r.status === 0;
}

function printTable(results: Result[]): void {
  const rows = results.map((r) => {
    const p = r.params;
    const ctx =
      p['concurrency'] !== undefined
        ? `d=${String(p['devices'])} c=${String(p['concurrency'])}`
        : p['pace'] !== undefined
          ? `n=${String(p['devices'])} ${p['pace'] === 'saturate' ? `w=${String(p['window'])}` : '60ms'}`
          : `n=${String(p['devices'] ?? '')}`;
    const load = Array.isArray(p['load']) ? (p['load'] as number[]).map((x) => x.toFixed(1)).join('→') : '';
    return [r.name, ctx, `${r.value} ${r.unit}`, r.floor === null ? '-' : String(r.floor), r.ratio === null ? '-' : r.ratio.toFixed(3), load];
  });
  const head = ['benchmark', 'params', 'gateway', 'floor', 'ratio', 'load avg'];
  const w = head.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  const line = (cells: string[]) => cells.map((c, i) => (i >= 2 ? c.padStart(w[i]!) : c.padEnd(w[i]!))).join('  ');
  process.stdout.write(`\n${line(head)}\n${w.map((n) => '-'.repeat(n)).join('  ')}\n${rows.map(line).join('\n')}\n`);
  process.stdout.write(
    'ratio: 1.0 = as good as the floor; below 1 = slower / bigger than the floor.\n' +
      'CPU rows (µs of process CPU per unit, /proc/<pid>/stat) hold on a busy machine; calls/s and latencies move with its load (1-minute load average, start→end of the row).\n\n',
  );
}

const b = benchFromArgs(process.argv.slice(2));
process.on('exit', killAllNow);
for (const sig of ['SIGINT', 'SIGTERM'] as const)
  process.on(sig, () => {
    void stopAll().finally(() => process.exit(130));
  });
const watchdog = setTimeout(
  () => {
    b.log('watchdog: the run took too long; stopping');
    void stopAll().finally(() => process.exit(3));
  },
  // Generous: on a shared machine under load a gateway alone may take a minute to start from sources.
  { full: 40, quick: 8, tiny: 5 }[b.mode] * 60_000,
);
watchdog.unref();

main(b).then(
  () => process.exit(0),
  (e: unknown) => {
    b.log(`failed: ${e instanceof Error ? (e.stack ?? e.message) : String(e)}`);
    process.exitCode = 1;
    void stopAll().finally(() => process.exit(1));
  },
);
