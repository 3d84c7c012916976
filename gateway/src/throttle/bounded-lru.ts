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
 * few touches. An entry touched within the last `max / 2` insertions is still never the one evicted. Past `max`, the
 * oldest eighth goes at once (`evictOldest`): the map holds between 7/8 of `max` and `max` entries once full.
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
    if (this.map.size > this.max) this.evictOldest(this.map.size - this.max + Math.floor(this.max / 8));
  }

  delete(key: K): boolean {
    return this.map.delete(key);
  }

  get size(): number {
    return this.map.size;
  }

  /**
   * Evicts the `n` oldest entries in one walk. One at a time, each eviction's `keys().next()` walked every deleted entry
   * that earlier evictions left at the front of the table: with a stream of new keys (forged device ids, ever-new
   * addresses) that cost ~7 µs a key at 10 000 and ~40 µs at 100 000. An eighth of the map at a time keeps that walk
   * to a few steps per key, and a key touched within the last `max / 2` insertions is still among those kept.
   */
  private evictOldest(n: number): void {
    for (const key of this.map.keys()) {
      this.map.delete(key);
      if (--n <= 0) return;
    }
  }

  private moveToEnd(key: K, e: Entry<V>): void {
    this.map.delete(key);
    e.at = ++this.inserted;
    this.map.set(key, e);
  }
}
