/** A fleet of devices connecting, a reconnect storm, and a soak of calls over the whole fleet, each against bare connections. */
import { runLoad } from '../lib/load.js';
import { API_KEY, BODY, type Bench } from './bench.js';
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

  // Ready/s floor: the same devices doing the same four round trips (hello, initialize, two tools/list pages)
  // against a server that parses each reply with JSON.parse and nothing else; then the same storm.
  const floorReady = async () => (await e.bareWs.request<Reply & { ready?: number }>({ cmd: 'count' }, 30_000)).ready ?? 0;
  const floorUrl = `${bareUrl}xiaozhi/v1/`;
  t = performance.now();
  const fc = await measuredPerDevice(e.bareWs.child.pid, N, async () => {
    const r = await e.fleet.connect({
      group: 'fleet-floor',
      mode: 'device',
      waitFor: 'ready',
      transport: 'ws',
      url: floorUrl,
      count: N,
      macGroup: 6,
      sources: e.sources,
      timeoutMs,
    });
    if (!r.ok) throw new Error(`floor fleet did not get ready: ${JSON.stringify(r.stats)}`);
    await until('every device ready on the floor', async () => (await floorReady()) >= N, timeoutMs, 50);
    return r;
  });
  const floorConnect = fc.result;
  const floorMs = performance.now() - t;
  b.log(`fleet floor: ${N} devices through hello, initialize and tools/list in ${floorMs.toFixed(0)} ms; ${(fc.cpu[0]! / N).toFixed(0)} µs CPU each`);
  let floorStormMs = NaN;
  let floorStorm: Awaited<ReturnType<typeof measuredPerDevice>> | undefined;
  if (b.only.has('storm')) {
    t = performance.now();
    floorStorm = await measuredPerDevice(e.bareWs.child.pid, N, async () => {
      const s = await e.fleet.storm('fleet-floor', timeoutMs);
      if (!s.ok) throw new Error(`floor storm did not complete: ${JSON.stringify(s.stats)}`);
      await until('every device ready again on the floor', async () => (await floorReady()) >= N, timeoutMs, 50);
    });
    floorStormMs = performance.now() - t;
    b.log(`storm floor: ${N} devices ready again in ${floorStormMs.toFixed(0)} ms`);
  }
  await e.fleet.close('fleet-floor');
  // The floor's 10 000 closes are its work, not the gateway's: they end before the gateway's window starts.
  await until('the floor to see its devices gone', async () => (await count(e.bareWs)) === 0, timeoutMs, 50);

  // The gateway: N devices that say hello, answer initialize and a two-page tools/list.
  await e.fleet.gc();
  const gm0 = await mem(e.gateway);
  const ready0 = await metric(e.gwUrl, 'voxgate_devices_ready');
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
