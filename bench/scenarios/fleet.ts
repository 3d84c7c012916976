/** A fleet of devices connecting, a reconnect storm, and a soak of calls over the whole fleet, each against bare connections. */
import { runLoad } from '../lib/load.js';
import { API_KEY, BODY, type Bench, type Result } from './bench.js';
import type { Env } from './env.js';
import { measured, threadCpuUs, type ThreadCpu } from '../lib/cpu.js';
import type { Reply } from '../lib/procs.js';
import { allDevices, callOutcomes, callPath, count, errorsOf, mem, metric, notOk, ratio, round, until } from './measure.js';

export async function fleetScenarios(b: Bench, e: Env): Promise<void> {
  const N = e.fleetN;
  const bare = await e.bareWs.hello;
  const bareUrl = `ws://127.0.0.1:${bare['port'] as number}/`;
  const timeoutMs = Math.max(60_000, N * 5);

  // Memory floor: N bare WebSocket connections (what N sockets cost).
  const fm0 = await mem(e.bareWs);
  let t = performance.now();
  const bareConnect = await e.fleet.connect({
    group: 'fleet-bare',
    mode: 'bare',
    waitFor: 'open',
    transport: 'ws',
    url: bareUrl,
    count: N,
    macGroup: 6,
    sources: e.sources,
    timeoutMs,
  });
  await until('bare connections on the floor', async () => (await count(e.bareWs)) >= N, timeoutMs, 100);
  const bareMs = performance.now() - t;
  const fm1 = await mem(e.bareWs);
  if (!bareConnect.ok) throw new Error(`bare fleet did not connect: ${JSON.stringify(bareConnect.stats)}`);
  b.log(`fleet bare: ${N} bare connections in ${bareMs.toFixed(0)} ms; rss +${((fm1.rss - fm0.rss) / N).toFixed(0)} B each`);
  await e.fleet.close('fleet-bare');
  await until('bare connections gone', async () => (await count(e.bareWs)) === 0, timeoutMs, 100);
  // The floor's window starts after a full collection, as the gateway's does (its mem() just before it): otherwise
  // the floor collects the 10 000 closed sockets' garbage inside its window. The device simulators' too: each window
  // starts with the groups closed before it collected on both ends.
  await mem(e.bareWs);
  await e.fleet.gc();

  // The device simulators are warmed first (their device code compiled) on a fifth of the fleet, untimed: before
  // 2026-11-29 the floor's round was the simulators' first and the gateway's their second, so the floor's ready/s
  // carried the simulators' warm-up (its round ~18 % slower in wall clock than an identical one after it).
  // Then the ready/s floor: the same devices doing the same four round trips (hello, initialize, two tools/list
  // pages) against a server that parses each reply with JSON.parse and nothing else, and the same storm (the goal
  // rows). Then a second floor that does the same and writes what the gateway persists for each device
  // (bench/floors/fleet-writes.ts): the gateway's own work against the same work.
  // The warm-up goes through the floor's own timed path, so the floor's server meets its window warm; the gateway's
  // handshake path gets the same number of devices (new ones, never the measured ids) before its window, or the
  // goal rows would compare a warm floor with a gateway compiling its device setup inside the window (until
  // 2026-11-30 they did). Its disconnects' deferred writes settle during the floor rounds, before the gateway's window.
  const warmN = Math.max(1, Math.floor(N / 5));
  await warmSimulators(e, warmN, timeoutMs);
  await warmGateway(e, warmN, timeoutMs);
  const floor = await floorRound(b, e, 'fleet-floor', 'v1', timeoutMs);
  await e.bareWs.request({ cmd: 'writes' });
  await mem(e.bareWs);
  await e.fleet.gc();
  const writing = await floorRound(b, e, 'fleet-floor-writes', 'writes/v1', timeoutMs);
  const { ms: floorMs, cpu: fc, stormMs: floorStormMs, storm: floorStorm } = floor;
  const floorConnect = fc.result;

  // The gateway: N devices that say hello, answer initialize and a two-page tools/list.
  await e.fleet.gc();
  const gm0 = await mem(e.gateway);
  const ready0 = await metric(e.gwUrl, 'voxgate_devices_ready');
  const events0 = await historyRows(e);
  t = performance.now();
  const gc = await measuredPerDevice(e.gateway.child.pid, N, async () => {
    const r = await e.fleet.connect({
      group: 'fleet-gw',
      mode: 'device',
      waitFor: 'ready',
      transport: 'ws',
      url: `ws://127.0.0.1:${new URL(e.gwUrl).port}/xiaozhi/v1/`,
      count: N,
      macGroup: 5,
      sources: e.sources,
      timeoutMs,
    });
    if (!r.ok) throw new Error(`gateway fleet did not get ready: ${JSON.stringify(r.stats)}`);
    await until('the gateway to count every device ready', async () => (await metric(e.gwUrl, 'voxgate_devices_ready')) >= ready0 + N, 30_000);
    return r;
  });
  const gwConnect = gc.result;
  const gwMs = performance.now() - t;
  const gm1 = await mem(e.gateway);
  const gwEvents = (await historyRows(e, events0 + 2 * N)) - events0;
  b.log(
    `fleet gateway: ${N} devices ready in ${gwMs.toFixed(0)} ms; rss +${((gm1.rss - gm0.rss) / N).toFixed(0)} B, heap +${((gm1.heapUsed - gm0.heapUsed) / N).toFixed(0)} B each`,
  );
  const fp = {
    devices: N,
    ...e.fleetParams,
    connectRetries: gwConnect.stats.connectRetries,
    floorConnectRetries: floorConnect.stats.connectRetries + bareConnect.stats.connectRetries,
    errors: gwConnect.stats.connectFailures,
  };
  const perDevice = (a: number, b: number) => (b - a) / N;
  const floorKind = 'hello, initialize, 2 tools/list pages; JSON.parse only';
  b.results.push({
    name: 'fleet.ready_per_s',
    value: round(N / (gwMs / 1000)),
    unit: 'devices/s',
    floor: round(N / (floorMs / 1000)),
    ratio: ratio(floorMs, gwMs),
    params: { ...fp, floorKind, gatewayMs: round(gwMs), floorMs: round(floorMs), bareConnectionsMs: round(bareMs), load: gc.load, floorLoad: fc.load },
  });
  const cpuGw = gc.cpu[0]! / N;
  const cpuFloor = fc.cpu[0]! / N;
  b.results.push({
    name: 'fleet.cpu_us_per_device',
    value: round(cpuGw),
    unit: 'µs',
    floor: round(cpuFloor),
    ratio: ratio(cpuFloor, cpuGw),
    params: { devices: N, floorKind, load: gc.load, floorLoad: fc.load, threads: gc.threads, floorThreads: fc.threads },
  });
  b.results.push(...againstWritingFloor('fleet', N, gwMs, gc, { ...writing, gwEvents }));
  const rssGw = perDevice(gm0.rss, gm1.rss);
  const rssFloor = perDevice(fm0.rss, fm1.rss);
  b.results.push({
    name: 'fleet.rss_per_device',
    value: round(rssGw),
    unit: 'B',
    floor: round(rssFloor),
    ratio: ratio(rssFloor, rssGw),
    params: {
      devices: N,
      floorKind: 'bare connections',
      rssBefore: gm0.rss,
      rssAfter: gm1.rss,
      floorRssBefore: fm0.rss,
      floorRssAfter: fm1.rss,
      afterGc: true,
    },
  });
  // The same without the young generation's growth: it grows to its 32 MiB maximum with allocation, not with
  // what a process keeps, and one process may be there before the fleet (the gateway, after start-up) while
  // the other grows during it (the floor, fresh): ±3 KB per device at 10 000 that is neither's per-socket cost.
  if (gm0.young !== undefined && gm1.young !== undefined && fm0.young !== undefined && fm1.young !== undefined) {
    const oldGw = perDevice(gm0.rss - gm0.young, gm1.rss - gm1.young);
    const oldFloor = perDevice(fm0.rss - fm0.young, fm1.rss - fm1.young);
    b.log(`fleet: rss per device without the young generation's growth: gateway ${oldGw.toFixed(0)} B, bare socket ${oldFloor.toFixed(0)} B`);
    b.results.push({
      name: 'fleet.rss_per_device_excl_young',
      value: round(oldGw),
      unit: 'B',
      floor: round(oldFloor),
      ratio: ratio(oldFloor, oldGw),
      params: { devices: N, floorKind: 'bare connections', young: [gm0.young, gm1.young], floorYoung: [fm0.young, fm1.young], afterGc: true },
    });
  }
  const heapGw = perDevice(gm0.heapUsed, gm1.heapUsed);
  const heapFloor = perDevice(fm0.heapUsed, fm1.heapUsed);
  b.results.push({
    name: 'fleet.heap_per_device',
    value: round(heapGw),
    unit: 'B',
    floor: round(heapFloor),
    ratio: ratio(heapFloor, heapGw),
    params: { devices: N, heapBefore: gm0.heapUsed, heapAfter: gm1.heapUsed, afterGc: true },
  });

  if (b.only.has('storm')) {
    const readyNow = await metric(e.gwUrl, 'voxgate_devices_ready');
    const stormEvents0 = await historyRows(e);
    t = performance.now();
    const gs = await measuredPerDevice(e.gateway.child.pid, N, async () => {
      const s = await e.fleet.storm('fleet-gw', timeoutMs);
      if (!s.ok) throw new Error(`gateway storm did not complete: ${JSON.stringify(s.stats)}`);
      await until('the gateway to count every device ready again', async () => (await metric(e.gwUrl, 'voxgate_devices_ready')) >= readyNow, 30_000);
      return s;
    });
    const s = gs.result;
    const stormMs = performance.now() - t;
    b.log(`storm gateway: ${N} devices ready again in ${stormMs.toFixed(0)} ms`);
    const before = await callOutcomes(e.gwUrl);
    const stride = Math.max(1, Math.floor(N / b.settings.stormCalls));
    const after = await runLoad({
      baseUrl: e.gwUrl,
      path: (n) => callPath(5, N)((n * stride) % N),
      body: BODY,
      apiKey: API_KEY,
      connections: 16,
      amount: b.settings.stormCalls,
    });
    const outcomes = await callOutcomes(e.gwUrl);
    const errs = errorsOf(after) + notOk(before, outcomes);
    b.results.push({
      name: 'storm.ready_ms',
      value: round(stormMs),
      unit: 'ms',
      floor: round(floorStormMs),
      ratio: ratio(floorStormMs, stormMs),
      params: { devices: N, connectRetries: s.stats.connectRetries, errors: s.stats.connectFailures, load: gs.load, floorLoad: floorStorm?.load },
    });
    b.results.push({
      name: 'storm.ready_per_s',
      value: round(N / (stormMs / 1000)),
      unit: 'devices/s',
      floor: round(N / (floorStormMs / 1000)),
      ratio: ratio(floorStormMs, stormMs),
      params: { devices: N, floorKind, target: 2000, load: gs.load, floorLoad: floorStorm?.load },
    });
    if (writing.storm) {
      const gwEvents = (await historyRows(e, stormEvents0 + 3 * N)) - stormEvents0;
      b.results.push(...againstWritingFloor('storm', N, stormMs, gs, { ms: writing.stormMs, cpu: writing.storm, rows: writing.stormRows, gwEvents }));
    }
    const cpuStorm = gs.cpu[0]! / N;
    const cpuFloorStorm = (floorStorm?.cpu[0] ?? NaN) / N;
    b.results.push({
      name: 'storm.cpu_us_per_device',
      value: round(cpuStorm),
      unit: 'µs',
      floor: round(cpuFloorStorm),
      ratio: ratio(cpuFloorStorm, cpuStorm),
      params: { devices: N, floorKind, load: gs.load, floorLoad: floorStorm?.load, threads: gs.threads, floorThreads: floorStorm?.threads },
    });
    b.results.push({
      name: 'storm.calls_after_ok',
      value: after.ok,
      unit: 'calls',
      floor: b.settings.stormCalls,
      ratio: ratio(after.ok, b.settings.stormCalls),
      params: { devices: N, attempted: b.settings.stormCalls, errors: errs, statusCodes: after.statusCodes },
    });
    b.log(`storm: ${after.ok}/${b.settings.stormCalls} calls right after succeeded`);
  }

  if (b.only.has('soak')) {
    const h0 = await mem(e.gateway);
    const before = await callOutcomes(e.gwUrl);
    const stride = 7919; // a prime: consecutive calls land on different devices
    const r = await runLoad({
      baseUrl: e.gwUrl,
      path: (n) => callPath(5, N)((n * stride) % N),
      body: BODY,
      apiKey: API_KEY,
      connections: 32,
      durationS: b.settings.soakS,
      overallRate: b.settings.soakRate,
    });
    const outcomes = await callOutcomes(e.gwUrl);
    const h1 = await mem(e.gateway);
    const list = await allDevices(e.gwUrl);
    const pendingEnd = list.devices.reduce((n, d) => n + d.pendingCalls, 0);
    const errs = errorsOf(r) + notOk(before, outcomes);
    const sp = { devices: N, seconds: b.settings.soakS, targetRate: b.settings.soakRate, calls: r.ok, online: list.devices.filter((d) => d.online).length };
    b.results.push({
      name: 'soak.calls_per_s',
      value: round(r.perSecond),
      unit: 'calls/s',
      floor: b.settings.soakRate,
      ratio: ratio(r.perSecond, b.settings.soakRate),
      params: { ...sp, errors: errs, p50: round(r.p50, 3), p99: round(r.p99, 3) },
    });
    b.results.push({
      name: 'soak.heap_after_gc',
      value: h1.heapUsed,
      unit: 'B',
      floor: h0.heapUsed,
      ratio: ratio(h0.heapUsed, h1.heapUsed),
      params: { ...sp, note: 'floor = heap after GC at the start of the soak', rssStart: h0.rss, rssEnd: h1.rss },
    });
    b.results.push({ name: 'soak.pending_end', value: pendingEnd, unit: 'entries', floor: 0, ratio: null, params: { ...sp, errors: errs } });
    b.results.push({
      name: 'soak.errors',
      value: errs,
      unit: 'calls',
      floor: 0,
      ratio: null,
      params: { ...sp, errors: errs, statusCodes: r.statusCodes, outcomes },
    });
    b.log(
      `soak: ${r.ok} calls at ${r.perSecond.toFixed(0)}/s, heap ${(h0.heapUsed / 2 ** 20).toFixed(1)} -> ${(h1.heapUsed / 2 ** 20).toFixed(1)} MiB, pending ${pendingEnd}, errors ${errs}`,
    );
  }
  await e.fleet.close('fleet-gw');
}

