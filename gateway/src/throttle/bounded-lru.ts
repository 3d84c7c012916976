/** A value and the insertion count at which it was last put at the end of the map. */
interface Entry<V> {
  value: V;
  at: number;
}

/**
 * A least-recently-used map of at most `max` entries that takes memory as it fills: a `Map` kept in insertion order,
 * the first key the one evicted. lru-cache allocates typed arrays for `max` entries up front (1.6 MB resident for
 * 100 000 keys, before the first key), which every rate limiter and throttled log paid at idle (issue 21).
 *
 * A touched key moves to the end only once `max / 2` insertions have passed since it was last put there. Moving it on
 * every touch (a delete and a set) left each deleted copy in the key's hash-bucket chain until V8 rehashed the table,
 * so one key touched over and over among many cost ever more per touch: ~26 µs at 10 000 keys and ~170 µs at 100 000.
 * That is one device flooding a rate limiter in a large fleet. A single key's tiny table was also reallocated every
 * few touches. An entry touched within the last `max / 2` insertions is still never the one evicted.
 */
export class BoundedLru<K, V> {
  private readonly map = new Map<K, Entry<V>>();
  /** Insertions so far (new keys and moves to the end): an entry's age is this minus its `at`. */
  private inserted = 0;
  /** An entry younger than this many insertions stays where it is when touched. */
  private readonly keepFor: number;

  constructor(private readonly max: number) {
    if (!(max >= 1)) throw new RangeError(`BoundedLru needs max >= 1, got ${max}`);
    this.keepFor = Math.max(1, Math.floor(max / 2));
  }

  /** The value, now counted as recently used; undefined when absent. */
  get(key: K): V | undefined {
    const e = this.map.get(key);
    if (e === undefined) return undefined;
    if (this.inserted - e.at >= this.keepFor) this.moveToEnd(key, e);
    return e.value;
  }

  /** Set, counted as recently used; evicts the least recently used entry when over `max`. */
  set(key: K, value: V): void {
    const e = this.map.get(key);
    if (e !== undefined) {
      e.value = value;
      if (this.inserted - e.at >= this.keepFor) this.moveToEnd(key, e);
      return;
    }
    this.map.set(key, { value, at: ++this.inserted });
    if (this.map.size > this.max) this.map.delete(this.map.keys().next().value as K);
  }

  delete(key: K): boolean {
    return this.map.delete(key);
  }

  get size(): number {
    return this.map.size;
  }

  private moveToEnd(key: K, e: Entry<V>): void {
    this.map.delete(key);
    e.at = ++this.inserted;
    this.map.set(key, e);
  }
}
