import { describe, expect, it } from 'vitest';
import { BoundedLru } from '../../src/throttle/bounded-lru.js';

describe('BoundedLru', () => {
  it('evicts the least recently used key once over max', () => {
    const lru = new BoundedLru<string, number>(2);
    lru.set('a', 1);
    lru.set('b', 2);
    expect(lru.get('a')).toBe(1); // a is now the most recent
    lru.set('c', 3);
    expect(lru.get('b')).toBeUndefined();
    expect(lru.get('a')).toBe(1);
    expect(lru.get('c')).toBe(3);
    expect(lru.size).toBe(2);
  });

  it('replaces a value without growing, and forgets deleted keys', () => {
    const lru = new BoundedLru<string, number>(2);
    lru.set('a', 1);
    lru.set('a', 2);
    expect(lru.size).toBe(1);
    expect(lru.get('a')).toBe(2);
    expect(lru.delete('a')).toBe(true);
    expect(lru.delete('a')).toBe(false);
    expect(lru.size).toBe(0);
  });

  it('keeps a key touched over and over in its place, and still evicts the oldest around it', () => {
    // One device flooding a limiter among many: its touches must not reorder the map (each move left a deleted copy
    // in the key's hash chain), and it is not evicted while the keys older than it are.
    const lru = new BoundedLru<string, number>(1000);
    for (let i = 0; i < 1000; i++) lru.set(`k${i}`, i);
    for (let n = 0; n < 10_000; n++) expect(lru.get('k500')).toBe(500);
    for (let i = 1000; i < 1250; i++) lru.set(`k${i}`, i);
    // Past 1000 the oldest eighth goes at once: twice here, 126 keys each time.
    expect(lru.size).toBe(998);
    expect(lru.get('k500')).toBe(500);
    expect(lru.get('k251')).toBeUndefined();
    expect(lru.get('k252')).toBe(252);
    expect(lru.get('k1249')).toBe(1249);
  });

  it('evicts the oldest eighth at once past max, and never a key touched within the last max / 2 insertions', () => {
    const lru = new BoundedLru<string, number>(80);
    for (let i = 0; i < 80; i++) lru.set(`k${i}`, i);
    expect(lru.get('k45')).toBe(45); // 34 insertions old: stays in place
    lru.set('x', 0); // 81 > 80: k0..k10 go (1 over, plus 80 / 8)
    expect(lru.size).toBe(70);
    expect(lru.get('k10')).toBeUndefined();
    expect(lru.get('k11')).toBe(11);
    lru.set('hot', 1);
    for (let i = 0; i < 200; i++) {
      lru.set(`n${i}`, i);
      expect(lru.get('hot')).toBe(1); // touched after every insertion: never evicted
    }
    expect(lru.size).toBeLessThanOrEqual(80);
    expect(lru.size).toBeGreaterThanOrEqual(70);
  });

  it('moves a touched key to the end once half the map was inserted after it', () => {
    const lru = new BoundedLru<string, number>(4);
    for (const [i, k] of ['a', 'b', 'c', 'd'].entries()) lru.set(k, i);
    lru.get('d'); // just inserted: stays where it is, which is already the end
    lru.get('a'); // three insertions old: moves to the end
    lru.set('e', 4);
    expect(lru.get('b')).toBeUndefined();
    lru.set('a', 10); // a value replaced in place
    expect(lru.size).toBe(4);
    lru.set('f', 5);
    lru.set('g', 6);
    expect(lru.get('c')).toBeUndefined();
    expect(lru.get('d')).toBeUndefined();
    expect(lru.get('a')).toBe(10);
    expect(lru.size).toBe(4);
  });

  it('refuses a max below one', () => {
    expect(() => new BoundedLru(0)).toThrow(RangeError);
  });
});
