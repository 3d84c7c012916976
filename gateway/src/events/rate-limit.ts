/** Token bucket: `ratePerSecond` sustained, up to `burst` at once. */
export interface RateLimit {
  ratePerSecond: number;
  burst: number;
}

/** What one `take` says: pass, or drop (and `report` is set once per report window with what was dropped). */
export type Admission = { ok: true } | { ok: false; report?: { dropped: number } };

interface Bucket {
  tokens: number;
  refilledAt: number;
  /** Dropped since the last report. */
  dropped: number;
  reportedAt: number;
}

/**
 * One token bucket per key (a device id), so one chatty key can never spend another's budget. Drops are
 * reported once per `reportEveryMs` per key, so a flood costs one log line per window, not one per event.
 */
export class KeyedRateLimiter {
  private readonly buckets = new Map<string, Bucket>();

  constructor(
    private readonly limit: RateLimit,
    private readonly reportEveryMs = 60_000,
    private readonly now: () => number = Date.now,
  ) {}

  take(key: string): Admission {
    const t = this.now();
    let b = this.buckets.get(key);
    if (!b) {
      b = { tokens: this.limit.burst, refilledAt: t, dropped: 0, reportedAt: -Infinity };
      this.buckets.set(key, b);
    }
    b.tokens = Math.min(this.limit.burst, b.tokens + ((t - b.refilledAt) / 1000) * this.limit.ratePerSecond);
    b.refilledAt = t;
    if (b.tokens >= 1) {
      b.tokens -= 1;
      return { ok: true };
    }
    b.dropped++;
    if (t - b.reportedAt < this.reportEveryMs) return { ok: false };
    const report = { dropped: b.dropped };
    b.dropped = 0;
    b.reportedAt = t;
    return { ok: false, report };
  }

  /** Forget a key (its device went offline): the map holds only keys that are live. */
  forget(key: string): void {
    this.buckets.delete(key);
  }

  get size(): number {
    return this.buckets.size;
  }
}