type PerDevice = Awaited<ReturnType<typeof measuredPerDevice>>;

/**
 * One floor's fleet round: N devices through the four round trips on bare-ws.ts's `path`, then (with the storm rows)
 * all of them dropped and back; the floor sees them all gone before the next window starts.
 */
async function floorRound(b: Bench, e: Env, group: string, path: string, timeoutMs: number) {
  const N = e.fleetN;
  const floorReady = async () => (await e.bareWs.request<Reply & { ready?: number }>({ cmd: 'count' }, 30_000)).ready ?? 0;
  const url = `ws://127.0.0.1:${(await e.bareWs.hello)['port'] as number}/xiaozhi/${path}/`;
  let t = performance.now();
  const cpu = await measuredPerDevice(e.bareWs.child.pid, N, async () => {
    const r = await e.fleet.connect({ group, mode: 'device', waitFor: 'ready', transport: 'ws', url, count: N, macGroup: 6, sources: e.sources, timeoutMs });
    if (!r.ok) throw new Error(`${group}: the floor's fleet did not get ready: ${JSON.stringify(r.stats)}`);
    await until(`every device ready on ${group}`, async () => (await floorReady()) >= N, timeoutMs, 50);
    return r;
  });
  const ms = performance.now() - t;
  // Rows the writing floor committed for the round (its last batch goes out within 250 ms, after the window, as the
  // gateway's does): what the rows' params show beside the gateway's history rows.
  const rows = path.startsWith('writes') ? await floorRows(e, 2 * N, N, timeoutMs) : undefined;
  b.log(`${group}: ${N} devices through hello, initialize and tools/list in ${ms.toFixed(0)} ms; ${(cpu.cpu[0]! / N).toFixed(0)} µs CPU each`);
  let stormMs = NaN;
  let storm: PerDevice | undefined;
  let stormRows: Written | undefined;
  if (b.only.has('storm')) {
    t = performance.now();
    storm = await measuredPerDevice(e.bareWs.child.pid, N, async () => {
      const s = await e.fleet.storm(group, timeoutMs);
      if (!s.ok) throw new Error(`${group}: the floor's storm did not complete: ${JSON.stringify(s.stats)}`);
      await until(`every device ready again on ${group}`, async () => (await floorReady()) >= N, timeoutMs, 50);
    });
    stormMs = performance.now() - t;
    if (rows) {
      const after = await floorRows(e, rows.events + 3 * N, rows.records, timeoutMs);
      stormRows = { events: after.events - rows.events, records: after.records - rows.records };
    }
    b.log(`${group} storm: ${N} devices ready again in ${stormMs.toFixed(0)} ms`);
  }
  await e.fleet.close(group);
  // The floor's closes are its work, not the next window's: they end before it starts.
  await until(`${group}: the floor to see its devices gone`, async () => (await count(e.bareWs)) === 0, timeoutMs, 50);
  return { ms, cpu, stormMs, storm, rows, stormRows };
}

