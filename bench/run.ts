/**
 * Voxgate benchmarks: the gateway against floors measured in the same run.
 *
 *   npm run bench                 full (fleet 100 000 requested, 10 min soak)
 *   npm run bench -- --quick      about 3 minutes on 2 cores (fleet 10 000, 60 s soak, 40 s of relayed audio)
 *   npm run bench -- --tiny       seconds; for the correctness test (20 devices)
 *   options: --out <file> (default bench/results/latest.json), --only ws,mqtt,fleet,voice,cluster (storm/soak need fleet),
 *            --profile (gateway under --cpu-prof, WebSocket call path only; see bench/tools/top-self.ts)
 *
 * Processes: this runner (the load generator, autocannon), the gateway (gateway/src/main.ts), the floors
 * (bench/floors/*), and fleet processes (bench/fleet/fleet.ts) holding the simulated devices; the cluster rows add a
 * nats-server and two clustered gateways. Every child is killed at the end, on failure too.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { runLoad, type LoadResult } from './lib/load.js';
import { runVoiceLoad, type VoiceLoadResult } from './lib/voice.js';
import { ROOT, freePort, killAllNow, livePids, spawnTs, stopAll, type Proc, type Reply } from './lib/procs.js';
import { limits, machine } from './lib/system.js';
import { startNatsServer, type NatsServer } from '../test/support/nats-server.js';

type Mode = 'full' | 'quick' | 'tiny';

interface Result {
  name: string;
  value: number;
  unit: string;
  floor: number | null;
  ratio: number | null;
  params: Record<string, unknown>;
}

const argv = process.argv.slice(2);
const flag = (name: string) => argv.includes(`--${name}`);
const option = (name: string) => {
  const i = argv.indexOf(`--${name}`);
  return i >= 0 ? argv[i + 1] : undefined;
};
const mode: Mode = flag('tiny') ? 'tiny' : flag('quick') ? 'quick' : 'full';
const profile = flag('profile');
const only = new Set((option('only') ?? (profile ? 'ws' : 'ws,mqtt,fleet,storm,soak,voice,cluster')).split(','));
const outFile = resolve(option('out') ?? join(ROOT, 'bench/results/latest.json'));

const API_KEY = 'bench-api-key-0123456789abcdef';
const TOOL = 'self.audio_speaker.set_volume';
const BODY = JSON.stringify({ arguments: { volume: 42 } });
const SETTINGS = {
  full: { callS: 10, warmS: 2, fleetN: 100_000, soakS: 600, soakRate: 1000, stormCalls: 1000 },
  quick: { callS: 1.5, warmS: 0.3, fleetN: 10_000, soakS: 60, soakRate: 500, stormCalls: 200 },
  tiny: { callS: 0, warmS: 0, fleetN: 20, soakS: 2, soakRate: 50, stormCalls: 20 },
}[mode];
/**
 * Relayed audio: `devices` voice sessions at the real frame rate for `seconds`, then `satDevices` sessions with
 * `satWindow` frames in flight each (a new frame per echo) for `satSeconds`.
 */
const VOICE = {
  full: { devices: 500, seconds: 20, satDevices: 10, satWindow: 8, satSeconds: 10 },
  quick: { devices: 100, seconds: 5, satDevices: 10, satWindow: 8, satSeconds: 3 },
  tiny: { devices: 4, seconds: 0.6, satDevices: 2, satWindow: 4, satSeconds: 0.3 },
}[mode];
/** Cluster: devices held by the owning instance (calls rotate over all of them). */
const CLUSTER_DEVICES = { full: 5000, quick: 1000, tiny: 20 }[mode];
const CALL_DEVICES = [1, 100];
const CONCURRENCY = [1, 16, 64];
const CALL_AMOUNT_TINY = 100;
/** The gateway lets 64 callers wait on one device (default 16) so concurrency 64 over 1 device queues, not 429s. */
const QUEUE_LIMIT = 128;
const SOURCES_BASE = 2; // 127.0.0.2, .3, ...

const results: Result[] = [];
const log = (s: string) => process.stderr.write(`[bench ${((performance.now() - T0) / 1000).toFixed(1)}s] ${s}\n`);
const T0 = performance.now();

function macOf(group: number, index: number): string {
  const b = [0x02, group & 0xff, (index >>> 24) & 0xff, (index >>> 16) & 0xff, (index >>> 8) & 0xff, index & 0xff];
  return b.map((x) => x.toString(16).padStart(2, '0')).join(':');
}
const callPath = (group: number, devices: number) => (n: number) => `/v1/devices/${macOf(group, n % devices)}/tools/${TOOL}/call`;

async function until(what: string, cond: () => Promise<boolean>, timeoutMs: number, everyMs = 20): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (Date.now() < end) {
    if (await cond()) return;
    await new Promise((r) => setTimeout(r, everyMs));
  }
  throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
}

async function metric(baseUrl: string, name: string, labels: Record<string, string> = {}): Promise<number> {
  const text = await (await fetch(`${baseUrl}/metrics`, { headers: { authorization: `Bearer ${API_KEY}` } })).text();
  let sum = 0;
  for (const line of text.split('\n')) {
    const m = /^([a-z_]+)(\{[^}]*\})? (\S+)$/.exec(line);
    if (!m || m[1] !== name) continue;
    if (Object.entries(labels).every(([k, v]) => (m[2] ?? '').includes(`${k}="${v}"`))) sum += Number(m[3]);
  }
  return sum;
}

