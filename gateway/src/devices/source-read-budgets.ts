import { BoundedLru } from '../throttle/bounded-lru.js';
import { sourceKey } from '../throttle/source-key.js';
import type { RateLimit, Tokens } from '../throttle/token-bucket.js';

/** One source's budget, which every read budget of a device from that source spends from too. */
export interface SourceShare {
  readonly tokens: Tokens;
  readonly limit: RateLimit;
}

/**
 * Sources whose budgets are remembered at most: past them the least recently joined is forgotten (its devices keep
 * the share they hold; a device joining later starts a new one). Far above the addresses a gateway's devices come from.
 */
const MAX_SOURCES = 10_000;

/**
 * The unsolicited-frame budget of each source address (an IPv4 address or an IPv6 /64, as the connection caps count
 * them: throttle/source-key.ts), shared by the read budgets of all its devices (read-budget.ts). A device's own budget
 * bounds one device; this one bounds the many a single party may connect (up to `*.maxConnectionsPerAddress` each).
 * Kept in a bounded LRU: memory stays flat whatever the number of addresses, and a source's budget outlives its
 * connections for a while, so reconnecting does not refill it.
 */
export class SourceReadBudgets {
  private readonly shares = new BoundedLru<string, SourceShare>(MAX_SOURCES);

  constructor(readonly limit: RateLimit) {}

  /** The budget of `remoteAddress`'s source (made full on first use). */
  share(remoteAddress: string, now: number): SourceShare {
    const key = sourceKey(remoteAddress);
    let s = this.shares.get(key);
    if (!s) this.shares.set(key, (s = { tokens: { tokens: this.limit.burst, at: now }, limit: this.limit }));
    return s;
  }

  /** Sources remembered (tests). */
  get size(): number {
    return this.shares.size;
  }
}
