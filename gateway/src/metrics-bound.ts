import type { Counter, Gauge, Histogram, LabelValues } from 'prom-client';

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

const byValue = new WeakMap<Counter<string>, Map<string, BoundCounter>>();

/**
 * bindCounter for one label whose value is known only at run time, from a small fixed set (an event's type): the
 * bound child of each value is made on first use and kept, one per counter whoever asks.
 */
export function boundChild<T extends string>(counter: Counter<T>, label: T, value: string): BoundCounter {
  const c = counter as unknown as Counter<string>;
  let children = byValue.get(c);
  if (!children) byValue.set(c, (children = new Map()));
  let child = children.get(value);
  if (!child) children.set(value, (child = bindCounter(c, { [label]: value })));
  return child;
}

/** One label set of a gauge, moved on a hot path (a device connecting, getting ready, going). */
export interface BoundGauge {
  inc(value?: number): void;
  dec(value?: number): void;
  set(value: number): void;
}

interface GaugeChild<T extends string> {
  labels: LabelValues<T>;
  /** Whether it moved since the last read: a series moved back to where it was is still shown, as prom-client does. */
  touched: boolean;
  /** A value set since the last read (undefined: none), and what was added after it. */
  value: number | undefined;
  delta: number;
}

const gaugeChildrenOf = new WeakMap<Gauge<string>, Array<GaugeChild<string>>>();

/**
 * bindCounter for a gauge: a move is one addition or assignment, and prom-client gets the result when the gauge is
 * read (`collect`: every scrape and `get()`). Every writer of that label set must go through the bound child.
 */
export function bindGauge<T extends string>(gauge: Gauge<T>, labels: LabelValues<T>): BoundGauge {
  const g = gauge as unknown as Gauge<string> & { collect?: () => unknown };
  let children = gaugeChildrenOf.get(g);
  if (!children) {
    const list: Array<GaugeChild<string>> = [];
    children = list;
    gaugeChildrenOf.set(g, list);
    const previous = g.collect;
    g.collect = function (this: Gauge<string>) {
      for (const c of list) {
        if (!c.touched) continue;
        if (c.value !== undefined) this.set(c.labels, c.value + c.delta);
        else this.inc(c.labels, c.delta);
        c.touched = false;
        c.value = undefined;
        c.delta = 0;
      }
      return previous?.call(this);
    };
  }
  const child: GaugeChild<string> = { labels: labels as LabelValues<string>, touched: false, value: undefined, delta: 0 };
  children.push(child);
  return {
    inc(value = 1) {
      child.delta += value;
      child.touched = true;
    },
    dec(value = 1) {
      child.delta -= value;
      child.touched = true;
    },
    set(value: number) {
      child.value = value;
      child.delta = 0;
      child.touched = true;
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