/** Every device, page by page (GET /v1/devices is paginated). */
async function allDevices(baseUrl: string): Promise<{ devices: Array<{ pendingCalls: number; online: boolean }> }> {
  const devices: Array<{ pendingCalls: number; online: boolean }> = [];
  let cursor: string | undefined;
  do {
    const url = `${baseUrl}/v1/devices?limit=1000${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`;
    const page = (await (await fetch(url, { headers: { authorization: `Bearer ${API_KEY}` } })).json()) as { devices: typeof devices; nextCursor?: string };
    devices.push(...page.devices);
    cursor = page.nextCursor;
  } while (cursor !== undefined);
  return { devices };
}

async function callOutcomes(baseUrl: string): Promise<Record<string, number>> {
  const text = await (await fetch(`${baseUrl}/metrics`, { headers: { authorization: `Bearer ${API_KEY}` } })).text();
  const out: Record<string, number> = {};
  for (const m of text.matchAll(/^voxgate_calls_total\{outcome="([a-z_]+)"\} (\S+)$/gm)) out[m[1]!] = Number(m[2]);
  return out;
}

const notOk = (before: Record<string, number>, after: Record<string, number>) =>
  Object.entries(after).reduce((n, [k, v]) => (k === 'ok' ? n : n + v - (before[k] ?? 0)), 0);

interface Mem {
  rss: number;
  heapUsed: number;
  external: number;
  arrayBuffers: number;
}
async function count(p: Proc): Promise<number> {
  return (await p.request<Reply & { devices?: number }>({ cmd: 'count' }, 30_000)).devices ?? 0;
}
async function mem(p: Proc): Promise<Mem & { devices?: number }> {
  const r = await p.request<Reply & { mem: Mem; devices?: number }>({ cmd: 'mem' }, 30_000);
  return r.devices === undefined ? r.mem : { ...r.mem, devices: r.devices };
}

// ------------------------------------------------------------------------------------------- fleet

class Fleet {
  constructor(readonly procs: Proc[]) {}

  /** Connect `count` devices of one group, split over the fleet processes. */
  async connect(o: { group: string; mode: 'device' | 'bare'; waitFor: 'ready' | 'open'; transport: 'ws' | 'mqtt'; url: string; count: number; macGroup: number; sources: string[]; timeoutMs: number }) {
    const procs = this.procs.slice(0, Math.max(1, Math.min(this.procs.length, Math.ceil(o.count / 50))));
    const per = Math.ceil(o.count / procs.length);
    const replies = await Promise.all(
      procs.map((p, i) => {
        const first = i * per;
        const count = Math.max(0, Math.min(per, o.count - first));
        return p.request({ cmd: 'connect', ...o, first, count, inflight: 128 }, o.timeoutMs + 10_000);
      }),
    );
    return this.sum(replies, procs.length);
  }

  async storm(group: string, timeoutMs: number) {
    const replies = await Promise.all(this.procs.map((p) => p.request({ cmd: 'storm', group, timeoutMs }, timeoutMs + 10_000).catch((e: Error) => ({ id: 0, ok: false, error: e.message }))));
    return this.sum(replies.filter((r) => !(r.error ?? '').includes('no group')), this.procs.length);
  }

  async close(group: string) {
    await Promise.all(this.procs.map((p) => p.request({ cmd: 'close', group }, 30_000)));
  }

  private sum(replies: Reply[], _n: number) {
    const stats = { open: 0, ready: 0, calls: 0, connectRetries: 0, connectFailures: 0, droppedFrames: 0, unknownTools: 0 };
    let ok = true;
    for (const r of replies) {
      ok &&= r.ok;
      const s = (r['stats'] ?? {}) as Record<string, number>;
      for (const k of Object.keys(stats) as Array<keyof typeof stats>) stats[k] += s[k] ?? 0;
    }
    return { ok, stats };
  }
}

// ---------------------------------------------------------------------------------------- scenarios

interface Env {
  gateway: Proc;
  gwUrl: string;
  gwMqtt: string;
  wsRelay: Proc;
  mqttRelay: Proc;
  bareWs: Proc;
  fleet: Fleet;
  sources: string[];
  fleetN: number;
  fleetParams: Record<string, unknown>;
}

async function loadOnce(baseUrl: string, path: (n: number) => string, connections: number, apiKey?: string): Promise<LoadResult> {
  const base = { baseUrl, path, body: BODY, connections, ...(apiKey ? { apiKey } : {}) };
  if (mode === 'tiny') {
    await runLoad({ ...base, amount: Math.max(connections, 10) });
    return runLoad({ ...base, amount: Math.max(CALL_AMOUNT_TINY, connections * 4) });
  }
  await runLoad({ ...base, durationS: SETTINGS.warmS });
  return runLoad({ ...base, durationS: SETTINGS.callS });
}

const errorsOf = (r: LoadResult) => r.non2xx + r.errors + r.timeouts;

