import { describe, expect, it } from 'vitest';
import { KeyCounts } from '../../src/throttle/key-counts.js';

describe('KeyCounts', () => {
  it('counts up and down per key, never below zero', () => {
    const c = new KeyCounts<string>();
    expect(c.add('a', 1)).toBe(1);
    expect(c.add('a', 1)).toBe(2);
    expect(c.add('b', 1)).toBe(1);
    expect(c.size).toBe(2);
    expect(c.add('a', -1)).toBe(1);
    expect(c.add('b', -1)).toBe(0);
    expect(c.add('b', -1)).toBe(0);
    expect(c.get('b')).toBe(0);
    expect(c.get('never')).toBe(0);
    expect(c.size).toBe(1);
  });

  it('keeps a key that falls to zero and comes back, so a reconnecting source is not deleted and re-added each time', () => {
    const c = new KeyCounts<string>();
    for (let i = 0; i < 1000; i++) c.add(`source-${i}`, 1);
    for (let n = 0; n < 10_000; n++) {
      c.add('flapping', 1);
      expect(c.add('flapping', -1)).toBe(0);
    }
    expect(c.held).toBe(1001);
    expect(c.size).toBe(1000);
    expect(c.add('flapping', 1)).toBe(1);
    expect(c.size).toBe(1001);
  });

  it('drops the keys at zero in one sweep once they are half of what it holds', () => {
    const c = new KeyCounts<string>();
    for (let i = 0; i < 200; i++) c.add(`k${i}`, 1);
    for (let i = 0; i < 99; i++) c.add(`k${i}`, -1);
    expect(c.held).toBe(200); // 99 at zero: under half
    c.add('k99', -1); // the 100th: half of 200
    expect(c.held).toBe(100);
    expect(c.size).toBe(100);
    expect(c.get('k0')).toBe(0);
    expect(c.get('k100')).toBe(1);
  });
});