/**
 * The gateway's history rows written so far (`voxgate_event_history_writes_total`); with `atLeast`, after waiting up to
 * 5 s for that many (its last batch goes out within 250 ms of the window's end): what there is then, never a failure.
 */
async function historyRows(e: Env, atLeast = 0): Promise<number> {
  const rows = () => metric(e.gwUrl, 'voxgate_event_history_writes_total', { outcome: 'written' });
  await until('the gateway to write its history rows', async () => (await rows()) >= atLeast, 5_000, 50).catch(() => undefined);
  return rows();
}

interface Written {
  events: number;
  records: number;
}

/** Devices through the floor's handshake and gone again, outside every window: what warms the simulators. */
async function warmSimulators(e: Env, n: number, timeoutMs: number): Promise<void> {
  const url = `ws://127.0.0.1:${(await e.bareWs.hello)['port'] as number}/xiaozhi/v1/`;
  const r = await e.fleet.connect({
    group: 'fleet-warmup',
    mode: 'device',
    waitFor: 'ready',
    transport: 'ws',
    url,
    count: n,
    macGroup: 6,
    sources: e.sources,
    timeoutMs,
  });
  if (!r.ok) throw new Error(`the warm-up fleet did not get ready: ${JSON.stringify(r.stats)}`);
  await e.fleet.close('fleet-warmup');
  await until('the floor to see the warm-up fleet gone', async () => (await count(e.bareWs)) === 0, timeoutMs, 50);
  await mem(e.bareWs);
  await e.fleet.gc();
}

