import { describe, expect, it } from 'vitest';
import { Lifecycle, once, within } from '../src/lifecycle.js';
import { createLogger } from '../src/log.js';

describe('Lifecycle: closers run last-opened first', () => {
  it('closes in the reverse of the opening order, once, whoever calls close()', async () => {
    const life = new Lifecycle(createLogger('silent'));
    const closed: string[] = [];
    for (const part of ['store', 'cluster', 'listeners']) life.defer(part, () => closed.push(part));
    const [a, b] = [life.close(), life.close()];
    expect(a).toBe(b);
    await a;
    expect(closed).toEqual(['listeners', 'cluster', 'store']);
    expect(() => life.defer('late', () => undefined)).toThrow(/closing/);
  });

  it('keeps closing after a closer fails, then reports the first failure', async () => {
    const life = new Lifecycle(createLogger('silent'));
    const closed: string[] = [];
    life.defer('store', () => closed.push('store'));
    life.defer('cluster', () => Promise.reject(new Error('nats gone')));
    life.defer('http', () => {
      throw new Error('http stuck');
    });
    await expect(life.close()).rejects.toThrow('http stuck');
    expect(closed).toEqual(['store']);
  });

  it('once() runs a closer a single time, however many stages call it', async () => {
    let runs = 0;
    const close = once((reason: string) => {
      runs++;
      return reason;
    });
    await Promise.all([close('a'), close('b')]);
    expect(runs).toBe(1);
  });

  it('within() gives up waiting at the deadline, and passes a settled promise through', async () => {
    await within(new Promise(() => undefined), 5);
    await expect(within(Promise.reject(new Error('no')), 60_000)).rejects.toThrow('no');
  });
});
