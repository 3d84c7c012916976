/** What the scenarios measure with: the gateway's metrics and device list, the load runs, rounding. */
import { measured, threadCpuUs } from '../lib/cpu.js';
import { mergeWindows, type GcNvp, type GcWindow } from '../lib/gc-nvp.js';
import { mergeLoads, runLoad, type LoadResult } from '../lib/load.js';
import type { Proc, Reply } from '../lib/procs.js';
import { API_KEY, BODY, CALL_AMOUNT_TINY, TOOL, type Bench } from './bench.js';

export function macOf(group: number, index: number): string {
  const b = [0x02, group & 0xff, (index >>> 24) & 0xff, (index >>> 16) & 0xff, (index >>> 8) & 0xff, index & 0xff];
  return b.map((x) => x.toString(16).padStart(2, '0')).join(':');
}

export const callPath = (group: number, devices: number) => (n: number) => `/v1/devices/${macOf(group, n % devices)}/tools/${TOOL}/call`;
/** The floors' route that runs one call at a time per device (bench/floors/serial.ts). */
export const serialPath = (group: number, devices: number) => (n: number) => `/serial${callPath(group, devices)(n)}`;

/** Polls `cond` until it holds; a `cond` that throws (a server not listening yet) counts as not yet. */
export async function until(what: string, cond: () => Promise<boolean>, timeoutMs: number, everyMs = 20): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (Date.now() < end) {
    if (await cond().catch(() => false)) return;
    await new Promise((r) => setTimeout(r, everyMs));
  }
  throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
}

