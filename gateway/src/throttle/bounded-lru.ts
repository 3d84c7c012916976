/**
 * A least-recently-used map of at most `max` entries that takes memory as it fills: a `Map` kept in use order
 * (a touched key is moved to the end, the first key is the one evicted). lru-cache allocates typed arrays for
 * `max` entries up front (1.6 MB resident for 100 000 keys, before the first key), which every rate limiter
 * and throttled log paid at idle (issue 21).
 */
export class BoundedLru<K, V> {
  private readonly map = new Map<K, V>();

  constructor(private readonly max: number) {
    if (!(max >= 1)) throw new RangeError(`BoundedLru needs max >= 1, got ${max}`);
  }

  /** The value, now the most recently used; undefined when absent. */
  get(key: K): V | undefined {
    const v = this.map.get(key);
    if (v !== undefined) {
      this.map.delete(key);
      this.map.set(key, v);
    }
    return v;
  }

  /** Set as the most recently used; evicts the least recently used entry when over `max`. */
  set(key: K, value: V): void {
    this.map.delete(key);
    this.map.set(key, value);
    if (this.map.size > this.max) this.map.delete(this.map.keys().next().value as K);
  }

  delete(key: K): boolean {
    return this.map.delete(key);
  }

  get size(): number {
    return this.map.size;
  }
}
