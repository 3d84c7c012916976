import { LRUCache } from 'lru-cache';

export interface RateLimitOptions {
  perSecond: number;
  burst: number;
  /** Addresses tracked at once; the least recently used is forgotten (it starts again with a full bucket). */
  maxAddresses: number;
}

interface Bucket {
  tokens: number;
  at: number;
  /** Refusals since the last allowed request: the first one is logged, the rest only counted. */
  refused: number;
}

export interface Take {
  /** 0 when allowed, else the seconds until a token is available. */
  retryAfterSeconds: number;
  firstRefusal: boolean;
}

/** A token bucket per source address, in a bounded LRU: memory stays flat whatever the number of sources. */
export class AddressRateLimiter {
  private readonly buckets: LRUCache<string, Bucket>;

  constructor(
    private readonly o: RateLimitOptions,
    private readonly now: () => number = Date.now,
  ) {
    this.buckets = new LRUCache({ max: o.maxAddresses });
  }

  take(address: string): Take {
    const now = this.now();
    const b = this.buckets.get(address) ?? { tokens: this.o.burst, at: now, refused: 0 };
    b.tokens = Math.min(this.o.burst, b.tokens + ((now - b.at) / 1000) * this.o.perSecond);
    b.at = now;
    this.buckets.set(address, b);
    if (b.tokens >= 1) {
      b.tokens -= 1;
      b.refused = 0;
      return { retryAfterSeconds: 0, firstRefusal: false };
    }
    b.refused++;
    return { retryAfterSeconds: Math.max(1, Math.ceil((1 - b.tokens) / this.o.perSecond)), firstRefusal: b.refused === 1 };
  }

  get size(): number {
    return this.buckets.size;
  }
}
