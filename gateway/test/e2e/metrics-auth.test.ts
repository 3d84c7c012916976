import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { startTestGateway, TEST_API_KEY } from '../../../test/support/gateway-harness.js';

const METRICS_KEY = 'prometheus-scrape-key-0123456789';

async function scrape(url: string, key?: string): Promise<{ status: number; body: string; type: string | null }> {
  const res = await fetch(url, key ? { headers: { authorization: `Bearer ${key}` } } : {});
  return { status: res.status, body: await res.text(), type: res.headers.get('content-type') };
}

describe('/metrics is protected (issue 8, defect 10f)', () => {
  it('needs an API key by default', async () => {
    const t = await startTestGateway();
    try {
      const open = await scrape(`${t.baseUrl}/metrics`);
      expect(open.status).toBe(401);
      expect(open.type).toContain('application/problem+json');
      expect(JSON.parse(open.body)).toMatchObject({ code: 'UNAUTHORIZED' });
      expect(open.body).not.toContain('voxgate_');
      expect((await scrape(`${t.baseUrl}/metrics`, 'not-a-key-at-all-0000')).status).toBe(401);
      const ok = await scrape(`${t.baseUrl}/metrics`, TEST_API_KEY);
      expect(ok.status).toBe(200);
      expect(ok.body).toContain('voxgate_devices_ready');
      // Health probes stay open.
      expect((await fetch(`${t.baseUrl}/healthz`)).status).toBe(200);
      expect((await fetch(`${t.baseUrl}/readyz`)).status).toBe(200);
    } finally {
      await t.close();
    }
  });

  it('accepts a metrics key (GATEWAY_METRICS_KEY) that opens nothing else', async () => {
    const t = await startTestGateway({}, { GATEWAY_METRICS_KEY: METRICS_KEY });
    try {
      expect((await scrape(`${t.baseUrl}/metrics`, METRICS_KEY)).status).toBe(200);
      expect((await scrape(`${t.baseUrl}/metrics`, TEST_API_KEY)).status).toBe(200);
      expect((await scrape(`${t.baseUrl}/metrics`)).status).toBe(401);
      const api = await t.api<{ code: string }>('GET', '/v1/devices', undefined, { apiKey: METRICS_KEY });
      expect([api.status, api.body.code]).toEqual([401, 'UNAUTHORIZED']);
    } finally {
      await t.close();
    }
  });

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

  it('keeps the metrics key out of config errors', () => {
    const dir = mkdtempSync(join(tmpdir(), 'voxgate-metrics-'));
    try {
      writeFileSync(join(dir, 'gateway.config.json'), '{}');
      expect(() => loadConfig({ GATEWAY_CONFIG: join(dir, 'gateway.config.json'), GATEWAY_METRICS_KEY: 'short-key' })).toThrow(
        /metrics\.key: at least 16 characters \(from GATEWAY_METRICS_KEY\)$/,
      );
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
