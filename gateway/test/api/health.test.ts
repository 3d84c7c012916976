import { describe, expect, it } from 'vitest';
import { metricsKeys } from '../../src/api/app.js';
import { requireApiKey } from '../../src/api/auth.js';
import { deviceRoutes } from '../../src/api/devices.js';
import { healthRoutes, metricsRoute, startMetricsListener } from '../../src/api/health.js';
import { createMetrics } from '../../src/metrics.js';
import { apiPart, bearer, PART_API_KEY } from '../../../test/support/api-parts.js';
import { silentLog } from '../../../test/support/device-parts.js';
import { registryPart } from '../../../test/support/registry-parts.js';

const METRICS_KEY = 'prometheus-scrape-key-0123456789';

/** The open probes and /metrics as buildApi mounts them (no key hook around them), over real metrics. */
async function opsPart(o: { ready?: () => boolean; metricsKey?: string } = {}) {
  const metrics = createMetrics();
  let ready = true;
  const app = await apiPart(
    async (scope) => {
      await scope.register(healthRoutes, { ready: o.ready ?? (() => ready) });
      await scope.register(metricsRoute, { metrics, keys: metricsKeys(() => [PART_API_KEY], o.metricsKey) });
      // The /v1 routes, behind the API keys alone.
      await scope.register(async (v1) => {
        requireApiKey(v1, () => [PART_API_KEY]);
        await v1.register(deviceRoutes, { registry: registryPart().registry });
      });
    },
    { keys: null },
  );
  const scrape = async (key?: string) => {
    const res = await app.inject({ method: 'GET', url: '/metrics', headers: key ? bearer(key) : {} });
    return { status: res.statusCode, body: res.body, type: res.headers['content-type'] };
  };
  return { app, metrics, scrape, setReady: (r: boolean) => (ready = r) };
}

describe('/healthz and /readyz', () => {
  it('are open; readyz says 503 while the gateway is not ready', async () => {
    const { app, setReady } = await opsPart();
    expect((await app.inject('/healthz')).json()).toEqual({ status: 'ok' });
    expect([(await app.inject('/readyz')).statusCode, (await app.inject('/readyz')).json()]).toEqual([200, { status: 'ready' }]);
    setReady(false);
    const r = await app.inject('/readyz');
    expect([r.statusCode, r.json()]).toEqual([503, { status: 'not ready' }]);
    await app.close();
  });
});

describe('/metrics is protected (issue 8, defect 10f)', () => {
  it('needs an API key by default', async () => {
    const { app, scrape } = await opsPart();
    const open = await scrape();
    expect(open.status).toBe(401);
    expect(open.type).toContain('application/problem+json');
    expect(JSON.parse(open.body)).toMatchObject({ code: 'UNAUTHORIZED' });
    expect(open.body).not.toContain('voxgate_');
    expect((await scrape('not-a-key-at-all-0000')).status).toBe(401);
    const ok = await scrape(PART_API_KEY);
    expect(ok.status).toBe(200);
    expect(ok.body).toContain('voxgate_devices_ready');
    // Health probes stay open.
    expect((await app.inject('/healthz')).statusCode).toBe(200);
    expect((await app.inject('/readyz')).statusCode).toBe(200);
    await app.close();
  });

  it('accepts a metrics key (GATEWAY_METRICS_KEY) that opens nothing else', async () => {
    const { app, scrape } = await opsPart({ metricsKey: METRICS_KEY });
    expect((await scrape(METRICS_KEY)).status).toBe(200);
    expect((await scrape(PART_API_KEY)).status).toBe(200);
    expect((await scrape()).status).toBe(401);
    const api = await app.inject({ method: 'GET', url: '/v1/devices', headers: bearer(METRICS_KEY) });
    expect([api.statusCode, api.json<{ code: string }>().code]).toEqual([401, 'UNAUTHORIZED']);
    await app.close();
  });

  it('on a listener of its own, serves without a key unless given keys', async () => {
    const metrics = createMetrics();
    const open = await startMetricsListener({ metrics, keys: undefined, host: '127.0.0.1', port: 0, log: silentLog });
    try {
      const res = await fetch(`http://127.0.0.1:${open.port}/metrics`);
      expect(res.status).toBe(200);
      expect(await res.text()).toContain('voxgate_devices_ready');
      // Nothing else lives there.
      expect((await fetch(`http://127.0.0.1:${open.port}/v1/devices`)).status).toBe(404);
    } finally {
      await open.close();
    }
    const keyed = await startMetricsListener({ metrics, keys: () => [METRICS_KEY], host: '127.0.0.1', port: 0, log: silentLog });
    try {
      const url = `http://127.0.0.1:${keyed.port}/metrics`;
      const refused = await fetch(url);
      expect(refused.status).toBe(401);
      expect(refused.headers.get('www-authenticate')).toContain('Bearer');
      expect((await fetch(url, { headers: bearer(METRICS_KEY) })).status).toBe(200);
    } finally {
      await keyed.close();
    }
  });

  it('lets every API key scrape, plus the metrics key when one is set', () => {
    let keys = ['a-key-0123456789abcdef'];
    expect(metricsKeys(() => keys, undefined)()).toEqual(['a-key-0123456789abcdef']);
    const withMetrics = metricsKeys(() => keys, METRICS_KEY);
    keys = ['rotated-key-0123456789'];
    // Read per request: a rotated API key list is seen at once.
    expect(withMetrics()).toEqual(['rotated-key-0123456789', METRICS_KEY]);
  });
});