/** The gateway's JIT warmed the same way: as many new devices through its handshake and away, outside every window. */
async function warmGateway(e: Env, n: number, timeoutMs: number): Promise<void> {
  const connected = () => metric(e.gwUrl, 'voxgate_devices_connected');
  const before = await connected();
  const r = await e.fleet.connect({
    group: 'fleet-gw-warmup',
    mode: 'device',
    waitFor: 'ready',
    transport: 'ws',
    url: `ws://127.0.0.1:${new URL(e.gwUrl).port}/xiaozhi/v1/`,
    count: n,
    macGroup: GATEWAY_WARMUP_MACS,
    sources: e.sources,
    timeoutMs,
  });
  if (!r.ok) throw new Error(`the gateway's warm-up fleet did not get ready: ${JSON.stringify(r.stats)}`);
  await e.fleet.close('fleet-gw-warmup');
  await until('the gateway to see its warm-up fleet gone', async () => (await connected()) <= before, timeoutMs, 50);
}

/** The gateway's warm-up devices' MAC group: none of the measured groups (fleet 5, floors 6, calls 1-4, cluster 7, voice from 0 up). */
const GATEWAY_WARMUP_MACS = 0x40;

/** The writing floor's committed rows, once at least these many are. */
async function floorRows(e: Env, events: number, records: number, timeoutMs: number): Promise<Written> {
  const written = async () => (await e.bareWs.request<Reply & { written?: Written }>({ cmd: 'count' }, 30_000)).written ?? { events: 0, records: 0 };
  await until(
    'the writing floor to commit its rows',
    async () => {
      const w = await written();
      return w.events >= events && w.records >= records;
    },
    timeoutMs,
    50,
  );
  return written();
}