async function callPathScenario(e: Env, transport: 'ws' | 'mqtt'): Promise<Map<string, number>> {
  const gwGroup = transport === 'ws' ? 1 : 3;
  const floorGroup = transport === 'ws' ? 2 : 4;
  const relay = transport === 'ws' ? e.wsRelay : e.mqttRelay;
  const relayHello = await relay.hello;
  const floorUrl = `http://127.0.0.1:${relayHello['port'] as number}`;
  const n = Math.max(...CALL_DEVICES);
  const gwTarget = transport === 'ws' ? `ws://127.0.0.1:${new URL(e.gwUrl).port}/xiaozhi/v1/` : e.gwMqtt;
  const floorTarget = transport === 'ws' ? `ws://127.0.0.1:${new URL(floorUrl).port}/xiaozhi/v1/` : `mqtt://127.0.0.1:${relayHello['mqttPort'] as number}`;
  const readyBefore = await metric(e.gwUrl, 'voxgate_devices_ready');
  const [gw, fl] = await Promise.all([
    e.fleet.connect({ group: `${transport}-gw`, mode: 'device', waitFor: 'ready', transport, url: gwTarget, count: n, macGroup: gwGroup, sources: transport === 'ws' ? e.sources : [], timeoutMs: 60_000 }),
    e.fleet.connect({ group: `${transport}-floor`, mode: 'device', waitFor: 'open', transport, url: floorTarget, count: n, macGroup: floorGroup, sources: transport === 'ws' ? e.sources : [], timeoutMs: 60_000 }),
  ]);
  if (!gw.ok || !fl.ok) throw new Error(`${transport}: devices did not connect (${JSON.stringify({ gw, fl })})`);
  await until(`${transport} devices ready on the gateway`, async () => (await metric(e.gwUrl, 'voxgate_devices_ready')) >= readyBefore + n, 30_000);
  await until(`${transport} devices on the floor relay`, async () => (await count(relay)) >= n, 30_000, 100);
  log(`${transport}: ${n} devices on the gateway and on the floor`);
  const perSecond = new Map<string, number>();
  const label = transport === 'ws' ? 'websocket' : 'mqtt';
  for (const devices of CALL_DEVICES) {
    for (const c of CONCURRENCY) {
      const before = await callOutcomes(e.gwUrl);
      const g = await loadOnce(e.gwUrl, callPath(gwGroup, devices), c, API_KEY);
      const after = await callOutcomes(e.gwUrl);
      const f = await loadOnce(floorUrl, callPath(floorGroup, devices), c);
      const params = {
        transport: label,
        devices,
        concurrency: c,
        seconds: Math.round(g.seconds * 100) / 100,
        calls: g.ok,
        floorCalls: f.ok,
        errors: errorsOf(g) + notOk(before, after),
        floorErrors: errorsOf(f),
        statusCodes: g.statusCodes,
      };
      perSecond.set(`${devices}/${c}`, g.perSecond);
      results.push({ name: `${transport}.calls_per_s`, value: round(g.perSecond), unit: 'calls/s', floor: round(f.perSecond), ratio: ratio(g.perSecond, f.perSecond), params });
      results.push({ name: `${transport}.p50_ms`, value: round(g.p50, 3), unit: 'ms', floor: round(f.p50, 3), ratio: ratio(f.p50, g.p50), params: { transport: label, devices, concurrency: c, errors: params.errors } });
      results.push({ name: `${transport}.p99_ms`, value: round(g.p99, 3), unit: 'ms', floor: round(f.p99, 3), ratio: ratio(f.p99, g.p99), params: { transport: label, devices, concurrency: c, errors: params.errors } });
      log(`${transport} d=${devices} c=${c}: gateway ${g.perSecond.toFixed(0)}/s p50 ${g.p50.toFixed(2)} ms, floor ${f.perSecond.toFixed(0)}/s p50 ${f.p50.toFixed(2)} ms; errors ${params.errors}/${params.floorErrors}`);
    }
  }
  await Promise.all([e.fleet.close(`${transport}-gw`), e.fleet.close(`${transport}-floor`)]);
  await until(`${transport} devices gone from the gateway`, async () => (await metric(e.gwUrl, 'voxgate_devices_connected')) === 0, 30_000, 50);
  return perSecond;
}

