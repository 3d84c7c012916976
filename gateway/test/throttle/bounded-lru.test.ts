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

  it('keeps a key touched over and over in its place: its touches do not reorder the map', () => {
    // One device flooding a limiter among many: moving its key on every touch left a deleted copy in the key's hash
    // chain per touch. Kept in place, the key ages like any other once no longer touched.
    const lru = new BoundedLru<string, number>(1000);
    for (let i = 0; i < 1000; i++) lru.set(`k${i}`, i);
    for (let n = 0; n < 10_000; n++) expect(lru.get('k500')).toBe(500);
    for (let i = 0; i < 600; i++) lru.set(`n${i}`, i);
    // Five eighths went (126 keys at a time): k0..k629. Moved to the end by its touches, k500 would have stayed.
    expect(lru.size).toBe(970);
    expect(lru.get('k629')).toBeUndefined();
    expect(lru.get('k500')).toBeUndefined();
    expect(lru.get('k630')).toBe(630);
    expect(lru.get('n599')).toBe(599);
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