/**
 * The gateway's ready/s and CPU per device against the floor that also writes the gateway's rows: the gateway's own
 * work against the same work. The goal rows stay the ones against the floor that writes nothing.
 */
function againstWritingFloor(
  row: 'fleet' | 'storm',
  n: number,
  gwMs: number,
  gw: PerDevice,
  f: { ms: number; cpu: PerDevice; rows: Written | undefined; gwEvents: number },
): Result[] {
  const floorKind = 'hello, initialize, 2 tools/list pages; JSON.parse; the record and history rows the gateway writes, in SQLite';
  const { ms: floorMs, cpu: floor } = f;
  // The rows each side committed in the round: the floor's history rows and records, the gateway's history rows.
  const load = { load: gw.load, floorLoad: floor.load, floorRows: f.rows, gatewayHistoryRows: f.gwEvents };
  const cpuGw = gw.cpu[0]! / n;
  const cpuFloor = floor.cpu[0]! / n;
  return [
    {
      name: `${row}.ready_per_s_vs_writes`,
      value: round(n / (gwMs / 1000)),
      unit: 'devices/s',
      floor: round(n / (floorMs / 1000)),
      ratio: ratio(floorMs, gwMs),
      params: { devices: n, floorKind, ...load },
    },
    {
      name: `${row}.cpu_us_per_device_vs_writes`,
      value: round(cpuGw),
      unit: 'µs',
      floor: round(cpuFloor),
      ratio: ratio(cpuFloor, cpuGw),
      params: { devices: n, floorKind, ...load, threads: gw.threads, floorThreads: floor.threads },
    },
  ];
}

/** `measured` for one process, with its CPU per device by thread over the same window. */
async function measuredPerDevice<T>(pid: number | undefined, n: number, work: () => Promise<T>) {
  const before = threadCpuUs(pid);
  const m = await measured([pid], work);
  return { ...m, threads: threadsPerDevice(before, threadCpuUs(pid), n) };
}

/** µs per device by thread: the main thread's user and system time, and the other threads' (V8's compilers and GC
 * helpers, libuv's pool), so a row says whether a gap is the program's own work or the JIT's and the collector's. */
function threadsPerDevice(a: ThreadCpu, b: ThreadCpu, n: number): ThreadCpu {
  const per = (x: number, y: number) => round((y - x) / n);
  return { mainUser: per(a.mainUser, b.mainUser), mainSys: per(a.mainSys, b.mainSys), other: per(a.other, b.other) };
}
