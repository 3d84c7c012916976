import { mkdtempSync, rmSync } from 'node:fs';
import { request as httpRequest } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { mintDeviceToken, mqttPassword, OtaResponseSchema, type OtaResponse } from '@voxgate/protocol';
import { afterEach, describe, expect, it } from 'vitest';
import type { DeviceLink } from '../../src/devices/link.js';
import { startTestGateway, type TestGateway } from '../../../test/support/gateway-harness.js';
import { ReferenceDevice } from '../../../test/support/reference-device.js';

const SECRET = 'enrollment-device-secret-0123456789';
let mac = 0x10;
const nextMac = () => `02:00:00:00:0e:${(mac++).toString(16).padStart(2, '0')}`;

interface Problem {
  code: string;
  detail: string;
}
interface Pending {
  enrollments: Array<{ code: string; deviceId: string; clientId: string; status: string; remoteAddress: string; firmwareVersion?: string }>;
}

const cleanup: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const f of cleanup.splice(0).reverse()) await f();
});

async function gateway(overrides: Parameters<typeof startTestGateway>[0] = {}): Promise<TestGateway> {
  const t = await startTestGateway({ deviceAuth: 'hmac', deviceSecret: SECRET, ...overrides });
  cleanup.push(() => t.close());
  return t;
}

function device(deviceId = nextMac(), clientId?: string): ReferenceDevice {
  const d = new ReferenceDevice({ deviceId, ...(clientId ? { clientId } : {}) });
  cleanup.push(() => d.terminate());
  return d;
}

/** The device's OTA check, as the firmware sends it. */
async function ota(
  t: TestGateway,
  d: { deviceId: string; clientId: string },
  extra: Record<string, string> = {},
): Promise<{ status: number; body: OtaResponse & Partial<Problem> }> {
  const res = await fetch(`${t.baseUrl}/xiaozhi/ota/`, {
    method: 'POST',
    headers: { 'device-id': d.deviceId, 'client-id': d.clientId, 'content-type': 'application/json', 'user-agent': 'sim-board/1.7.6', ...extra },
    body: JSON.stringify({ application: { name: 'xiaozhi', version: '1.7.6' } }),
  });
  const body = (await res.json()) as OtaResponse & Partial<Problem>;
  return { status: res.status, body: res.status === 200 ? OtaResponseSchema.parse(body) : body };
}

async function activate(
  t: TestGateway,
  d: { deviceId: string; clientId: string },
  body: unknown = {},
): Promise<{ status: number; body: Record<string, unknown> }> {
  const res = await fetch(`${t.baseUrl}/xiaozhi/ota/activate`, {
    method: 'POST',
    headers: { 'device-id': d.deviceId, 'client-id': d.clientId, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

/** An OTA check from another loopback address (another source, as the gateway counts them), over a real socket. */
function otaFrom(
  t: TestGateway,
  localAddress: string,
  d: { deviceId: string; clientId: string },
): Promise<{ status: number; body: OtaResponse & Partial<Problem> }> {
  const u = new URL(t.baseUrl);
  const headers = { 'device-id': d.deviceId, 'client-id': d.clientId, 'content-type': 'application/json' };
  return new Promise((resolve, reject) => {
    const req = httpRequest({ host: u.hostname, port: u.port, path: '/xiaozhi/ota/', method: 'POST', localAddress, headers }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body: JSON.parse(Buffer.concat(chunks).toString('utf8')) as OtaResponse & Partial<Problem> }));
    });
    req.on('error', reject);
    req.end('{}');
  });
}

/** Approve flow end to end; returns what the device collected. */
async function enroll(t: TestGateway, d: ReferenceDevice): Promise<OtaResponse> {
  const first = await ota(t, d);
  const code = first.body.activation!.code;
  expect((await t.api('POST', `/v1/enrollments/${code}/approve`)).status).toBe(200);
  const collected = await ota(t, d);
  expect(collected.status).toBe(200);
  return collected.body;
}

async function online(t: TestGateway, d: ReferenceDevice, creds: OtaResponse): Promise<void> {
  const ready = t.nextEvent('device.ready', d.deviceId);
  if (creds.mqtt)
    await d.connectMqtt(t.mqttUrl, {
      clientId: creds.mqtt.client_id!,
      username: creds.mqtt.username!,
      password: creds.mqtt.password!,
      publishTopic: creds.mqtt.publish_topic,
    });
  else await d.connectWebSocket(t.wsUrl, { token: creds.websocket!.token! });
  await ready;
}