async function fleetScenarios(e: Env): Promise<void> {
  const N = e.fleetN;
  const bare = await e.bareWs.hello;
  const bareUrl = `ws://127.0.0.1:${bare['port'] as number}/`;
  const timeoutMs = Math.max(60_000, N * 5);

  // Floor: N bare WebSocket connections, then the same storm.
  const fm0 = await mem(e.bareWs);
  let t = performance.now();
  const floorConnect = await e.fleet.connect({ group: 'fleet-floor', mode: 'bare', waitFor: 'open', transport: 'ws', url: bareUrl, count: N, macGroup: 6, sources: e.sources, timeoutMs });
  await until('bare connections on the floor', async () => (await count(e.bareWs)) >= N, timeoutMs, 100);
  const floorMs = performance.now() - t;
  const fm1 = await mem(e.bareWs);
  if (!floorConnect.ok) throw new Error(`floor fleet did not connect: ${JSON.stringify(floorConnect.stats)}`);
  log(`fleet floor: ${N} bare connections in ${floorMs.toFixed(0)} ms; rss +${((fm1.rss - fm0.rss) / N).toFixed(0)} B each`);
  let floorStormMs = NaN;
  if (only.has('storm')) {
    t = performance.now();
    const s = await e.fleet.storm('fleet-floor', timeoutMs);
    floorStormMs = performance.now() - t;
    if (!s.ok) throw new Error(`floor storm did not complete: ${JSON.stringify(s.stats)}`);
    log(`storm floor: ${N} bare connections back in ${floorStormMs.toFixed(0)} ms`);
  }
  await e.fleet.close('fleet-floor');

  // The gateway: N devices that say hello, answer initialize and a two-page tools/list.
  const gm0 = await mem(e.gateway);
  const ready0 = await metric(e.gwUrl, 'voxgate_devices_ready');
  t = performance.now();
  const gwConnect = await e.fleet.connect({ group: 'fleet-gw', mode: 'device', waitFor: 'ready', transport: 'ws', url: `ws://127.0.0.1:${new URL(e.gwUrl).port}/xiaozhi/v1/`, count: N, macGroup: 5, sources: e.sources, timeoutMs });
  if (!gwConnect.ok) throw new Error(`gateway fleet did not get ready: ${JSON.stringify(gwConnect.stats)}`);
  await until('the gateway to count every device ready', async () => (await metric(e.gwUrl, 'voxgate_devices_ready')) >= ready0 + N, 30_000);
  const gwMs = performance.now() - t;
  const gm1 = await mem(e.gateway);
  log(`fleet gateway: ${N} devices ready in ${gwMs.toFixed(0)} ms; rss +${((gm1.rss - gm0.rss) / N).toFixed(0)} B, heap +${((gm1.heapUsed - gm0.heapUsed) / N).toFixed(0)} B each`);
  const fp = { devices: N, ...e.fleetParams, connectRetries: gwConnect.stats.connectRetries, floorConnectRetries: floorConnect.stats.connectRetries, errors: gwConnect.stats.connectFailures };
  const perDevice = (a: number, b: number) => (b - a) / N;
  results.push({ name: 'fleet.ready_per_s', value: round(N / (gwMs / 1000)), unit: 'devices/s', floor: round(N / (floorMs / 1000)), ratio: ratio(floorMs, gwMs), params: { ...fp, gatewayMs: round(gwMs), floorMs: round(floorMs) } });
  const rssGw = perDevice(gm0.rss, gm1.rss);
  const rssFloor = perDevice(fm0.rss, fm1.rss);
  results.push({ name: 'fleet.rss_per_device', value: round(rssGw), unit: 'B', floor: round(rssFloor), ratio: ratio(rssFloor, rssGw), params: { devices: N, rssBefore: gm0.rss, rssAfter: gm1.rss, floorRssBefore: fm0.rss, floorRssAfter: fm1.rss, afterGc: true } });
  const heapGw = perDevice(gm0.heapUsed, gm1.heapUsed);
  const heapFloor = perDevice(fm0.heapUsed, fm1.heapUsed);
  results.push({ name: 'fleet.heap_per_device', value: round(heapGw), unit: 'B', floor: round(heapFloor), ratio: ratio(heapFloor, heapGw), params: { devices: N, heapBefore: gm0.heapUsed, heapAfter: gm1.heapUsed, afterGc: true } });

  if (only.has('storm')) {
    const readyNow = await metric(e.gwUrl, 'voxgate_devices_ready');
    t = performance.now();
    const s = await e.fleet.storm('fleet-gw', timeoutMs);
    if (!s.ok) throw new Error(`gateway storm did not complete: ${JSON.stringify(s.stats)}`);
    await until('the gateway to count every device ready again', async () => (await metric(e.gwUrl, 'voxgate_devices_ready')) >= readyNow, 30_000);
    const stormMs = performance.now() - t;
    log(`storm gateway: ${N} devices ready again in ${stormMs.toFixed(0)} ms`);
    const before = await callOutcomes(e.gwUrl);
    const stride = Math.max(1, Math.floor(N / SETTINGS.stormCalls));
    const after = await runLoad({ baseUrl: e.gwUrl, path: (n) => callPath(5, N)((n * stride) % N), body: BODY, apiKey: API_KEY, connections: 16, amount: SETTINGS.stormCalls });
    const outcomes = await callOutcomes(e.gwUrl);
    const errs = errorsOf(after) + notOk(before, outcomes);
    results.push({ name: 'storm.ready_ms', value: round(stormMs), unit: 'ms', floor: round(floorStormMs), ratio: ratio(floorStormMs, stormMs), params: { devices: N, connectRetries: s.stats.connectRetries, errors: s.stats.connectFailures } });
    results.push({ name: 'storm.ready_per_s', value: round(N / (stormMs / 1000)), unit: 'devices/s', floor: round(N / (floorStormMs / 1000)), ratio: ratio(floorStormMs, stormMs), params: { devices: N, target: 2000 } });
    results.push({ name: 'storm.calls_after_ok', value: after.ok, unit: 'calls', floor: SETTINGS.stormCalls, ratio: ratio(after.ok, SETTINGS.stormCalls), params: { devices: N, attempted: SETTINGS.stormCalls, errors: errs, statusCodes: after.statusCodes } });
    log(`storm: ${after.ok}/${SETTINGS.stormCalls} calls right after succeeded`);
  }

  if (only.has('soak')) {
    const h0 = await mem(e.gateway);
    const before = await callOutcomes(e.gwUrl);
    const stride = 7919; // a prime: consecutive calls land on different devices
    const r = await runLoad({
      baseUrl: e.gwUrl,
      path: (n) => callPath(5, N)((n * stride) % N),
      body: BODY,
      apiKey: API_KEY,
      connections: 32,
      durationS: SETTINGS.soakS,
      overallRate: SETTINGS.soakRate,
    });
    const outcomes = await callOutcomes(e.gwUrl);
    const h1 = await mem(e.gateway);
    const list = await allDevices(e.gwUrl);
    const pendingEnd = list.devices.reduce((n, d) => n + d.pendingCalls, 0);
    const errs = errorsOf(r) + notOk(before, outcomes);
    const sp = { devices: N, seconds: SETTINGS.soakS, targetRate: SETTINGS.soakRate, calls: r.ok, online: list.devices.filter((d) => d.online).length };
    results.push({ name: 'soak.calls_per_s', value: round(r.perSecond), unit: 'calls/s', floor: SETTINGS.soakRate, ratio: ratio(r.perSecond, SETTINGS.soakRate), params: { ...sp, errors: errs, p50: round(r.p50, 3), p99: round(r.p99, 3) } });
    results.push({ name: 'soak.heap_after_gc', value: h1.heapUsed, unit: 'B', floor: h0.heapUsed, ratio: ratio(h0.heapUsed, h1.heapUsed), params: { ...sp, note: 'floor = heap after GC at the start of the soak', rssStart: h0.rss, rssEnd: h1.rss } });
    results.push({ name: 'soak.pending_end', value: pendingEnd, unit: 'entries', floor: 0, ratio: null, params: { ...sp, errors: errs } });
    results.push({ name: 'soak.errors', value: errs, unit: 'calls', floor: 0, ratio: null, params: { ...sp, errors: errs, statusCodes: r.statusCodes, outcomes } });
    log(`soak: ${r.ok} calls at ${r.perSecond.toFixed(0)}/s, heap ${(h0.heapUsed / 2 ** 20).toFixed(1)} -> ${(h1.heapUsed / 2 ** 20).toFixed(1)} MiB, pending ${pendingEnd}, errors ${errs}`);
  }
  await e.fleet.close('fleet-gw');
}

