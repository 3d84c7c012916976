import { BoundedLru } from './bounded-lru.js';

/** A token bucket's size: `ratePerSecond` sustained, up to `burst` at once. */
export interface RateLimit {
  ratePerSecond: number;
  burst: number;
}

/** What one `take` says: pass, or refused with the whole seconds until a token is back (for Retry-After). */
export type Take = { ok: true } | { ok: false; retryAfterSeconds: number };

interface Bucket {
  tokens: number;
  at: number;
}

/**
 * One token bucket per key (a source address, a device, a server), so one party never spends another's
 * budget. The buckets live in a bounded LRU: memory stays flat whatever the number of keys, and a key
 * forgotten (evicted, or `forget`) starts again with a full bucket.
 */
export class KeyedTokenBucket {
  private readonly buckets: BoundedLru<string, Bucket>;

  constructor(
    private readonly limit: RateLimit,
    o: { maxKeys: number; now?: () => number },
  ) {
    this.buckets = new BoundedLru(o.maxKeys);
    this.now = o.now ?? Date.now;
  }

  private readonly now: () => number;

  take(key: string): Take {
    const now = this.now();
    let b = this.buckets.get(key);
    if (!b) this.buckets.set(key, (b = { tokens: this.limit.burst, at: now }));
    // A wall clock stepped back (NTP) gives a negative time: no refill then, not a debt of the whole step.
    b.tokens = Math.min(this.limit.burst, b.tokens + (Math.max(0, now - b.at) / 1000) * this.limit.ratePerSecond);
    b.at = now;
    if (b.tokens >= 1) {
      b.tokens -= 1;
      return { ok: true };
    }
    return { ok: false, retryAfterSeconds: Math.max(1, Math.ceil((1 - b.tokens) / this.limit.ratePerSecond)) };
  }

  /** Forget a key that is gone (a device offline): only live keys take room. */
  forget(key: string): void {
    this.buckets.delete(key);
  }

  get size(): number {
    return this.buckets.size;
  }
}
