import type { Counter, Histogram, LabelValues } from 'prom-client';

/** One label set of a counter, incremented on a hot path. */
export interface BoundCounter {
  inc(value?: number): void;
}

interface Child<T extends string> {
  labels: LabelValues<T>;
  pending: number;
}

const childrenOf = new WeakMap<Counter<string>, Array<Child<string>>>();

/**
 * A counter's child for one label set, bound once: an increment is one addition, and prom-client gets the sum
 * when the counter is read (its `collect`, run on every scrape and every `get()`). prom-client's own
 * `labels(...)` child still hashes and validates the labels on every increment — four of those per relayed audio
 * frame were ~3 % of the voice relay's CPU (profile in docs/performance.md).
 */
export function bindCounter<T extends string>(counter: Counter<T>, labels: LabelValues<T>): BoundCounter {
  const c = counter as unknown as Counter<string> & { collect?: () => unknown };
  let children = childrenOf.get(c);
  if (!children) {
    const list: Array<Child<string>> = [];
    children = list;
    childrenOf.set(c, list);
    const previous = c.collect;
    c.collect = function (this: Counter<string>) {
      for (const child of list) {
        if (child.pending === 0) continue;
        const n = child.pending;
        child.pending = 0;
        this.inc(child.labels, n);
      }
      return previous?.call(this);
    };
  }
  const child: Child<string> = { labels: labels as LabelValues<string>, pending: 0 };
  children.push(child);
  return {
    inc(value = 1) {
      child.pending += value;
    },
  };
}

/** An unlabelled histogram, observed on a hot path. */
export interface BoundHistogram {
  observe(value: number): void;
}

/** What a prom-client Histogram keeps per label set (its `hashMap` values), as far as a bound one adds to it. */
interface HistogramValues {
  bucketValues: Record<number, number>;
  sum: number;
  count: number;
}
interface HistogramInternals {
  upperBounds: readonly number[];
  hashMap: Record<string, HistogramValues | undefined>;
  zero(labels: Record<string, never>): void;
  collect?: () => unknown;
}

/**
 * An unlabelled histogram observed into its own bucket counts (one comparison per bucket, one addition), handed to
 * prom-client when the histogram is read (its `collect`, like bindCounter's). prom-client's own `observe` builds a
 * labels object, hashes it and indexes its buckets by the float bound turned into a property key on every call
 * (~0.4 µs, once per device call). The values a scrape shows are the same: same buckets, sum and count.
 */
export function bindHistogram(histogram: Histogram<string>): BoundHistogram {
  const h = histogram as unknown as HistogramInternals;
  const bounds = [...h.upperBounds];
  const pending = new Array<number>(bounds.length).fill(0);
  let sum = 0;
  let count = 0;
  const previous = h.collect;
  h.collect = function (this: HistogramInternals) {
    if (count > 0) {
      if (this.hashMap[''] === undefined) this.zero({});
      const v = this.hashMap['']!;
      for (let i = 0; i < bounds.length; i++) {
        if (pending[i] === 0) continue;
        v.bucketValues[bounds[i]!] = (v.bucketValues[bounds[i]!] ?? 0) + pending[i]!;
        pending[i] = 0;
      }
      v.sum += sum;
      v.count += count;
      sum = 0;
      count = 0;
    }
    return previous?.call(this);
  };
  return {
    observe(value: number) {
      // prom-client refuses a non-finite value by throwing; nothing on the call path may throw for a metric.
      if (!Number.isFinite(value)) return;
      for (let i = 0; i < bounds.length; i++) {
        if (value <= bounds[i]!) {
          pending[i] = pending[i]! + 1;
          break;
        }
      }
      sum += value;
      count++;
    },
  };
}
