/** Zero entries kept at least this many before a sweep: a near-empty map is not swept on every zero. */
const MIN_SWEEP = 64;

/**
 * A count per key (open sockets per source address) that keeps a key whose count falls to zero until zero keys are
 * half the map, then drops them all in one sweep. Deleting a key at zero and adding it back on its next connection
 * made V8's `Map` keep each deleted copy in that key's hash chain until the table was rehashed: one address connecting
 * and closing over and over among many cost ever more per connection (~50 µs at 10 000 connected sources, ~330 µs at
 * 100 000). A sweep deletes many different keys at once, which V8 handles cheaply.
 */
export class KeyCounts<K> {
  private readonly map = new Map<K, number>();
  /** Keys held at zero, waiting for the next sweep. */
  private zeros = 0;

  get(key: K): number {
    return this.map.get(key) ?? 0;
  }

  /** Adds `by` (negative to take away) to the key's count, never below zero; the new count. */
  add(key: K, by: number): number {
    const old = this.map.get(key);
    const n = Math.max(0, (old ?? 0) + by);
    if (old === 0 && n > 0) this.zeros--;
    this.map.set(key, n);
    if (n === 0 && old !== 0 && ++this.zeros >= MIN_SWEEP && this.zeros * 2 >= this.map.size) this.sweep();
    return n;
  }

  /** Keys with a count above zero. */
  get size(): number {
    return this.map.size - this.zeros;
  }

  /** Keys the map holds, those at zero included (what the sweep bounds). */
  get held(): number {
    return this.map.size;
  }

  private sweep(): void {
    for (const [key, n] of this.map) if (n === 0) this.map.delete(key);
    this.zeros = 0;
  }
}
