/** Calls through the gateway against the same calls through a relay that only moves bytes (the floor). */
import { runLoad } from '../lib/load.js';
import { API_KEY, BODY, CALL_DEVICES, CONCURRENCY, type Bench } from './bench.js';
import type { Env } from './env.js';
import { describeGc, GcNvp, type GcWindow } from '../lib/gc-nvp.js';
import {
  callOutcomes,
  callPath,
  count,
  serialPath,
  errorsOf,
  alternating,
  loadOnce,
  mergeMeasured,
  metric,
  notOk,
  ratio,
  round,
  until,
  type CallAmounts,
  type MeasuredLoad,
} from './measure.js';

export async function callPathScenario(b: Bench, e: Env, transport: 'ws' | 'mqtt'): Promise<Map<string, number>> {
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
    e.fleet.connect({
      group: `${transport}-gw`,
      mode: 'device',
      waitFor: 'ready',
      transport,
      url: gwTarget,
      count: n,
      macGroup: gwGroup,
      sources: transport === 'ws' ? e.sources : [],
      timeoutMs: 60_000,
    }),
    e.fleet.connect({
      group: `${transport}-floor`,
      mode: 'device',
      waitFor: 'open',
      transport,
      url: floorTarget,
      count: n,
      macGroup: floorGroup,
      sources: transport === 'ws' ? e.sources : [],
      timeoutMs: 60_000,
    }),
  ]);
  if (!gw.ok || !fl.ok) throw new Error(`${transport}: devices did not connect (${JSON.stringify({ gw, fl })})`);
  await until(`${transport} devices ready on the gateway`, async () => (await metric(e.gwUrl, 'voxgate_devices_ready')) >= readyBefore + n, 30_000);
  await until(`${transport} devices on the floor relay`, async () => (await count(relay)) >= n, 30_000, 100);
  b.log(`${transport}: ${n} devices on the gateway and on the floor`);
  await warmUp(b, [
    { baseUrl: e.gwUrl, many: callPath(gwGroup, n), one: callPath(gwGroup, 1), apiKey: API_KEY, between: () => callOutcomes(e.gwUrl) },
    { baseUrl: floorUrl, many: callPath(floorGroup, n), one: serialPath(floorGroup, 1) },
  ]);
  const perSecond = new Map<string, number>();
  const label = transport === 'ws' ? 'websocket' : 'mqtt';
  // Collections per row, when the processes run with --trace-gc-nvp (docs/performance.md, "callgc"); nothing otherwise.
  const gwGc = new GcNvp(e.gateway.child.stdout);
  const floorGc = new GcNvp(relay.child.stdout);
  const amounts = CALL_AMOUNTS[b.mode];
  const slices = CALL_SLICES[b.mode];
  const slice = amounts && { ...amounts, measured: amounts.measured / slices, maxS: { ...amounts.maxS, measured: amounts.maxS.measured / slices } };
  for (const devices of CALL_DEVICES) {
    for (const c of CONCURRENCY) {
      let gwNotOk = 0;
      const serialRow = devices === 1 && c > 1;
      // Slice k of a side; each side warms up before its first slice only.
      const opts = (k: number, gc: GcNvp) => ({ amounts: slice, gc, warm: k === 0 });
      const sides = [
        async (k: number) => {
          const before = await callOutcomes(e.gwUrl);
          const r = await loadOnce(b, e.gwUrl, callPath(gwGroup, devices), c, API_KEY, e.gateway.child.pid, opts(k, gwGc));
          gwNotOk += notOk(before, await callOutcomes(e.gwUrl));
          return r;
        },
        // One device, several callers: the gateway runs one call at a time per device, so its floor does too (the
        // pipelined relay beside it in full runs only).
        ...(!serialRow || PIPELINED_BESIDE_SERIAL[b.mode]
          ? [(k: number) => loadOnce(b, floorUrl, callPath(floorGroup, devices), c, undefined, relay.child.pid, opts(k, floorGc))]
          : []),
        ...(serialRow ? [(k: number) => loadOnce(b, floorUrl, serialPath(floorGroup, devices), c, undefined, relay.child.pid, opts(k, floorGc))] : []),
      ];
      const bySide = await alternating(sides, slices);
      const merged: MeasuredLoad[] = bySide.map(mergeMeasured);
      const g = merged[0]!;
      const serial = serialRow ? merged.at(-1) : undefined;
      const f = merged.length === 3 || !serialRow ? merged[1] : undefined;
      const floor = (serial ?? f)!;
      const floorSlices = bySide[bySide.length - 1]!;
      const params = {
        transport: label,
        devices,
        concurrency: c,
        slices,
        // Each slice's own ratio (gateway ÷ floor, calls/s, in the order taken): how much the row moved within itself.
        sliceRatios: bySide[0]!.map((x, i) => ratio(x.perSecond, floorSlices[i]!.perSecond)),
        seconds: Math.round(g.seconds * 100) / 100,
        calls: g.ok,
        floorCalls: floor.ok,
        floorKind: serial ? 'serial per device' : 'pipelined',
        ...(serial && f
          ? { pipelinedFloorPerS: round(f.perSecond), pipelinedFloorP50: round(f.p50, 3), pipelinedFloorCpuUsPerCall: round(f.cpuUsPerCall) }
          : {}),
        cpuUsPerCall: round(g.cpuUsPerCall),
        floorCpuUsPerCall: round(floor.cpuUsPerCall),
        otherThreadsUsPerCall: round(g.otherThreadsUsPerCall),
        floorOtherThreadsUsPerCall: round(floor.otherThreadsUsPerCall),
        load: g.load,
        floorLoad: floor.load,
        errors: errorsOf(g) + gwNotOk,
        floorErrors: (f ? errorsOf(f) : 0) + (serial ? errorsOf(serial) : 0),
        statusCodes: g.statusCodes,
        ...(g.gc ? { gc: gcFigures(g.gc, g.ok) } : {}),
        ...(floor.gc ? { floorGc: gcFigures(floor.gc, floor.ok) } : {}),
      };
      perSecond.set(`${devices}/${c}`, g.perSecond);
      const lat = { transport: label, devices, concurrency: c, floorKind: params.floorKind, errors: params.errors };
      b.results.push({
        name: `${transport}.calls_per_s`,
        value: round(g.perSecond),
        unit: 'calls/s',
        floor: round(floor.perSecond),
        ratio: ratio(g.perSecond, floor.perSecond),
        params,
      });
      b.results.push({
        name: `${transport}.p50_ms`,
        value: round(g.p50, 3),
        unit: 'ms',
        floor: round(floor.p50, 3),
        ratio: ratio(floor.p50, g.p50),
        params: lat,
      });
      b.results.push({
        name: `${transport}.p99_ms`,
        value: round(g.p99, 3),
        unit: 'ms',
        floor: round(floor.p99, 3),
        ratio: ratio(floor.p99, g.p99),
        params: lat,
      });
      // CPU per call: a lower figure is better, so the ratio is floor/gateway like the latencies'.
      b.results.push({
        name: `${transport}.cpu_us_per_call`,
        value: round(g.cpuUsPerCall),
        unit: 'µs',
        floor: round(floor.cpuUsPerCall),
        ratio: ratio(floor.cpuUsPerCall, g.cpuUsPerCall),
        params: { ...lat, load: g.load, floorLoad: floor.load },
      });
      b.log(
        `${transport} d=${devices} c=${c}: gateway ${g.perSecond.toFixed(0)}/s p50 ${g.p50.toFixed(2)} ms ${g.cpuUsPerCall.toFixed(0)} µs/call, ` +
          `floor (${params.floorKind}) ${floor.perSecond.toFixed(0)}/s p50 ${floor.p50.toFixed(2)} ms ${floor.cpuUsPerCall.toFixed(0)} µs/call; ` +
          `other threads ${g.otherThreadsUsPerCall.toFixed(0)} / ${floor.otherThreadsUsPerCall.toFixed(0)} µs/call; load ${g.load.join('→')}; errors ${params.errors}/${params.floorErrors}`,
      );
      if (g.gc) b.log(`  gateway ${describeGc(g.gc, g.ok)}`);
      if (floor.gc) b.log(`  floor   ${describeGc(floor.gc, floor.ok)}`);
    }
  }
  await Promise.all([e.fleet.close(`${transport}-gw`), e.fleet.close(`${transport}-floor`)]);
  await until(`${transport} devices gone from the gateway`, async () => (await metric(e.gwUrl, 'voxgate_devices_connected')) === 0, 30_000, 50);
  return perSecond;
}

