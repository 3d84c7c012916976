/** Latency samples: a percentile of sorted samples, and several runs' samples pooled (the rows taken in slices). */

/** The `p` quantile (0–1) of `sorted` by rank; NaN when there is none. */
export function quantile(sorted: ArrayLike<number>, p: number): number {
  return sorted.length === 0 ? NaN : sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))]!;
}

/** Every run's samples in one sorted array. */
export function pooled(runs: ReadonlyArray<ArrayLike<number>>): Float64Array {
  const out = new Float64Array(runs.reduce((n, r) => n + r.length, 0));
  let at = 0;
  for (const r of runs) {
    out.set(r, at);
    at += r.length;
  }
  return out.sort();
}
