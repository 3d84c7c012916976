import { afterEach, describe, expect, it } from 'vitest';
import { createMetrics } from '../../src/metrics.js';
import { MetricsHistory } from '../../src/metrics-history.js';
import { startTestGateway, type TestGateway } from '../../../test/support/gateway-harness.js';

describe('metrics history (the console health charts)', () => {
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

  describe('GET /v1/metrics/history', () => {
    let t: TestGateway | undefined;
    afterEach(async () => {
      await t?.close();
      t = undefined;
    });

    it('needs an API key and serves the samples the gateway takes', async () => {
      t = await startTestGateway({ metrics: { historyIntervalMs: 20, historySamples: 5 } });
      expect((await t.api('GET', '/v1/metrics/history', undefined, { apiKey: null })).status).toBe(401);
      const gw = t;
      await expect
        .poll(async () => (await gw.api<{ samples: unknown[] }>('GET', '/v1/metrics/history')).body.samples.length, { timeout: 15_000, interval: 20 })
        .toBeGreaterThan(0);
      const res = await t.api<{ intervalMs: number; capacity: number; samples: Array<Record<string, unknown>> }>('GET', '/v1/metrics/history');
      expect(res.body).toMatchObject({ intervalMs: 20, capacity: 5 });
      expect(res.body.samples.length).toBeLessThanOrEqual(5);
      expect(Object.keys(res.body.samples[0]!).sort()).toEqual(['at', 'callLatencyMs', 'callsPerSecond', 'devicesOnline', 'eventsPerSecond']);
    });
  });
});