/**
 * Calls per side before the first measured row: to many devices at concurrency 64, to one device at 16, then to many
 * devices at concurrency 1 (none in tiny mode), each leg followed by what the rows do between runs on that side (the
 * gateway's: a /metrics read, `callOutcomes`). Without that read the warm-up's code was compiled for the call route
 * alone: the rows' first /metrics read, just before the first row, deoptimised fastify's routing, hooks and reply and
 * the API-key check ("wrong map", "wrong call target": a second route and reply through them), and the gateway
 * recompiled ~35 functions during the first row (25–35 µs per call on its compiler threads against 0–5 in the rows
 * after it, the row 0.77–0.99 of its floor; docs/performance.md, "Quick bench, afternoon of 2026-11-27"). A running
 * gateway is scraped between calls all the time, so code compiled with both in its feedback is what it runs.
 * Counted in calls, not seconds: the same work for every side whatever its speed (a slower process got fewer calls to
 * compile on before), in quick mode about 1 / 0.5 / 1 s on a quiet machine (6 000 / 2 000 / 2 500 took the quick
 * bench past its five minutes).
 * Each leg ends after twice those seconds all the same (`JIT_WARM_MAX_S`), so a loaded machine's run stays bounded.
 */
const JIT_WARM_CALLS = { full: [12_000, 4_000, 5_000], quick: [4_000, 1_500, 2_000], tiny: [0, 0, 0] } as const;
const JIT_WARM_MAX_S = { full: [6, 2, 4], quick: [2, 0.75, 1.5], tiny: [0, 0, 0] } as const;

