import type { Counter, LabelValues } from 'prom-client';

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
