import { Counter, Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { bindCounter } from '../src/metrics-bound.js';

const value = async (c: Counter<string>, labels: Record<string, string>) =>
  (await c.get()).values.find((v) => Object.entries(labels).every(([k, x]) => v.labels[k] === x))?.value ?? 0;

describe('bindCounter', () => {
  it('adds up increments per label set, seen when the counter is read', async () => {
    const registry = new Registry();
    const c = new Counter({ name: 'test_frames_total', help: 'h', labelNames: ['dir'], registers: [registry] });
    const up = bindCounter(c, { dir: 'up' });
    const down = bindCounter(c, { dir: 'down' });
    up.inc();
    up.inc(4);
    down.inc(2);
    expect(await value(c, { dir: 'up' })).toBe(5);
    expect(await value(c, { dir: 'down' })).toBe(2);
    // Read twice: nothing is counted twice.
    expect(await value(c, { dir: 'up' })).toBe(5);
    up.inc();
    expect(await value(c, { dir: 'up' })).toBe(6);
    expect(await registry.metrics()).toContain('test_frames_total{dir="up"} 6');
  });

  it('adds to what the counter counts directly, and two bindings of one label set share it', async () => {
    const c = new Counter({ name: 'test_calls_total', help: 'h', labelNames: ['outcome'], registers: [] });
    c.inc({ outcome: 'ok' }, 10);
    const a = bindCounter(c, { outcome: 'ok' });
    const b = bindCounter(c, { outcome: 'ok' });
    a.inc();
    b.inc(2);
    expect(await value(c, { outcome: 'ok' })).toBe(13);
  });

  it('keeps the counter’s own collect callback', async () => {
    let collected = 0;
    const c = new Counter({
      name: 'test_collected_total',
      help: 'h',
      labelNames: ['k'],
      registers: [],
      collect() {
        collected++;
      },
    });
    bindCounter(c, { k: 'v' }).inc();
    await c.get();
    expect(collected).toBe(1);
    expect(await value(c, { k: 'v' })).toBe(1);
  });
});