/**
 * Relayed audio: devices -> a gateway with voice.mode "relay" -> the voice server double (echo) -> back, against
 * the same devices connected straight to the double (the floor), in the same run. Its own gateway process:
 * with the relay on, every WebSocket hello opens a voice session, which the call-path and fleet rows must not.
 */
async function voiceScenarios(dataDir: string): Promise<void> {
  const voiceServer = spawnTs('voice-server', 'bench/floors/voice-server.ts');
  const upstreamUrl = (await voiceServer.hello)['url'] as string;
  const [httpPort, mqttPort] = [await freePort(), await freePort()];
  const voiceDir = join(dataDir, 'voice');
  mkdirSync(voiceDir, { recursive: true });
  writeFileSync(join(voiceDir, 'config.json'), '{}');
  const gateway = spawnTs('voice-gateway', 'bench/procs/gateway.ts', {
    env: {
      GATEWAY_HTTP_HOST: '127.0.0.1',
      GATEWAY_HTTP_PORT: String(httpPort),
      GATEWAY_MQTT_HOST: '127.0.0.1',
      GATEWAY_MQTT_PORT: String(mqttPort),
      GATEWAY_API_KEYS: API_KEY,
      GATEWAY_DATA_DIR: voiceDir,
      GATEWAY_LOG_LEVEL: 'warn',
      GATEWAY_CONFIG: join(voiceDir, 'config.json'),
      GATEWAY_VOICE_MODE: 'relay',
      GATEWAY_VOICE_UPSTREAM_URL: upstreamUrl,
      GATEWAY_VOICE_UDP_HOST: '127.0.0.1',
      GATEWAY_VOICE_UDP_PORT: '0',
      GATEWAY_VOICE_UDP_PUBLIC_HOST: '127.0.0.1',
    },
  });
  const gwUrl = `http://127.0.0.1:${httpPort}`;
  await until('the voice gateway to be ready', async () => (await fetch(`${gwUrl}/readyz`).catch(() => undefined))?.status === 200, 30_000, 100);
  log(`voice: gateway on ${gwUrl} relaying to ${upstreamUrl}`);
  const runs = [
    { pace: 'paced' as const, devices: VOICE.devices, window: 1, seconds: VOICE.seconds },
    { pace: 'saturate' as const, devices: VOICE.satDevices, window: VOICE.satWindow, seconds: VOICE.satSeconds },
  ];
  let macGroup = 0;
  try {
    for (const transport of ['ws', 'udp'] as const) {
      const label = transport === 'ws' ? 'websocket' : 'mqtt+udp';
      for (const r of runs) {
        const common = { devices: r.devices, pace: r.pace, window: r.window, seconds: r.seconds, connectTimeoutMs: 30_000, drainMs: 5_000 };
        const gwTarget = transport === 'ws' ? `ws://127.0.0.1:${httpPort}/xiaozhi/v1/` : `mqtt://127.0.0.1:${mqttPort}`;
        // The gateway talks binary protocol 2 upstream for UDP devices: their floor speaks it straight to the double.
        const version = transport === 'ws' ? 1 : 2;
        const g = await runVoiceLoad({ ...common, transport, url: gwTarget, version, macGroup: macGroup++, expectMcp: true });
        await until('the voice sessions to end on the gateway', async () => (await metric(gwUrl, 'voxgate_voice_sessions_active')) === 0, 30_000, 50);
        const f = await runVoiceLoad({ ...common, transport: 'ws', url: upstreamUrl, version, macGroup: macGroup++, expectMcp: false });
        pushVoiceRows(transport, label, r, g, f);
        log(
          `voice ${label} ${r.pace} n=${r.devices}: gateway ${g.perSecond.toFixed(0)} frames/s p50 ${g.p50.toFixed(2)} p99 ${g.p99.toFixed(2)} ms, ` +
            `floor ${f.perSecond.toFixed(0)} frames/s p50 ${f.p50.toFixed(2)} p99 ${f.p99.toFixed(2)} ms; lost ${g.lost}/${f.lost}`,
        );
      }
    }
  } finally {
    await Promise.all([gateway.stop(), voiceServer.stop()]);
  }
}

/**
 * Two gateway instances on one nats-server, every device on instance A: the same call through A (the owning
 * instance: the floor) and through B (forwarded to A by NATS request-reply), same devices, same run. Also what each
 * instance holds: devices and RSS per device on A, and what B grows by for devices it only knows of (presence).
 */