async function callable(t: TestGateway, deviceId: string): Promise<number> {
  return (await t.api('POST', `/v1/devices/${deviceId}/tools/self.get_device_status/call`, {})).status;
}

describe('device enrollment (hmac device auth)', () => {
  it('approve (the default): the device shows a code and polls 202 until an operator approves, then collects its credentials once', async () => {
    const t = await gateway();
    const d = device();
    const first = await ota(t, d);
    expect(first.status).toBe(200);
    expect(first.body.websocket).toBeUndefined();
    expect(first.body.mqtt).toBeUndefined();
    const a = first.body.activation!;
    expect(a.code).toMatch(/^\d{6}$/);
    expect(a.message).toContain(a.code);
    expect(a.challenge.length).toBeGreaterThanOrEqual(16);
    expect(a.timeout_ms).toBeGreaterThan(0);
    // The firmware asks again after ten polls: same code, so the one on its screen stays valid.
    expect((await ota(t, d)).body.activation!.code).toBe(a.code);
    expect((await activate(t, d)).status).toBe(202);

    const list = await t.api<Pending>('GET', '/v1/enrollments');
    expect(list.body.enrollments).toEqual([
      expect.objectContaining({ code: a.code, deviceId: d.deviceId, clientId: d.clientId, status: 'pending', firmwareVersion: '1.7.6' }),
    ]);
    expect((await t.api('GET', '/v1/enrollments', undefined, { apiKey: null })).status).toBe(401);
    expect((await t.api('POST', `/v1/enrollments/${a.code}/approve`, undefined, { apiKey: null })).status).toBe(401);

    const approved = await t.api<{ deviceId: string; via: string; delivered: boolean }>('POST', `/v1/enrollments/${a.code}/approve`);
    expect(approved.status).toBe(200);
    expect(approved.body).toMatchObject({ deviceId: d.deviceId, via: 'approve', delivered: false });
    expect((await activate(t, d)).status).toBe(200);
    expect((await t.api<Pending>('GET', '/v1/enrollments')).body.enrollments).toEqual([]);

    const collected = await ota(t, d);
    expect(collected.body.activation).toBeUndefined();
    expect(collected.body.websocket?.token).toMatch(/^[A-Za-z0-9_-]{43}\.\d+$/);
    await online(t, d, collected.body);
    expect(await callable(t, d.deviceId)).toBe(200);
    // Collected once: the next check without proof names no credential.
    expect((await ota(t, d)).body.websocket).toEqual({ url: collected.body.websocket!.url });
    expect((await t.api<{ delivered: boolean }>('GET', `/v1/enrollments/devices/${d.deviceId}`)).body.delivered).toBe(true);

    const again = await t.api<Problem>('POST', `/v1/enrollments/${a.code}/approve`);
    expect([again.status, again.headers.get('content-type')?.split(';')[0], again.body.code]).toEqual([
      404,
      'application/problem+json',
      'ENROLLMENT_NOT_FOUND',
    ]);
    expect((await t.api<Problem>('POST', '/v1/enrollments/12ab56/approve')).status).toBe(400);
    expect(await t.metric('voxgate_enrollment_decisions_total', { outcome: 'claimed' })).toBe(1);
    expect(JSON.stringify(t.logs)).not.toContain(collected.body.websocket!.token!);
  });

  it.each(['websocket', 'mqtt'] as const)(
    'the takeover attack from issue 8 (%s): OTA with the victim’s ids yields no credential, and the live device stays',
    async (transport) => {
      const t = await gateway({ ota: { transport } });
      const victim = device();
      const creds = await enroll(t, victim);
      await online(t, victim, creds);

      // The attacker knows the victim's Device-Id and Client-Id, and asks as often as it likes.
      for (const extra of [
        {} as Record<string, string>,
        { authorization: 'Bearer forged.123' },
        { authorization: `Basic ${Buffer.from('u:p').toString('base64')}` },
      ]) {
        const stolen = await ota(t, victim, extra);
        expect(stolen.status).toBe(200);
        expect(stolen.body.websocket?.token).toBeUndefined();
        expect(stolen.body.mqtt?.password).toBeUndefined();
        expect(stolen.body.mqtt?.client_id).toBeUndefined();
      }
      expect(await t.metric('voxgate_enrollment_decisions_total', { outcome: 'proof_refused' })).toBe(2);

      // What the old OTA endpoint handed anyone (credentials signed with the device secret) no longer opens an enrolled id.
      const attacker = new ReferenceDevice({ deviceId: victim.deviceId, clientId: victim.clientId });
      cleanup.push(() => attacker.terminate());
      if (transport === 'websocket') {
        const legacy = mintDeviceToken(SECRET, victim.clientId, victim.deviceId, Date.now() / 1000);
        await expect(attacker.connectWebSocket(t.wsUrl, { token: legacy })).rejects.toMatchObject({ statusCode: 401 });
      } else {
        const username = Buffer.from(JSON.stringify({ ip: '203.0.113.9' })).toString('base64');
        const clientId = creds.mqtt!.client_id!;
        await expect(attacker.connectMqtt(t.mqttUrl, { clientId, username, password: mqttPassword(SECRET, clientId, username) })).rejects.toMatchObject({
          code: 5,
        });
      }
      expect(victim.connected).toBe(true);
      expect(await callable(t, victim.deviceId)).toBe(200);
    },
  );

  it('claims of a device id from other addresses never keep the real device from its own code: five claim it first and keep refreshing, each holds at most 4 codes for it', async () => {
    const t = await gateway();
    const d = device();
    // Its MAC is broadcast over WiFi: five addresses name it first, each under six client ids (past four, its own oldest goes).
    const attackers = ['127.0.0.2', '127.0.0.3', '127.0.0.4', '127.0.0.5', '127.0.0.6'];
    const held = new Map<string, string[]>();
    for (const from of attackers) {
      const codes: string[] = [];
      for (let i = 0; i < 6; i++) {
        const r = await otaFrom(t, from, { deviceId: d.deviceId, clientId: `${from}-impostor-${i}` });
        expect(r.status).toBe(200);
        codes.push(r.body.activation!.code);
      }
      held.set(from, codes);
    }
    // They keep refreshing their claims: the same codes, each check pushing its expiry back.
    const refresh = async () => {
      for (const [from, codes] of held)
        for (let i = 2; i < 6; i++) {
          const r = await otaFrom(t, from, { deviceId: d.deviceId, clientId: `${from}-impostor-${i}` });
          expect(r.body.activation?.code).toBe(codes[i]);
        }
    };
    await refresh();
    const first = await ota(t, d);
    expect(first.status).toBe(200);
    const real = first.body.activation!.code;
    await refresh();
    expect((await activate(t, d)).status).toBe(202);
    expect((await ota(t, d)).body.activation?.code).toBe(real);

    const pending = (await t.api<Pending>('GET', '/v1/enrollments')).body.enrollments;
    expect(pending.map((c) => c.code).sort()).toEqual([real, ...[...held.values()].flatMap((codes) => codes.slice(2))].sort());
    for (const from of attackers) expect(pending.filter((c) => c.remoteAddress.endsWith(from)).length).toBe(4);
    // Each address's two oldest codes are gone.
    expect((await t.api<Problem>('POST', `/v1/enrollments/${held.get('127.0.0.2')![0]}/approve`)).body.code).toBe('ENROLLMENT_NOT_FOUND');

    // The operator approves the code on the device in front of them: every other code of the id goes.
    expect((await t.api('POST', `/v1/enrollments/${real}/approve`)).status).toBe(200);
    expect((await t.api<Pending>('GET', '/v1/enrollments')).body.enrollments).toEqual([]);
    expect((await activate(t, d)).status).toBe(200);
    const creds = await ota(t, d);
    expect(creds.body.websocket?.token).toBeDefined();
    await online(t, d, creds.body);
    // The impostors' next checks get no code and no credential.
    const after = await otaFrom(t, '127.0.0.2', { deviceId: d.deviceId, clientId: '127.0.0.2-impostor-5' });
    expect([after.status, after.body.activation, after.body.websocket?.token]).toEqual([200, undefined, undefined]);
    expect(await callable(t, d.deviceId)).toBe(200);
  });

  it("a device id's codes from many addresses are bounded by each address's share and by maxPending; when every place is held, another address's code takes the place of the largest holder's oldest", async () => {
    // A quarter of 8 per source: 2.
    const t = await gateway({ enrollment: { maxPending: 8 } });
    const d = device();
    const codes: string[] = [];
    for (const from of ['127.0.0.2', '127.0.0.3', '127.0.0.4', '127.0.0.5'])
      for (const clientId of [`${from}-impostor-1`, `${from}-impostor-2`]) {
        const r = await otaFrom(t, from, { deviceId: d.deviceId, clientId });
        expect(r.status).toBe(200);
        codes.push(r.body.activation!.code);
      }
    // A third code for the id from one address: its share is full (maxPendingPerDevice, 4, is not reached: nothing of its own goes).
    const third = await otaFrom(t, '127.0.0.2', { deviceId: d.deviceId, clientId: '127.0.0.2-impostor-3' });
    expect([third.status, third.body.code]).toEqual([503, 'ENROLLMENT_BUSY']);
    expect(await t.metric('voxgate_enrollment_decisions_total', { outcome: 'busy_address' })).toBe(1);
    // Every place is taken by four addresses. Another address still gets a code (red team 11: four addresses refreshing
    // their claims kept every other device from enrolling): the oldest code of the first address holding the most goes.
    const real = await ota(t, d);
    expect(real.body.activation?.code).toMatch(/^\d{6}$/);
    expect(await t.metric('voxgate_enrollment_decisions_total', { outcome: 'displaced' })).toBe(1);
    const waiting = (await t.api<Pending>('GET', '/v1/enrollments')).body.enrollments.map((c) => c.code);
    expect(waiting.sort()).toEqual([...codes.slice(1), real.body.activation!.code].sort());
    // The address that gave a place up holds fewer than the others now: it cannot take one back from them.
    const back = await otaFrom(t, '127.0.0.2', { deviceId: nextMac(), clientId: '127.0.0.2-impostor-4' });
    expect([back.status, back.body.code]).toEqual([503, 'ENROLLMENT_BUSY']);
    expect(await t.metric('voxgate_enrollment_decisions_total', { outcome: 'busy' })).toBe(1);
  });

  it("a source's rejected codes still count against its share of the waiting places: rejecting a flood does not make room for more of it", async () => {
    const t = await gateway({ enrollment: { maxPending: 8 } });
    const codes: string[] = [];
    for (const deviceId of [nextMac(), nextMac()]) codes.push((await otaFrom(t, '127.0.0.2', { deviceId, clientId: 'made-up' })).body.activation!.code);
    for (const code of codes) expect((await t.api('POST', `/v1/enrollments/${code}/reject`)).status).toBe(200);
    const more = await otaFrom(t, '127.0.0.2', { deviceId: nextMac(), clientId: 'made-up' });
    expect([more.status, more.body.code]).toEqual([503, 'ENROLLMENT_BUSY']);
    expect(await t.metric('voxgate_enrollment_decisions_total', { outcome: 'busy_address' })).toBe(1);
    // Another source still gets a code.
    expect((await ota(t, device())).body.activation?.code).toMatch(/^\d{6}$/);
  });

  it('a takeover of a live connection needs the credentials the live one proved: other valid ones are refused, counted and logged', async () => {
    const t = await gateway();
    const d = device();
    // Not enrolled: tokens signed with the device secret (as its holder may issue) are valid, each different.
    const live = mintDeviceToken(SECRET, d.clientId, d.deviceId, Date.now() / 1000 - 60);
    const other = mintDeviceToken(SECRET, d.clientId, d.deviceId, Date.now() / 1000);
    await online(t, d, { websocket: { url: t.wsUrl, token: live } } as OtaResponse);

    const intruder = device(d.deviceId, d.clientId);
    await expect(intruder.connectWebSocket(t.wsUrl, { token: other })).rejects.toMatchObject({ statusCode: 401 });
    expect(await t.metric('voxgate_device_auth_refused_total', { transport: 'websocket', reason: 'takeover_refused' })).toBe(1);
    expect(t.logs.some((l) => l['msg'] === 'device WebSocket refused' && l['reason'] === 'takeover_refused')).toBe(true);
    expect(d.connected).toBe(true);
    expect(await callable(t, d.deviceId)).toBe(200);

    // The registry refuses too, whatever got past the check (two upgrades racing).
    const closes: number[] = [];
    const link: DeviceLink = { transport: 'websocket', remoteAddress: '192.0.2.7', send: () => true, close: (code) => void closes.push(code) };
    expect(t.gw.registry.connect({ deviceId: d.deviceId, clientId: d.clientId, link, expectHello: true, credential: 'something-else' })).toBeUndefined();
    expect(closes).toEqual([4003]);
    expect(await t.metric('voxgate_device_takeovers_refused_total')).toBe(1);
    expect(await callable(t, d.deviceId)).toBe(200);

    // The same credentials may take over (the device reconnecting while its old socket lingers).
    const again = device(d.deviceId, d.clientId);
    await online(t, again, { websocket: { url: t.wsUrl, token: live } } as OtaResponse);
    expect((await d.closed()).code).toBe(4000);
  });

  it('re-enroll: an operator revokes the credentials, closes the live connection, and the device must enroll again', async () => {
    const t = await gateway();
    const d = device();
    const creds = await enroll(t, d);
    await online(t, d, creds);
    const r = await t.api<{ revoked: boolean }>('POST', `/v1/enrollments/devices/${d.deviceId.replace(/:/g, '-')}/reenroll`);
    expect([r.status, r.body.revoked]).toEqual([200, true]);
    expect((await d.closed()).code).toBe(4004);
    const back = device(d.deviceId, d.clientId);
    await expect(back.connectWebSocket(t.wsUrl, { token: creds.websocket!.token! })).rejects.toMatchObject({ statusCode: 401 });
    expect((await t.api<Problem>('GET', `/v1/enrollments/devices/${d.deviceId}`)).body.code).toBe('ENROLLMENT_NOT_FOUND');
    expect((await t.api<Problem>('POST', `/v1/enrollments/devices/${d.deviceId}/reenroll`)).status).toBe(404);

    const fresh = await enroll(t, d);
    expect(fresh.websocket!.token).not.toBe(creds.websocket!.token);
    await online(t, back, fresh);
  });

  // Reject, two claimants, the allowlist, the pending cap and the open race are the routes' and the enrollment's own
  // (test/api/enrollments.test.ts); here, what devices then do with their credentials on the links.
  it('enrollments and pending codes survive a restart', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'voxgate-enroll-'));
    cleanup.push(() => rmSync(dataDir, { recursive: true, force: true }));
    const first = await startTestGateway({ deviceAuth: 'hmac', deviceSecret: SECRET, dataDir });
    const d = device();
    const waiting = device();
    let creds: OtaResponse;
    let code: string;
    try {
      creds = await enroll(first, d);
      code = (await ota(first, waiting)).body.activation!.code;
    } finally {
      await first.close();
    }
    const second = await gateway({ dataDir });
    await online(second, d, creds);
    expect((await ota(second, d)).body.websocket?.token).toBeUndefined();
    expect((await second.api<Pending>('GET', '/v1/enrollments')).body.enrollments.map((e) => e.code)).toEqual([code]);
    expect((await ota(second, waiting)).body.activation?.code).toBe(code);
  });

  it('devices that dial in without credentials, over WebSocket and MQTT: listed in GET /v1/enrollments/refused with transport, reason, count and address', async () => {
    const t = await gateway();
    const ws = device('02:00:00:00:0f:01');
    await expect(ws.connectWebSocket(t.wsUrl)).rejects.toMatchObject({ statusCode: 401 });
    await expect(ws.connectWebSocket(t.wsUrl)).rejects.toMatchObject({ statusCode: 401 });
    const mq = device('02:00:00:00:0f:02');
    const clientId = `GID_voxgate@@@02_00_00_00_0f_02@@@${mq.clientId}`;
    await expect(mq.connectMqtt(t.mqttUrl, { clientId })).rejects.toMatchObject({ code: 5 });

    const res = await t.api<{ refused: Array<Record<string, unknown>> }>('GET', '/v1/enrollments/refused');
    expect(res.status).toBe(200);
    const [first, second] = res.body.refused;
    expect(first).toMatchObject({ deviceId: '02:00:00:00:0f:02', transport: 'mqtt', reason: 'missing_credentials', count: 1, clientId });
    expect(second).toMatchObject({ deviceId: '02:00:00:00:0f:01', transport: 'websocket', reason: 'missing_token', count: 2 });
    expect(String(second!['remoteAddress'])).toMatch(/127\.0\.0\.1/);
    expect(String(first!['remoteAddress'])).toMatch(/127\.0\.0\.1/);
    expect(Date.parse(String(second!['lastAt']))).toBeGreaterThanOrEqual(Date.parse(String(second!['firstAt'])));
    expect((await t.api('GET', '/v1/enrollments/refused', undefined, { apiKey: null })).status).toBe(401);
  });
});
