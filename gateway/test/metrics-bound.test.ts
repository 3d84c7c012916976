import { Counter, Gauge, Histogram, Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { bindCounter, bindGauge, bindHistogram, boundChild } from '../src/metrics-bound.js';

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

describe('boundChild', () => {
  it('binds one child per label value, shared by whoever asks for it', async () => {
    const c = new Counter({ name: 'test_events_total', help: 'h', labelNames: ['type'], registers: [] });
    expect(boundChild(c, 'type', 'a')).toBe(boundChild(c, 'type', 'a'));
    boundChild(c, 'type', 'a').inc();
    boundChild(c, 'type', 'a').inc();
    boundChild(c, 'type', 'b').inc(3);
    expect(await value(c, { type: 'a' })).toBe(2);
    expect(await value(c, { type: 'b' })).toBe(3);
  });
});

describe('bindGauge', () => {
  const read = async (g: Gauge<string>, labels: Record<string, string>) =>
    (await g.get()).values.find((v) => Object.entries(labels).every(([k, x]) => v.labels[k] === x))?.value;

  it('moves a labelled gauge up and down, seen when it is read, as prom-client’s own inc and dec would', async () => {
    const registry = new Registry();
    const g = new Gauge({ name: 'test_connected', help: 'h', labelNames: ['transport'], registers: [registry] });
    const ws = bindGauge(g, { transport: 'websocket' });
    const mqtt = bindGauge(g, { transport: 'mqtt' });
    expect(await read(g, { transport: 'websocket' })).toBeUndefined();
    ws.inc();
    ws.inc();
    ws.dec();
    mqtt.inc();
    mqtt.dec();
    expect(await read(g, { transport: 'websocket' })).toBe(1);
    // Moved back to where it was: still shown (prom-client's own inc then dec shows 0 too).
    expect(await read(g, { transport: 'mqtt' })).toBe(0);
    expect(await read(g, { transport: 'websocket' })).toBe(1);
    ws.dec();
    expect(await registry.metrics()).toContain('test_connected{transport="websocket"} 0');
  });

  it('sets an unlabelled gauge; moves after a set add to it; another label set written directly is left alone', async () => {
    const g = new Gauge({ name: 'test_ready', help: 'h', registers: [] });
    const ready = bindGauge(g, {});
    expect(await read(g, {})).toBe(0);
    ready.set(5);
    ready.set(7);
    expect(await read(g, {})).toBe(7);
    ready.inc(2);
    expect(await read(g, {})).toBe(9);
    ready.set(3);
    ready.dec();
    expect(await read(g, {})).toBe(2);
    const labelled = new Gauge({ name: 'test_other', help: 'h', labelNames: ['k'], registers: [] });
    bindGauge(labelled, { k: 'bound' }).inc();
    labelled.set({ k: 'direct' }, 4);
    expect(await read(labelled, { k: 'direct' })).toBe(4);
    expect(await read(labelled, { k: 'bound' })).toBe(1);
  });
});

describe('bindHistogram', () => {
  const buckets = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60];
  const text = async (name: string, observe: (h: Histogram) => void) => {
    const registry = new Registry();
    const h = new Histogram({ name, help: 'h', buckets, registers: [registry] });
    observe(h);
    return registry.metrics();
  };

  it('exposes the same buckets, sum and count as observing prom-client directly', async () => {
    // Bounds themselves, values between them, below the first and above the last (only +Inf and the count).
    const values = [0, 0.005, 0.0051, 0.01, 0.3, 1, 2.4999, 61, 1e6, 0.02, 0.02, 59.9];
    const direct = await text('test_call_seconds', (h) => values.forEach((v) => h.observe(v)));
    const bound = await text('test_call_seconds', (h) => {
      const b = bindHistogram(h);
      values.forEach((v) => b.observe(v));
    });
    expect(bound).toBe(direct);
    expect(bound).toContain('test_call_seconds_count 12');
  });

  it('is read as often as wanted, adds to direct observations, and survives a reset', async () => {
    const h = new Histogram({ name: 'test_dur_seconds', help: 'h', buckets, registers: [] });
    const b = bindHistogram(h);
    h.observe(0.002);
    b.observe(0.003);
    b.observe(7);
    const count = async () => (await h.get()).values.find((v) => v.metricName === 'test_dur_seconds_count')?.value;
    const le = async (bound: number) => (await h.get()).values.find((v) => v.labels['le'] === bound)?.value;
    expect(await count()).toBe(3);
    expect(await count()).toBe(3);
    expect(await le(0.005)).toBe(2);
    expect(await le(10)).toBe(3);
    h.reset();
    // As prom-client does for its own observations: a reset histogram shows no series until the next one.
    expect(await count()).toBeUndefined();
    b.observe(0.2);
    expect(await count()).toBe(1);
    expect(await le(0.25)).toBe(1);
    expect(await le(0.1)).toBe(0);
  });

  it('drops a value that is not a finite number instead of throwing on the call path', async () => {
    const h = new Histogram({ name: 'test_nan_seconds', help: 'h', buckets, registers: [] });
    const b = bindHistogram(h);
    expect(() => b.observe(Number.NaN)).not.toThrow();
    b.observe(1);
    expect((await h.get()).values.find((v) => v.metricName === 'test_nan_seconds_count')?.value).toBe(1);
  });
});