async function clusterScenarios(e: Env, dataDir: string): Promise<void> {
  let nats: NatsServer | undefined;
  const killNats = () => nats?.child.kill('SIGKILL');
  process.on('exit', killNats);
  const instances: Proc[] = [];
  try {
    nats = await startNatsServer();
    const n = CLUSTER_DEVICES;
    const start = async (id: string) => {
      const [httpPort, mqttPort] = [await freePort(), await freePort()];
      const dir = join(dataDir, `cluster-${id}`);
      mkdirSync(dir, { recursive: true });
      writeFileSync(join(dir, 'config.json'), '{}');
      const proc = spawnTs(`cluster-${id}`, 'bench/procs/gateway.ts', {
        env: {
          GATEWAY_HTTP_HOST: '127.0.0.1',
          GATEWAY_HTTP_PORT: String(httpPort),
          GATEWAY_MQTT_HOST: '127.0.0.1',
          GATEWAY_MQTT_PORT: String(mqttPort),
          GATEWAY_API_KEYS: API_KEY,
          GATEWAY_DATA_DIR: dir,
          GATEWAY_LOG_LEVEL: 'warn',
          GATEWAY_CONFIG: join(dir, 'config.json'),
          GATEWAY_CALL_QUEUE_LIMIT: String(QUEUE_LIMIT),
          GATEWAY_WS_MAX_CONNECTIONS: String(n + 100),
          GATEWAY_HTTP_MAX_CONNECTIONS_PER_ADDRESS: String(n + 300),
          GATEWAY_CLUSTER_ENABLED: 'true',
          GATEWAY_CLUSTER_INSTANCE_ID: `bench-${id}`,
          GATEWAY_CLUSTER_NATS_SERVERS: nats!.url,
        },
      });
      instances.push(proc);
      const url = `http://127.0.0.1:${httpPort}`;
      await until(`cluster instance ${id} to be ready`, async () => (await fetch(`${url}/readyz`).catch(() => undefined))?.status === 200, 30_000, 100);
      return { proc, url, port: httpPort };
    };
    const a = await start('a');
    const b = await start('b');
    log(`cluster: nats ${nats.url}; instance a ${a.url}, b ${b.url}`);

    const [a0, b0] = [await mem(a.proc), await mem(b.proc)];
    const macGroup = 7;
    const timeoutMs = Math.max(60_000, n * 20);
    const c = await e.fleet.connect({ group: 'cluster', mode: 'device', waitFor: 'ready', transport: 'ws', url: `ws://127.0.0.1:${a.port}/xiaozhi/v1/`, count: n, macGroup, sources: [], timeoutMs });
    if (!c.ok) throw new Error(`cluster: devices did not connect (${JSON.stringify(c.stats)})`);
    await until('cluster devices ready on instance a', async () => (await metric(a.url, 'voxgate_devices_ready')) >= n, timeoutMs);
    // B answers for a device once its presence entry has reached B: the cluster-wide listing shows them all online.
    await until('instance b to list every device online', async () => (await allDevices(b.url)).devices.filter((d) => d.online).length >= n, timeoutMs, 200);
    const [a1, b1] = [await mem(a.proc), await mem(b.proc)];
    const held = { a: await metric(a.url, 'voxgate_devices_connected'), b: await metric(b.url, 'voxgate_devices_connected') };
    log(`cluster: ${n} devices on a (${held.a} connected), b holds ${held.b}; a rss +${((a1.rss - a0.rss) / n).toFixed(0)} B/device, b +${((b1.rss - b0.rss) / n).toFixed(0)} B/device`);
    const perDevice = (x: number, y: number) => round((y - x) / n);
    results.push({ name: 'cluster.devices_per_instance', value: held.a, unit: 'devices', floor: null, ratio: null, params: { devices: n, instance: 'a (owning)', otherInstance: held.b } });
    results.push({ name: 'cluster.rss_per_device', value: perDevice(a0.rss, a1.rss), unit: 'B', floor: null, ratio: null, params: { devices: n, instance: 'a (owning)', rssBefore: a0.rss, rssAfter: a1.rss, heapPerDevice: perDevice(a0.heapUsed, a1.heapUsed), afterGc: true } });
    results.push({ name: 'cluster.peer_rss_per_device', value: perDevice(b0.rss, b1.rss), unit: 'B', floor: null, ratio: null, params: { devices: n, instance: 'b (holds none)', rssBefore: b0.rss, rssAfter: b1.rss, heapPerDevice: perDevice(b0.heapUsed, b1.heapUsed), afterGc: true } });

    for (const concurrency of CONCURRENCY) {
      const before = { a: await callOutcomes(a.url), b: await callOutcomes(b.url), fwd: await metric(b.url, 'voxgate_cluster_forwarded_calls_total', { outcome: 'ok' }) };
      const owning = await loadOnce(a.url, callPath(macGroup, n), concurrency, API_KEY);
      const forwarded = await loadOnce(b.url, callPath(macGroup, n), concurrency, API_KEY);
      const after = { a: await callOutcomes(a.url), b: await callOutcomes(b.url), fwd: await metric(b.url, 'voxgate_cluster_forwarded_calls_total', { outcome: 'ok' }) };
      const errors = errorsOf(forwarded) + notOk(before.b, after.b);
      const floorErrors = errorsOf(owning) + notOk(before.a, after.a);
      const params = {
        path: 'HTTP -> instance b -> NATS -> instance a -> device',
        floorPath: 'HTTP -> instance a -> device',
        devices: n,
        concurrency,
        seconds: round(forwarded.seconds, 2),
        calls: forwarded.ok,
        floorCalls: owning.ok,
        // Every forwarded call (and the warm-up's) went over NATS: B counts it as forwarded ok.
        forwardedOk: after.fwd - before.fwd,
        errors,
        floorErrors,
        statusCodes: forwarded.statusCodes,
      };
      results.push({ name: 'cluster.calls_per_s', value: round(forwarded.perSecond), unit: 'calls/s', floor: round(owning.perSecond), ratio: ratio(forwarded.perSecond, owning.perSecond), params });
      const lat = { devices: n, concurrency, errors, floorErrors };
      results.push({ name: 'cluster.p50_ms', value: round(forwarded.p50, 3), unit: 'ms', floor: round(owning.p50, 3), ratio: ratio(owning.p50, forwarded.p50), params: { ...lat, addedMs: round(forwarded.p50 - owning.p50, 3) } });
      results.push({ name: 'cluster.p99_ms', value: round(forwarded.p99, 3), unit: 'ms', floor: round(owning.p99, 3), ratio: ratio(owning.p99, forwarded.p99), params: { ...lat, addedMs: round(forwarded.p99 - owning.p99, 3) } });
      log(`cluster d=${n} c=${concurrency}: via b ${forwarded.perSecond.toFixed(0)}/s p50 ${forwarded.p50.toFixed(2)} ms, via a ${owning.perSecond.toFixed(0)}/s p50 ${owning.p50.toFixed(2)} ms; errors ${errors}/${floorErrors}`);
    }
    await e.fleet.close('cluster');
  } finally {
    await Promise.all(instances.map((p) => p.stop()));
    await nats?.stop();
    process.off('exit', killNats);
  }
}