export async function metric(baseUrl: string, name: string, labels: Record<string, string> = {}): Promise<number> {
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
export async function allDevices(baseUrl: string): Promise<{ devices: Array<{ pendingCalls: number; online: boolean }> }> {
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

export async function callOutcomes(baseUrl: string): Promise<Record<string, number>> {
  const text = await (await fetch(`${baseUrl}/metrics`, { headers: { authorization: `Bearer ${API_KEY}` } })).text();
  const out: Record<string, number> = {};
  for (const m of text.matchAll(/^voxgate_calls_total\{outcome="([a-z_]+)"\} (\S+)$/gm)) out[m[1]!] = Number(m[2]);
  return out;
}

export const notOk = (before: Record<string, number>, after: Record<string, number>) =>
  Object.entries(after).reduce((n, [k, v]) => (k === 'ok' ? n : n + v - (before[k] ?? 0)), 0);

export interface Mem {
  rss: number;
  heapUsed: number;
  external: number;
  arrayBuffers: number;
}

export async function count(p: Proc): Promise<number> {
  return (await p.request<Reply & { devices?: number }>({ cmd: 'count' }, 30_000)).devices ?? 0;
}

/** `young`: the bytes V8's young generation held committed (see bench/procs/ipc.ts), when the probe says. */
export async function mem(p: Proc): Promise<Mem & { devices?: number; young?: number }> {
  const r = await p.request<Reply & { mem: Mem; devices?: number; young?: number }>({ cmd: 'mem' }, 30_000);
  return { ...r.mem, ...(r.devices === undefined ? {} : { devices: r.devices }), ...(r.young === undefined ? {} : { young: r.young }) };
}

export interface MeasuredLoad extends LoadResult {
  /** µs of CPU the serving process (`pid`) spent over the measured run (not the warm-up), and per successful call. */
  cpuUs: number;
  cpuUsPerCall: number;
  /** … of which its threads other than the main one (V8's GC helpers and compilers, libuv's pool). */
  otherThreadsUs: number;
  otherThreadsUsPerCall: number;
  /** The machine's 1-minute load average at the start and the end of the measured run. */
  load: [number, number];
  /** The serving process's collections in the measured run, when it runs with `--trace-gc-nvp` (`gc` given). */
  gc?: GcWindow;
}

/**
 * How many calls a row's warm-up and its measured run make (instead of the bench's seconds; the call rows), each within
 * `maxS` seconds: on a loaded machine a run ends there with fewer calls (the row's `calls` says how many).
 */
export interface CallAmounts {
  warm: number;
  measured: number;
  maxS: { warm: number; measured: number };
}

/**
 * A warm-up, then the measured run; `pid` is the process serving it (its CPU time is read around the run). `o.amounts`:
 * counted in calls rather than `b.settings`' seconds, so each side gets as many as the other whatever its speed.
 * `o.gc`: the serving process's `--trace-gc-nvp` lines, read over the measured run. `o.warm: false` skips the warm-up
 * (it warms the process, not the connections: the measured run opens its own).
 */
export async function loadOnce(
  b: Bench,
  baseUrl: string,
  path: (n: number) => string,
  connections: number,
  apiKey?: string,
  pid?: number,
  o: { amounts?: CallAmounts; gc?: GcNvp; warm?: boolean } = {},
): Promise<MeasuredLoad> {
  const base = { baseUrl, path, body: BODY, connections, ...(apiKey ? { apiKey } : {}) };
  const tiny = b.mode === 'tiny';
  const { amounts } = o;
  const warm = tiny
    ? { amount: Math.max(connections, 10) }
    : amounts
      ? { amount: Math.max(amounts.warm, connections * 4), maxS: amounts.maxS.warm }
      : { durationS: b.settings.warmS };
  const run = tiny
    ? { amount: Math.max(CALL_AMOUNT_TINY, connections * 4) }
    : amounts
      ? { amount: Math.max(amounts.measured, connections * 16), maxS: amounts.maxS.measured }
      : { durationS: b.settings.callS };
  if (o.warm ?? true) await runLoad({ ...base, ...warm });
  const other = () => (pid === undefined ? NaN : threadCpuUs(pid).other);
  const t0 = other();
  o.gc?.open();
  const m = await measured([pid], () => runLoad({ ...base, ...run }));
  const gc = o.gc?.close();
  return withCpu(m.result, m.cpu[0]!, other() - t0, m.load, gc && gc.lines > 0 ? gc : undefined);
}

function withCpu(r: LoadResult, cpuUs: number, otherThreadsUs: number, load: [number, number], gc: GcWindow | undefined): MeasuredLoad {
  const perCall = (us: number) => (r.ok > 0 ? us / r.ok : NaN);
  return {
    ...r,
    cpuUs,
    cpuUsPerCall: perCall(cpuUs),
    otherThreadsUs,
    otherThreadsUsPerCall: perCall(otherThreadsUs),
    load,
    ...(gc ? { gc } : {}),
  };
}

/**
 * One side's slices of a row as one measured run: calls, seconds and CPU summed, the rate and CPU per call over the
 * sums, percentiles over every call, the load at the first slice's start and the last one's end.
 */
export function mergeMeasured(slices: readonly MeasuredLoad[]): MeasuredLoad {
  if (slices.length === 1) return slices[0]!;
  const sum = (f: (m: MeasuredLoad) => number) => slices.reduce((s, m) => s + f(m), 0);
  const gcs = slices.flatMap((m) => (m.gc ? [m.gc] : []));
  return withCpu(
    mergeLoads(slices),
    sum((m) => m.cpuUs),
    sum((m) => m.otherThreadsUs),
    [slices[0]!.load[0], slices[slices.length - 1]!.load[1]],
    gcs.length === slices.length ? mergeWindows(gcs) : undefined,
  );
}

/** Runs every side `n` times (slice k = 0 … n−1), in mirrored order on every other pass; each side's results in order. */
export async function alternating<T>(sides: ReadonlyArray<(k: number) => Promise<T>>, n: number): Promise<T[][]> {
  const out = sides.map(() => [] as T[]);
  for (let k = 0; k < n; k++)
    for (let j = 0; j < sides.length; j++) {
      const i = k % 2 === 0 ? j : sides.length - 1 - j;
      out[i]!.push(await sides[i]!(k));
    }
  return out;
}

export const errorsOf = (r: LoadResult) => r.non2xx + r.errors + r.timeouts;

export function round(x: number, digits = 1): number {
  if (!Number.isFinite(x)) return NaN;
  const f = 10 ** digits;
  return Math.round(x * f) / f;
}

export function ratio(a: number, b: number): number | null {
  return Number.isFinite(a) && Number.isFinite(b) && b !== 0 ? Math.round((a / b) * 1000) / 1000 : null;
}

/**
 * The ratio of two sides' resident memory per session (floor's ÷ ours), or none when either side's RSS grew by less
 * than the heap and Buffers its sessions hold: that process served them from pages it had already committed, so its
 * RSS did not resolve the per-session cost at this count (it read −0.5 to 5 KB against 8–10 KB live), and the live
 * figures (`liveRatio`) are the comparison then.
 */
export function residentRatio(
  floor: { rss: number; live: number },
  ours: { rss: number; live: number },
): { ratio: number | null; liveRatio: number | null; note: string | undefined } {
  const liveRatio = ratio(floor.live, ours.live);
  if (floor.rss < floor.live || ours.rss < ours.live)
    return { ratio: null, liveRatio, note: 'resident growth below the live memory held: RSS did not resolve the per-session cost; compare liveRatio' };
  return { ratio: ratio(floor.rss, ours.rss), liveRatio, note: undefined };
}
