import { OtaResponseSchema, type OtaResponse } from '@voxgate/protocol';
import { afterEach, describe, expect, it } from 'vitest';
import { metricValue } from '../../../test/support/device-parts.js';
import { closeOtaParts, otaDataDir, otaPart, type OtaPart } from '../../../test/support/ota-parts.js';

let mac = 0x10;
const nextMac = () => `02:00:00:00:0e:${(mac++).toString(16).padStart(2, '0')}`;
let client = 0;
const device = (deviceId = nextMac()) => ({ deviceId, clientId: `0b7e3a52-6f1c-4c2e-9d7a-${String(++client).padStart(12, '0')}` });

afterEach(closeOtaParts);

/** The device's OTA check, as the firmware sends it. */
async function ota(t: OtaPart, d: { deviceId: string; clientId: string }): Promise<{ status: number; body: OtaResponse & { code?: string } }> {
  const r = await t.post('/xiaozhi/ota/', JSON.stringify({ application: { name: 'xiaozhi', version: '1.7.6' } }), {
    'device-id': d.deviceId,
    'client-id': d.clientId,
    'content-type': 'application/json',
    'user-agent': 'sim-board/1.7.6',
  });
  return { status: r.status, body: (r.status === 200 ? OtaResponseSchema.parse(r.body) : r.body) as OtaResponse & { code?: string } };
}

const activate = (t: OtaPart, d: { deviceId: string; clientId: string }, body: unknown = {}) =>
  t.post('/xiaozhi/ota/activate', JSON.stringify(body), { 'device-id': d.deviceId, 'client-id': d.clientId, 'content-type': 'application/json' });