function pushVoiceRows(transport: 'ws' | 'udp', label: string, r: { pace: string; devices: number; window: number; seconds: number }, g: VoiceLoadResult, f: VoiceLoadResult): void {
  const errs = (x: VoiceLoadResult) => x.lost + x.corrupt + x.connectFailures;
  const base = {
    transport: label,
    pace: r.pace,
    devices: r.devices,
    ...(r.pace === 'saturate' ? { window: r.window } : { frameMs: 60 }),
    floorPath: transport === 'ws' ? 'device -> voice server, WebSocket, protocol 1' : 'device -> voice server, WebSocket, protocol 2 (a UDP device has no direct path)',
    errors: errs(g),
    floorErrors: errs(f),
  };
  const name = `voice_${transport}`;
  results.push({
    name: `${name}.frames_per_s`,
    value: round(g.perSecond),
    unit: 'frames/s',
    floor: round(f.perSecond),
    ratio: ratio(g.perSecond, f.perSecond),
    params: { ...base, seconds: round(g.seconds, 2), frames: g.received, floorFrames: f.received, sent: g.sent, lost: g.lost, corrupt: g.corrupt, floorLost: f.lost },
  });
  results.push({ name: `${name}.rtt_p50_ms`, value: round(g.p50, 3), unit: 'ms', floor: round(f.p50, 3), ratio: ratio(f.p50, g.p50), params: { ...base, addedMs: round(g.p50 - f.p50, 3) } });
  results.push({ name: `${name}.rtt_p99_ms`, value: round(g.p99, 3), unit: 'ms', floor: round(f.p99, 3), ratio: ratio(f.p99, g.p99), params: { ...base, addedMs: round(g.p99 - f.p99, 3) } });
}

// ------------------------------------------------------------------------------------------- helpers

function round(x: number, digits = 1): number {
  if (!Number.isFinite(x)) return NaN;
  const f = 10 ** digits;
  return Math.round(x * f) / f;
}
function ratio(a: number, b: number): number | null {
  return Number.isFinite(a) && Number.isFinite(b) && b !== 0 ? Math.round((a / b) * 1000) / 1000 : null;
}

function printTable(): void {
  const rows = results.map((r) => {
    const p = r.params;
    const ctx =
      p['concurrency'] !== undefined
        ? `d=${String(p['devices'])} c=${String(p['concurrency'])}`
        : p['pace'] !== undefined
          ? `n=${String(p['devices'])} ${p['pace'] === 'saturate' ? `w=${String(p['window'])}` : '60ms'}`
          : `n=${String(p['devices'] ?? '')}`;
    return [r.name, ctx, `${r.value} ${r.unit}`, r.floor === null ? '-' : String(r.floor), r.ratio === null ? '-' : r.ratio.toFixed(3)];
  });
  const head = ['benchmark', 'params', 'gateway', 'floor', 'ratio'];
  const w = head.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
  const line = (cells: string[]) => cells.map((c, i) => (i >= 2 ? c.padStart(w[i]!) : c.padEnd(w[i]!))).join('  ');
  process.stdout.write(`\n${line(head)}\n${w.map((n) => '-'.repeat(n)).join('  ')}\n${rows.map(line).join('\n')}\n`);
  process.stdout.write('ratio: 1.0 = as good as the floor; below 1 = slower / bigger than the floor.\n\n');
}

// ---------------------------------------------------------------------------------------------- main

