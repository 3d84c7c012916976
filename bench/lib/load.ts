/**
 * HTTP load with autocannon (as a library). Latencies are taken from autocannon's per-response event in
 * fractional milliseconds (its own histogram rounds to whole ms, too coarse on loopback).
 */
import autocannon from 'autocannon';
import { pooled, quantile } from './samples.js';

export interface LoadOptions {
  baseUrl: string;
  /** Called for each request: the path to hit (rotates devices). */
  path: (n: number) => string;
  body: string;
  apiKey?: string;
  connections: number;
  /** Seconds; or `amount` requests, within `maxS` seconds when given (a loaded machine's runs stay bounded). */
  durationS?: number;
  amount?: number;
  maxS?: number;
  /** Requests per second over all connections (soak). */
  overallRate?: number;
  timeoutS?: number;
}

export interface LoadResult {
  ok: number;
  non2xx: number;
  errors: number;
  timeouts: number;
  seconds: number;
  perSecond: number;
  p50: number;
  p99: number;
  statusCodes: Record<string, number>;
  /** Every successful call's latency, ms, sorted (for percentiles over several runs: `mergeLoads`). */
  latencies: Float64Array;
}

const MAX_SAMPLES = 2_000_000;

export async function runLoad(o: LoadOptions): Promise<LoadResult> {
  let n = 0;
  const samples = new Float64Array(MAX_SAMPLES);
  let count = 0;
  const headers: Record<string, string> = { 'content-type': 'application/json' };
  if (o.apiKey) headers['authorization'] = `Bearer ${o.apiKey}`;
  const opts: autocannon.Options = {
    url: o.baseUrl,
    connections: o.connections,
    pipelining: 1,
    method: 'POST',
    headers,
    body: o.body,
    timeout: o.timeoutS ?? 10,
    // autocannon checks its deadline once per sample interval (default 1 s): 1.5 s would run 2 s.
    sampleInt: 100,
    requests: [
      {
        setupRequest: (req) => {
          req.path = o.path(n++);
          return req;
        },
      },
    ],
  };
  if (o.amount !== undefined) opts.amount = o.amount;
  else opts.duration = o.durationS ?? 1;
  if (o.overallRate !== undefined) opts.overallRate = o.overallRate;
  const t0 = performance.now();
  let lastResponseAt = 0;
  const r = await new Promise<autocannon.Result>((resolve, reject) => {
    let cap: NodeJS.Timeout | undefined;
    const instance = autocannon(opts, (err, result) => {
      clearTimeout(cap);
      if (err) reject(err as Error);
      else resolve(result);
    });
    if (o.amount !== undefined && o.maxS !== undefined) cap = setTimeout(() => instance.stop(), o.maxS * 1000);
    instance.on('response', (_client, statusCode, _bytes, responseTime) => {
      lastResponseAt = performance.now();
      if (statusCode >= 200 && statusCode < 300 && count < MAX_SAMPLES) samples[count++] = responseTime;
    });
  });
  // The run's time is taken to its last response: autocannon's own `duration` ends at its first sample tick after
  // the run (`sampleInt`, 100 ms), so a run of ~1 s read up to 10 % long, by a different amount each run (the call
  // rows' seconds were 100 ms steps plus 0–20 ms in 132 of 156 rows; docs/performance.md, "Quick bench, late afternoon
  // of 2026-11-27").
  const seconds = lastResponseAt > t0 ? (lastResponseAt - t0) / 1000 : r.duration > 0 ? r.duration : (performance.now() - t0) / 1000;
  // A copy of the samples taken (not a view, which would keep the whole buffer alive with the result).
  const sorted = samples.slice(0, count).sort();
  const statusCodes: Record<string, number> = {};
  for (const [code, v] of Object.entries(r.statusCodeStats ?? {})) statusCodes[code] = (v as { count: number }).count;
  return {
    ok: r['2xx'],
    non2xx: r.non2xx,
    errors: r.errors,
    timeouts: r.timeouts,
    seconds,
    perSecond: r['2xx'] / seconds,
    p50: quantile(sorted, 0.5),
    p99: quantile(sorted, 0.99),
    statusCodes,
    latencies: sorted,
  };
}

/** Several runs of one load as one: counts and seconds summed, the rate over the summed time, percentiles over every latency. */
export function mergeLoads(runs: readonly LoadResult[]): LoadResult {
  const sum = (f: (r: LoadResult) => number) => runs.reduce((s, r) => s + f(r), 0);
  const latencies = pooled(runs.map((r) => r.latencies));
  const statusCodes: Record<string, number> = {};
  for (const r of runs) for (const [code, n] of Object.entries(r.statusCodes)) statusCodes[code] = (statusCodes[code] ?? 0) + n;
  const ok = sum((r) => r.ok);
  const seconds = sum((r) => r.seconds);
  return {
    ok,
    non2xx: sum((r) => r.non2xx),
    errors: sum((r) => r.errors),
    timeouts: sum((r) => r.timeouts),
    seconds,
    perSecond: ok / seconds,
    p50: quantile(latencies, 0.5),
    p99: quantile(latencies, 0.99),
    statusCodes,
    latencies,
  };
}
