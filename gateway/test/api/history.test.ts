import { describe, expect, it } from 'vitest';
import { historyRoutes } from '../../src/api/history.js';
import { createMetrics } from '../../src/metrics.js';
import { MetricsHistory } from '../../src/metrics-history.js';
import { apiPart, bearer } from '../../../test/support/api-parts.js';

/** GET /v1/metrics/history over a history sampled by hand (the gateway's timer: e2e/metrics.test.ts). */
describe('GET /v1/metrics/history', () => {
  it('needs an API key and serves the samples taken, oldest first, with the interval and capacity', async () => {
    const metrics = createMetrics();
    let now = 1_000_000;
    const history = new MetricsHistory(metrics, 10_000, 2, () => now);
    const app = await apiPart((scope) => scope.register(historyRoutes, { history }));
    try {
      expect((await app.inject('/v1/metrics/history')).statusCode).toBe(401);
      const read = async () =>
        (await app.inject({ method: 'GET', url: '/v1/metrics/history', headers: bearer() })).json<{
          intervalMs: number;
          capacity: number;
          samples: Array<Record<string, unknown>>;
        }>();
      expect(await read()).toEqual({ intervalMs: 10_000, capacity: 2, samples: [] });
      await history.sample(); // the baseline: no sample yet
      for (let i = 1; i <= 3; i++) {
        metrics.calls.inc({ outcome: 'ok' }, 10 * i);
        now += 10_000;
        await history.sample();
      }
      const body = await read();
      expect(body.samples.map((s) => s['callsPerSecond'])).toEqual([{ ok: 2 }, { ok: 3 }]);
      expect(Object.keys(body.samples[0]!).sort()).toEqual(['at', 'callLatencyMs', 'callsPerSecond', 'devicesOnline', 'eventsPerSecond']);
    } finally {
      await app.close();
    }
  });
});