async function main(): Promise<void> {
  const lim = limits();
  const m = machine();
  // Every connected device costs the gateway one descriptor and each fleet process one per device it holds.
  const fdBudget = lim.nofileSoft - 1000;
  const fleetN = Math.min(SETTINGS.fleetN, fdBudget);
  const fleetParams: Record<string, unknown> = { requested: SETTINGS.fleetN, nofile: lim.nofileSoft, nofileHard: lim.nofileHard };
  if (fleetN < SETTINGS.fleetN) fleetParams['cappedBy'] = `RLIMIT_NOFILE ${lim.nofileSoft} per process (hard ${lim.nofileHard}${lim.canRaiseNofile ? '' : ', no CAP_SYS_RESOURCE to raise it'})`;
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
  log(`mode ${mode}; ${m.cpus} cpus (${m.model}), ${m.memGiB} GiB, node ${m.node}`);
  log(`limits: nofile ${lim.nofileSoft}/${lim.nofileHard} (can raise: ${lim.canRaiseNofile}), ports ${lim.portRange} (${lim.ephemeralPorts} per source address), file-max ${lim.fileMax}, somaxconn ${lim.somaxconn}, syn backlog ${lim.synBacklog}, tw_reuse ${lim.tcpTwReuse}`);
  if (fleetParams['cappedBy']) log(`fleet capped at ${fleetN} devices: ${String(fleetParams['cappedBy'])}`);

  const dataDir = mkdtempSync(join(tmpdir(), 'voxgate-bench-'));
  writeFileSync(join(dataDir, 'config.json'), '{}');
  try {
    const [httpPort, mqttPort] = [await freePort(), await freePort()];
    const profDir = join(ROOT, 'bench/results/prof');
    if (profile) mkdirSync(profDir, { recursive: true });
    const gateway = spawnTs('gateway', 'bench/procs/gateway.ts', {
      env: {
        GATEWAY_HTTP_HOST: '127.0.0.1',
        GATEWAY_HTTP_PORT: String(httpPort),
        GATEWAY_MQTT_HOST: '127.0.0.1',
        GATEWAY_MQTT_PORT: String(mqttPort),
        GATEWAY_API_KEYS: API_KEY,
        GATEWAY_DATA_DIR: dataDir,
        GATEWAY_LOG_LEVEL: 'warn',
        GATEWAY_CONFIG: join(dataDir, 'config.json'),
        GATEWAY_CALL_QUEUE_LIMIT: String(QUEUE_LIMIT),
        // The whole fleet connects from loopback (one or a few source addresses) and may fill the
        // descriptor budget: lift the per-source and device caps to it, keep the API's reserve.
        GATEWAY_WS_MAX_CONNECTIONS: String(fleetN + 100),
        GATEWAY_HTTP_MAX_CONNECTIONS: String(fleetN + 300),
        GATEWAY_HTTP_MAX_CONNECTIONS_PER_ADDRESS: String(fleetN + 300),
        GATEWAY_MQTT_MAX_CONNECTIONS: '300',
      },
      nodeArgs: profile ? ['--cpu-prof', '--cpu-prof-dir', profDir] : [],
    });
    const gwUrl = `http://127.0.0.1:${httpPort}`;
    const fleetProcs = Math.max(1, Math.ceil(fleetN / 6000));
    // With --profile the device simulators are profiled too: they share the 2 cores with the gateway.
    const fleetArgs = profile ? { nodeArgs: ['--cpu-prof', '--cpu-prof-dir', join(profDir, 'fleet')] } : {};
    const fleet = new Fleet(Array.from({ length: fleetProcs }, (_, i) => spawnTs(`fleet${i}`, 'bench/fleet/fleet.ts', fleetArgs)));
    const wsRelay = spawnTs('ws-relay', 'bench/floors/ws-relay.ts');
    const mqttRelay = spawnTs('mqtt-relay', 'bench/floors/mqtt-relay.ts');
    const bareWs = spawnTs('bare-ws', 'bench/floors/bare-ws.ts');
    await Promise.all([...fleet.procs.map((p) => p.hello), wsRelay.hello, mqttRelay.hello, bareWs.hello]);
    await until('the gateway to be ready', async () => (await fetch(`${gwUrl}/readyz`).catch(() => undefined))?.status === 200, 30_000, 100);
    log(`gateway on ${gwUrl} (mqtt ${mqttPort}); ${fleetProcs} fleet process(es); floors up`);
    const env: Env = { gateway, gwUrl, gwMqtt: `mqtt://127.0.0.1:${mqttPort}`, wsRelay, mqttRelay, bareWs, fleet, sources, fleetN, fleetParams };

    let ws: Map<string, number> | undefined;
    let mq: Map<string, number> | undefined;
    if (only.has('ws')) ws = await callPathScenario(env, 'ws');
    if (only.has('mqtt')) mq = await callPathScenario(env, 'mqtt');
    if (ws && mq)
      for (const [k, v] of mq) {
        const [devices, concurrency] = k.split('/').map(Number);
        const w = ws.get(k)!;
        results.push({ name: 'mqtt_vs_ws.calls_per_s', value: round(v), unit: 'calls/s', floor: round(w), ratio: ratio(v, w), params: { devices, concurrency, note: 'floor = the gateway over WebSocket; target ratio >= 0.5' } });
      }
    if (only.has('fleet')) await fleetScenarios(env);
    if (only.has('voice')) await voiceScenarios(dataDir);
    if (only.has('cluster')) await clusterScenarios(env, dataDir);

    const doc = { date: new Date().toISOString(), machine: m, results };
    mkdirSync(dirname(outFile), { recursive: true });
    writeFileSync(outFile, JSON.stringify(doc, null, 2) + '\n');
    printTable();
    log(`wrote ${outFile}`);
  } finally {
    await stopAll();
    rmSync(dataDir, { recursive: true, force: true });
    const left = livePids();
    if (left.length > 0) log(`children still alive after stop: ${left.join(', ')}`);
  }
}

process.on('exit', killAllNow);
for (const sig of ['SIGINT', 'SIGTERM'] as const)
  process.on(sig, () => {
    void stopAll().finally(() => process.exit(130));
  });
const watchdog = setTimeout(
  () => {
    log('watchdog: the run took too long; stopping');
    void stopAll().finally(() => process.exit(3));
  },
  { full: 40, quick: 6, tiny: 3 }[mode] * 60_000,
);
watchdog.unref();

main().then(
  () => process.exit(0),
  (e: unknown) => {
    log(`failed: ${e instanceof Error ? (e.stack ?? e.message) : String(e)}`);
    process.exitCode = 1;
    void stopAll().finally(() => process.exit(1));
  },
);
