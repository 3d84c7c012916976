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

  it('refuses a max below one', () => {
    expect(() => new BoundedLru(0)).toThrow(RangeError);
  });
});