/** The enrollment API and the OTA routes over one enrollment (test/support/ota-parts.ts); device links: e2e/enrollment.test.ts. */
describe('device enrollment over the OTA and enrollment routes (hmac device auth)', () => {
  it('approve: the device polls 202 until an operator approves, then collects its credentials once', async () => {
    const t = await otaPart();
    const d = device();
    const first = await ota(t, d);
    const code = first.body.activation!.code;
    expect(code).toMatch(/^\d{6}$/);
    expect(first.body.websocket).toBeUndefined();
    expect((await activate(t, d)).status).toBe(202);
    const pending = await t.api('GET', '/v1/enrollments');
    expect(pending.body['enrollments']).toEqual([expect.objectContaining({ code, deviceId: d.deviceId, clientId: d.clientId, status: 'pending' })]);
    expect((await t.api('POST', `/v1/enrollments/${code}/approve`)).status).toBe(200);
    expect((await activate(t, d)).status).toBe(200);
    const collected = await ota(t, d);
    expect(collected.body.websocket?.token).toMatch(/^[A-Za-z0-9_-]{43}\.\d+$/);
    // Collected once: a later check that proves nothing gets the URL only.
    expect((await ota(t, d)).body.websocket?.token).toBeUndefined();
    expect((await t.api('GET', `/v1/enrollments/devices/${d.deviceId}`)).body).toMatchObject({ deviceId: d.deviceId, via: 'approve' });
  });

  it('reject: the device is told 403 when it polls and when it asks again', async () => {
    const t = await otaPart();
    const d = device();
    const code = (await ota(t, d)).body.activation!.code;
    const rejected = await t.api('POST', `/v1/enrollments/${code}/reject`);
    expect([rejected.status, rejected.body['status']]).toEqual([200, 'rejected']);
    const polled = await activate(t, d);
    expect([polled.status, polled.body['code']]).toEqual([403, 'ENROLLMENT_REJECTED']);
    const asked = await ota(t, d);
    expect([asked.status, asked.body.code]).toEqual([403, 'ENROLLMENT_REJECTED']);
    expect((await t.api('POST', `/v1/enrollments/${code}/approve`)).status).toBe(404);
  });

  it('two claimants of one device id get their own codes; approving the real one leaves the other with nothing', async () => {
    const t = await otaPart();
    const real = device();
    const impostor = device(real.deviceId);
    const impostorCode = (await ota(t, impostor)).body.activation!;
    const realCode = (await ota(t, real)).body.activation!;
    expect(realCode.code).not.toBe(impostorCode.code);
    // A v2 device echoes its challenge: another answer's challenge is not its claim.
    expect((await activate(t, real, { algorithm: 'hmac-sha256', serial_number: 'SN1', challenge: impostorCode.challenge, hmac: '00' })).status).toBe(404);
    expect((await activate(t, real, { algorithm: 'hmac-sha256', serial_number: 'SN1', challenge: realCode.challenge, hmac: '00' })).status).toBe(202);

    expect((await t.api('POST', `/v1/enrollments/${realCode.code}/approve`)).status).toBe(200);
    expect((await activate(t, impostor)).status).toBe(404);
    const stolen = await ota(t, impostor);
    expect(stolen.body.activation).toBeUndefined();
    expect(stolen.body.websocket?.token).toBeUndefined();
    expect((await ota(t, real)).body.websocket?.token).toBeDefined();
  });

  it('allowlist: listed ids enroll on their first check, others get a 403 problem', async () => {
    const listed = nextMac();
    const t = await otaPart({ enrollment: { policy: 'allowlist', allowlist: [listed.toUpperCase().replace(/:/g, '-')] } });
    expect((await ota(t, device(listed))).body.websocket?.token).toBeDefined();
    const refused = await ota(t, device());
    expect([refused.status, refused.body.code]).toEqual([403, 'ENROLLMENT_REFUSED']);
  });

  it('caps pending enrollments: past maxPending a new device gets a 503 problem', async () => {
    const t = await otaPart({ enrollment: { maxPending: 2, maxPendingPerAddress: 2 } });
    expect((await ota(t, device())).body.activation).toBeDefined();
    expect((await ota(t, device())).body.activation).toBeDefined();
    const res = await t.post('/xiaozhi/ota/', '{}', { 'device-id': nextMac(), 'client-id': 'c-1', 'content-type': 'application/json' });
    expect([res.status, res.body['code']]).toEqual([503, 'ENROLLMENT_BUSY']);
    expect(Number(res.headers['retry-after'])).toBeGreaterThan(0);
  });

  it('caps pending enrollments per source: one address (or IPv6 /64) holds at most a quarter of maxPending, others still get codes', async () => {
    const t = await otaPart({ enrollment: { maxPending: 8 } });
    const from = async (remoteAddress: string, d = device()) => {
      const r = await t.app.inject({
        method: 'POST',
        url: '/xiaozhi/ota/',
        remoteAddress,
        headers: { host: 'gw.local:8000', 'device-id': d.deviceId, 'client-id': d.clientId, 'content-type': 'application/json' },
        payload: '{}',
      });
      return { status: r.statusCode, body: r.json<Record<string, unknown>>() };
    };
    const first = device();
    expect((await from('2001:db8:7:7::1', first)).body['activation']).toBeDefined();
    expect((await from('2001:db8:7:7::2')).body['activation']).toBeDefined();
    // A third made-up id from the same /64: refused, and the source's place in the queue is what it already has.
    const third = await from('2001:db8:7:7::3');
    expect([third.status, third.body['code']]).toEqual([503, 'ENROLLMENT_BUSY']);
    // A device already waiting keeps polling with its code; another source still gets one.
    expect((await from('2001:db8:7:7::1', first)).body['activation']).toBeDefined();
    expect((await from('192.0.2.9')).body['activation']).toBeDefined();
    expect(await metricValue(t.metrics, 'voxgate_enrollment_decisions_total', { outcome: 'busy_address' })).toBe(1);
  });

  it('logs refusals a bounded number of times: a flood of made-up ids from many addresses is counted, not a line each', async () => {
    const t = await otaPart({ enrollment: { policy: 'allowlist', allowlist: [nextMac()] } });
    const since = performance.now();
    for (let i = 0; i < 30; i++) {
      const d = device();
      const r = await t.app.inject({
        method: 'POST',
        url: '/xiaozhi/ota/',
        remoteAddress: `198.51.100.${i + 1}`,
        headers: { host: 'gw.local:8000', 'device-id': d.deviceId, 'client-id': d.clientId, 'content-type': 'application/json' },
        payload: '{}',
      });
      expect(r.statusCode).toBe(403);
    }
    expect(await metricValue(t.metrics, 'voxgate_enrollment_decisions_total', { outcome: 'refused' })).toBe(30);
    const lines = t.logs.filter((l) => l['msg'] === 'OTA: no credentials for this request').length;
    expect(lines).toBeGreaterThanOrEqual(1);
    // 10 lines per kind and 10 s window (throttle/throttled-log.ts REFUSAL_LINES).
    expect(lines).toBeLessThanOrEqual(10 * (1 + Math.floor((performance.now() - since) / 10_000)));
  });

  it('open: of two requests racing for a new id, exactly one is enrolled and gets credentials', async () => {
    const t = await otaPart({ enrollment: { policy: 'open' } });
    const id = nextMac();
    const answers = await Promise.all(Array.from({ length: 8 }, (_, i) => ota(t, { deviceId: id, clientId: `claimant-${i}` })));
    const winners = answers.filter((a) => a.body.websocket?.token !== undefined);
    expect(winners).toHaveLength(1);
    expect(answers.every((a) => a.status === 200 && a.body.websocket?.url)).toBe(true);
    const bound = await t.api('GET', `/v1/enrollments/devices/${id}`);
    expect(bound.body['via']).toBe('open');
    expect(answers.indexOf(winners[0]!)).toBe(Number(String(bound.body['clientId']).split('-')[1]));
  });

  it('keeps enrollments and pending codes in the store: a second start over it knows them', async () => {
    const dataDir = otaDataDir();
    const first = await otaPart({}, dataDir);
    const d = device();
    const waiting = device();
    const code = (await ota(first, d)).body.activation!.code;
    await first.api('POST', `/v1/enrollments/${code}/approve`);
    const token = (await ota(first, d)).body.websocket!.token!;
    const waitingCode = (await ota(first, waiting)).body.activation!.code;
    await first.close();

    const second = await otaPart({}, dataDir);
    expect((await second.api('GET', '/v1/enrollments')).body['enrollments']).toEqual([expect.objectContaining({ code: waitingCode })]);
    expect((await ota(second, waiting)).body.activation?.code).toBe(waitingCode);
    // The binding survived: the token it was given still proves the device.
    const proven = await second.post('/xiaozhi/ota/', '{}', {
      'device-id': d.deviceId,
      'client-id': d.clientId,
      authorization: `Bearer ${token}`,
      'content-type': 'application/json',
    });
    expect(OtaResponseSchema.parse(proven.body).websocket?.token).toBe(token);
  });

  it('needs an API key for the enrollment API, and answers 404 for a code it does not know', async () => {
    const t = await otaPart();
    expect((await t.api('GET', '/v1/enrollments', undefined, null)).status).toBe(401);
    const unknown = await t.api('POST', '/v1/enrollments/123456/approve');
    expect([unknown.status, unknown.body['code']]).toEqual([404, 'ENROLLMENT_NOT_FOUND']);
  });
});
