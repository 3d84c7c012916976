import { describe, expect, it } from 'vitest';
import { createMetrics } from '../src/metrics.js';
import { MetricsHistory } from '../src/metrics-history.js';

/** The console's health history as a part: samples computed from the metrics on an injected clock. */
describe('MetricsHistory', () => {
  it('turns counters into rates per second over each interval, and reads gauges as they are', async () => {
    const metrics = createMetrics();
    let now = 1_000_000;
    const h = new MetricsHistory(metrics, 10_000, 3, () => now);
    expect(await h.sample()).toBeUndefined(); // the baseline
    metrics.calls.inc({ outcome: 'ok' }, 50);
    metrics.calls.inc({ outcome: 'timeout' }, 5);
    metrics.callDuration.observe(0.02);
    metrics.callDuration.observe(0.04);
    metrics.devicesConnected.set({ transport: 'websocket' }, 7);
    metrics.events.inc({ type: 'device.ready' }, 20);
    now += 10_000;
    const s = await h.sample();
    expect(s).toEqual({
      at: new Date(now).toISOString(),
      devicesOnline: { websocket: 7, mqtt: 0 },
      callsPerSecond: { ok: 5, timeout: 0.5 },
      callLatencyMs: 30,
      eventsPerSecond: 2,
    });
    // A quiet interval: no call finished, so no latency (not zero).
    now += 10_000;
    expect(await h.sample()).toMatchObject({ callsPerSecond: {}, callLatencyMs: null, eventsPerSecond: 0 });
  });

  it('keeps at most `capacity` samples, oldest first', async () => {
    const metrics = createMetrics();
    let now = 0;
    const h = new MetricsHistory(metrics, 1000, 3, () => now);
    for (let i = 0; i <= 5; i++) {
      now = i * 1000;
      await h.sample();
    }
    expect(h.samples().map((s) => s.at)).toEqual([3000, 4000, 5000].map((t) => new Date(t).toISOString()));
  });

  it('samples rates between readings, mean latency, devices by transport, and keeps a fixed-size ring', async () => {
    const metrics = createMetrics();
    let now = 1_000_000;
    const h = new MetricsHistory(metrics, 10_000, 3, () => now);
    expect(await h.sample()).toBeUndefined(); // the baseline
    metrics.calls.inc({ outcome: 'ok' }, 20);
    metrics.calls.inc({ outcome: 'timeout' }, 5);
    metrics.callDuration.observe(0.1);
    metrics.callDuration.observe(0.3);
    metrics.events.inc({ type: 'device.online' }, 10);
    metrics.devicesConnected.set({ transport: 'mqtt' }, 4);
    now += 10_000;
    expect(await h.sample()).toEqual({
      at: new Date(now).toISOString(),
      devicesOnline: { websocket: 0, mqtt: 4 },
      callsPerSecond: { ok: 2, timeout: 0.5 },
      callLatencyMs: 200,
      eventsPerSecond: 1,
    });
    now += 10_000;
    expect(await h.sample()).toMatchObject({ callsPerSecond: {}, callLatencyMs: null, eventsPerSecond: 0 });
    for (let i = 0; i < 5; i++) {
      now += 10_000;
      await h.sample();
    }
    expect(h.samples()).toHaveLength(3);
    expect(h.samples()[2]!.at).toBe(new Date(now).toISOString());
  });
});
