/**
 * A token bucket per server for the log messages passed on to /mcp sessions: a chatty server can't flood
 * every session. Kept apart so that a shared keyed bucket can take its place.
 */
export class LogRate {
  private readonly buckets = new Map<string, { tokens: number; at: number }>();

  constructor(private readonly perSecond: number) {}

  allow(server: string): boolean {
    const rate = this.perSecond;
    const now = performance.now();
    const b = this.buckets.get(server) ?? { tokens: rate, at: now };
    b.tokens = Math.min(rate, b.tokens + ((now - b.at) / 1000) * rate);
    b.at = now;
    this.buckets.set(server, b);
    if (b.tokens < 1) return false;
    b.tokens -= 1;
    return true;
  }
}
