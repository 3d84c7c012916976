import { afterEach, describe, expect, it } from 'vitest';
import { startTestGateway, TEST_API_KEY, type TestGateway } from '../../../test/support/gateway-harness.js';

const METRICS_KEY = 'prometheus-scrape-key-0123456789';

async function scrape(url: string, key?: string): Promise<{ status: number; body: string; type: string | null }> {
  const res = await fetch(url, key ? { headers: { authorization: `Bearer ${key}` } } : {});
  return { status: res.status, body: await res.text(), type: res.headers.get('content-type') };
}

describe('/metrics and the metrics history, as the gateway mounts them (issue 8, defect 10f)', () => {
  // Who may scrape, and with which key, is the route's own (test/api/health.test.ts); here, where it is mounted.
  it('moves to a listener of its own with metrics.port, keyed when a metrics key is set', async () => {
    const t = await startTestGateway({ metrics: { port: 0, host: '127.0.0.1' } });
    try {
      expect(t.gw.metricsPort).toEqual(expect.any(Number));
      expect(t.gw.metricsPort).not.toBe(t.gw.httpPort);
      // Gone from the API port, whatever the key.
      expect((await scrape(`${t.baseUrl}/metrics`, TEST_API_KEY)).status).toBe(404);
      const own = await scrape(`http://127.0.0.1:${t.gw.metricsPort}/metrics`);
      expect(own.status).toBe(200);
      expect(own.body).toContain('voxgate_devices_ready');
      expect((await fetch(`http://127.0.0.1:${t.gw.metricsPort}/v1/devices`)).status).toBe(404);
    } finally {
      await t.close();
    }
    const keyed = await startTestGateway({ metrics: { port: 0, host: '127.0.0.1', key: METRICS_KEY } });
    try {
      const url = `http://127.0.0.1:${keyed.gw.metricsPort}/metrics`;
      expect((await scrape(url)).status).toBe(401);
      expect((await scrape(url, METRICS_KEY)).status).toBe(200);
    } finally {
      await keyed.close();
    }
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
