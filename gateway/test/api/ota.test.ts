import { OtaResponseSchema } from '@voxgate/protocol';
import { afterEach, describe, expect, it } from 'vitest';
import { metricValue } from '../../../test/support/device-parts.js';
import { closeOtaParts, otaPart } from '../../../test/support/ota-parts.js';

const headers = { 'device-id': 'AA_BB_CC_DD_EE_01', 'client-id': '7d3c1f0e-3b7a-4c8e-9f21-0a1b2c3d4e5f', 'content-type': 'application/json' };
const systemInfo = JSON.stringify({ mac_address: 'aa:bb:cc:dd:ee:01', application: { name: 'xiaozhi', version: '1.7.6' }, board: { type: 'sim' } });

afterEach(closeOtaParts);

/** POST /xiaozhi/ota/ and /activate, beside a /v1 route (test/support/ota-parts.ts). */
describe('OTA endpoint (/xiaozhi/ota/)', () => {
  it('answers a request without device headers with a 400 problem naming them', async () => {
    const { post } = await otaPart();
    const res = await post('/xiaozhi/ota/', '{}', { 'content-type': 'application/json' });
    expect(res.status).toBe(400);
    expect(res.type).toContain('application/problem+json');
    expect(res.body['code']).toBe('INVALID_REQUEST');
    expect(res.body['detail']).toMatch(/device-id/);
    const big = await post('/xiaozhi/ota/', JSON.stringify({ pad: 'x'.repeat(100 * 1024) }), headers);
    expect(big.status).toBe(413);
  });

  it('answers a malformed Host header with a 400 problem, never a 500 (defect 10e)', async () => {
    const { post } = await otaPart({ enrollment: { policy: 'open' } });
    for (const host of ['[::1', 'a b', 'host:99999', 'user@host']) {
      const r = await post('/xiaozhi/ota/', systemInfo, { ...headers, host });
      expect([host, r.status, r.type.split(';')[0], r.body['code']]).toEqual([host, 400, 'application/problem+json', 'INVALID_REQUEST']);
    }
    const ok = await post('/xiaozhi/ota/', systemInfo, { ...headers, host: '[::1]:8000' });
    expect(ok.status).toBe(200);
    expect(OtaResponseSchema.parse(ok.body).websocket?.url).toBe('ws://[::1]:8000/xiaozhi/v1/');
  });

  it('rate-limits OTA and activation per source address: 429 problem with Retry-After, counted and logged once', async () => {
    const { api, post, metrics, logs } = await otaPart({ enrollment: { rateLimit: { burst: 3, perSecond: 0.01 } } });
    const statuses: number[] = [];
    for (let i = 0; i < 3; i++) statuses.push((await post('/xiaozhi/ota/', systemInfo, headers)).status);
    expect(statuses).toEqual([200, 200, 200]);
    const limited = await post('/xiaozhi/ota/', systemInfo, headers);
    expect(limited.status).toBe(429);
    expect(limited.type).toContain('application/problem+json');
    expect(Number(limited.headers['retry-after'])).toBeGreaterThan(0);
    expect(limited.body['code']).toBe('RATE_LIMITED');
    const activate = await post('/xiaozhi/ota/activate', '{}', headers);
    expect(activate.status).toBe(429);
    expect(await metricValue(metrics, 'voxgate_rate_limited_total', { route: 'ota' })).toBe(1);
    expect(await metricValue(metrics, 'voxgate_rate_limited_total', { route: 'activate' })).toBe(1);
    expect(logs.filter((l) => l['msg'] === 'OTA rate limit reached for this address')).toHaveLength(1);
    // The API is not behind this limit.
    expect((await api('GET', '/v1/devices')).status).toBe(200);
  });

  it('rate-limits an IPv6 source per /64, as the connection limits count it: a fresh address in it is no fresh budget', async () => {
    const { app, logs } = await otaPart({ enrollment: { rateLimit: { burst: 3, perSecond: 0.01 } } });
    const from = async (remoteAddress: string) =>
      (await app.inject({ method: 'POST', url: '/xiaozhi/ota/', remoteAddress, headers: { host: 'gw.local:8000', ...headers }, payload: systemInfo }))
        .statusCode;
    const statuses: number[] = [];
    for (let i = 1; i <= 4; i++) statuses.push(await from(`2001:db8:1:2::${i}`));
    expect(statuses).toEqual([200, 200, 200, 429]);
    // Its refusals are one source's too: one line, however many addresses it names.
    for (let i = 5; i <= 8; i++) expect(await from(`2001:db8:1:2::${i}`)).toBe(429);
    expect(logs.filter((l) => l['msg'] === 'OTA rate limit reached for this address')).toHaveLength(1);
    // Another /64 has its own budget.
    expect(await from('2001:db8:1:3::1')).toBe(200);
  });
});
