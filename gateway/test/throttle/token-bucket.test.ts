import { describe, expect, it } from 'vitest';
import { KeyedTokenBucket } from '../../src/throttle/token-bucket.js';

describe('KeyedTokenBucket', () => {
  it('gives each key its own bucket, refills at the rate, and says when to retry', () => {
    let now = 0;
    const bucket = new KeyedTokenBucket({ ratePerSecond: 2, burst: 3 }, { maxKeys: 100, now: () => now });
    const takes = (key: string, n: number) => Array.from({ length: n }, () => bucket.take(key));
    expect(takes('a', 5).map((x) => x.ok)).toEqual([true, true, true, false, false]);
    expect(takes('b', 3).every((x) => x.ok)).toBe(true); // a's flood never spends b's budget
    expect(bucket.take('a')).toEqual({ ok: false, retryAfterSeconds: 1 });
    now += 1000; // two tokens back
    expect(takes('a', 3).map((x) => x.ok)).toEqual([true, true, false]);
    now += 60_000;
    expect(takes('a', 4).map((x) => x.ok)).toEqual([true, true, true, false]); // refilled to the burst, no further
  });

  it('a wall clock stepped back refills nothing, and owes nothing: the bucket goes on from the new time', () => {
    let now = 10_000_000;
    const bucket = new KeyedTokenBucket({ ratePerSecond: 1, burst: 2 }, { maxKeys: 10, now: () => now });
    expect(bucket.take('k').ok).toBe(true);
    now -= 3_600_000; // NTP steps the clock an hour back
    expect(bucket.take('k').ok).toBe(true); // the token left, not a debt of 3 600
    expect(bucket.take('k').ok).toBe(false);
    now += 1000;
    expect(bucket.take('k').ok).toBe(true);
  });

  it('says the whole seconds until a token is back, at least 1', () => {
    let now = 0;
    const slow = new KeyedTokenBucket({ ratePerSecond: 0.1, burst: 1 }, { maxKeys: 10, now: () => now });
    expect(slow.take('k').ok).toBe(true);
    expect(slow.take('k')).toEqual({ ok: false, retryAfterSeconds: 10 });
    now += 9_500;
    expect(slow.take('k')).toEqual({ ok: false, retryAfterSeconds: 1 });
  });

  it('keeps at most maxKeys buckets (LRU); a forgotten key starts full', () => {
    let now = 0;
    const bucket = new KeyedTokenBucket({ ratePerSecond: 1, burst: 2 }, { maxKeys: 100, now: () => now });
    for (let i = 0; i < 10_000; i++) bucket.take(`10.0.${i >> 8}.${i & 255}`);
    // Past maxKeys the oldest eighth goes at once (BoundedLru): between 88 and 100 are kept.
    expect(bucket.size).toBeLessThanOrEqual(100);
    expect(bucket.size).toBeGreaterThanOrEqual(88);
    expect(bucket.take('192.0.2.1').ok).toBe(true);
    expect(bucket.take('192.0.2.1').ok).toBe(true);
    expect(bucket.take('192.0.2.1')).toEqual({ ok: false, retryAfterSeconds: 1 });
    bucket.forget('192.0.2.1');
    expect(bucket.take('192.0.2.1').ok).toBe(true);
    now += 1000;
    expect(bucket.size).toBeLessThanOrEqual(100);
    expect(bucket.size).toBeGreaterThanOrEqual(88);
  });
});
