/**
 * HTTP load with autocannon (as a library). Latencies are taken from autocannon's per-response event in
 * fractional milliseconds (its own histogram rounds to whole ms, too coarse on loopback).
 */
import autocannon from 'autocannon';

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
  const r = await new Promise<autocannon.Result>((resolve, reject) => {
    let cap: NodeJS.Timeout | undefined;
    const instance = autocannon(opts, (err, result) => {
      clearTimeout(cap);
      if (err) reject(err as Error);
      else resolve(result);
    });
    if (o.amount !== undefined && o.maxS !== undefined) cap = setTimeout(() => instance.stop(), o.maxS * 1000);
    instance.on('response', (_client, statusCode, _bytes, responseTime) => {
      if (statusCode >= 200 && statusCode < 300 && count < MAX_SAMPLES) samples[count++] = responseTime;
    });
  });
  // autocannon reports its own run time in seconds; fall back to the wall clock around it.
  const seconds = r.duration > 0 ? r.duration : (performance.now() - t0) / 1000;
  const sorted = samples.subarray(0, count).sort();
  const q = (p: number) => (count === 0 ? NaN : sorted[Math.min(count - 1, Math.floor(p * count))]!);
  const statusCodes: Record<string, number> = {};
  for (const [code, v] of Object.entries(r.statusCodeStats ?? {})) statusCodes[code] = (v as { count: number }).count;
  return {
    ok: r['2xx'],
    non2xx: r.non2xx,
    errors: r.errors,
    timeouts: r.timeouts,
    seconds,
    perSecond: r['2xx'] / seconds,
    p50: q(0.5),
    p99: q(0.99),
    statusCodes,
  };
}