/**
 * Each row's warm-up (before each side's first slice) and measured run (per side, over its `CALL_SLICES` slices, as
 * is `maxS.measured`), in calls (tiny mode counts its own). 4 000 calls take
 * about the 1.2–1.5 s the quick rows took on a quiet machine, and every row sees about as many collections as the
 * others (~4 scavenges; a row's CPU moved with whether one more fell in it when rows were timed; 5 000 took the quick
 * bench past its five minutes). Each run ends after `maxS` all the same (about twice what it takes on a quiet
 * machine), so a loaded machine's bench stays within its watchdog.
 */
const CALL_AMOUNTS: Record<Bench['mode'], CallAmounts | undefined> = {
  full: { warm: 2_000, measured: 30_000, maxS: { warm: 4, measured: 20 } },
  quick: { warm: 200, measured: 4_000, maxS: { warm: 0.4, measured: 2.5 } },
  tiny: undefined,
};

/**
 * Each side of a row is measured in this many slices of its calls, taken in mirrored order (gateway, floor, floor,
 * gateway, gateway, …; with the serial floor, A B C C B A …), each side warmed up before its first slice only (the
 * warm-up warms the process: every run opens its own connections). Taken once each, gateway then floor, a row's ratio
 * moved by ±20 % between runs with the two sides' CPU per call; cut in two (gateway, floor, floor, gateway), the first
 * pair read higher than the second in all six WebSocket rows of a run (three of six MQTT ones): what ran just before a
 * slice weighs on it. Mirrored, each side gets as many of each turn and as much of a load that rises or falls through
 * the row (docs/performance.md, "Quick bench, late afternoon of 2026-11-27").
 */
const CALL_SLICES: Record<Bench['mode'], number> = { full: 8, quick: 4, tiny: 1 };

/**
 * Whether the one-device rows (whose floor serialises per device) also run the pipelined relay, kept in
 * `params.pipelinedFloor*` (what serialising costs the floor): not in quick mode, where its ~1.4 s in each of the four
 * rows went into the five minutes and no ratio reads it.
 */
const PIPELINED_BESIDE_SERIAL: Record<Bench['mode'], boolean> = { full: true, quick: false, tiny: true };

/** A row's collections, per call and per scavenge (params of the JSON rows). */
function gcFigures(w: GcWindow, calls: number): Record<string, number> {
  const per = (x: number) => (w.scavenges > 0 ? x / w.scavenges : 0);
  return {
    scavengesPer10kCalls: round((w.scavenges / calls) * 1e4),
    promotedKbPerScavenge: round(per(w.promoted) / 1024),
    copiedKbPerScavenge: round(per(w.survived) / 1024),
    scavengePauseUsPerCall: round((w.pauseMs / calls) * 1000),
    fullCollections: w.fullCollections,
  };
}

/**
 * Calls through every side before the first row: a process runs the first calls it serves unoptimised and compiles
 * its hot code meanwhile (on other threads, whose CPU the rows count), and the gateway has far more code than the
 * floor. Without this the first rows measured, the one-device ones, carried the gateway's warm-up: its CPU per call
 * fell row after row while the floor's stayed flat (docs/performance.md, "voicews"). The concurrency-1 leg: one call
 * at a time takes paths that pipelined calls do not (a socket idle between calls, one request per read), and the
 * gateway's compiler threads were still busy in the concurrency-1 rows without it (docs/performance.md, "gcset").
 */
async function warmUp(
  b: Bench,
  sides: Array<{ baseUrl: string; many: (n: number) => string; one: (n: number) => string; apiKey?: string; between?: () => Promise<unknown> }>,
): Promise<void> {
  const [many, one, serial] = JIT_WARM_CALLS[b.mode];
  const [manyS, oneS, serialS] = JIT_WARM_MAX_S[b.mode];
  if (many === 0) return;
  for (const s of sides)
    for (const [path, connections, amount, maxS] of [
      [s.many, 64, many, manyS],
      [s.one, 16, one, oneS],
      [s.many, 1, serial, serialS],
    ] as const) {
      await runLoad({ baseUrl: s.baseUrl, path, body: BODY, connections, amount, maxS, ...(s.apiKey ? { apiKey: s.apiKey } : {}) });
      await s.between?.();
    }
}
