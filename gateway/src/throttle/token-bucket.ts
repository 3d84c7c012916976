import { BoundedLru } from './bounded-lru.js';

/** A token bucket's size: `ratePerSecond` sustained, up to `burst` at once. */
export interface RateLimit {
  ratePerSecond: number;
  burst: number;
}

/** A token bucket's state: `tokens` as of `at` (ms; negative: owed). */
export interface Tokens {
  tokens: number;
  at: number;
}

/** Refill `b` for the time since `at` (up to the burst), then take `cost`: the tokens left, negative when owed. */
export function takeTokens(b: Tokens, limit: RateLimit, now: number, cost: number): number {
  b.tokens = Math.min(limit.burst, b.tokens + ((now - b.at) / 1000) * limit.ratePerSecond) - cost;
  b.at = now;
  return b.tokens;
}

/**
 * A reader's byte budget: spend `bytes` read from `b`, and answer how long (ms) to stop reading until the deficit is
 * repaid (0: go on). What was read is handled; the reader pauses its socket or pipe for that long (TCP or pipe
 * backpressure: the sender's writes wait, nothing is dropped).
 */
export function readPauseMs(b: Tokens, limit: RateLimit, now: number, bytes: number): number {
  const left = takeTokens(b, limit, now, bytes);
  return left >= 0 ? 0 : Math.ceil((-left / limit.ratePerSecond) * 1000);
}

/** A reader's byte budget: `take` spends bytes read, and answers how long (ms) to stop reading (readPauseMs). */
export interface ByteBudget {
  take(bytes: number): number;
}

/** One reader's (or one party's readers') budget of `ratePerSecond` bytes, a second's worth at once, full when made. */
export function byteBudget(ratePerSecond: number, now: () => number = () => performance.now()): ByteBudget {
  const limit = { ratePerSecond, burst: ratePerSecond };
  const b: Tokens = { tokens: limit.burst, at: now() };
  return { take: (bytes) => readPauseMs(b, limit, now(), bytes) };
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
