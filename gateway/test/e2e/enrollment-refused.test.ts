import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RefusedDevices } from '../../src/enrollment/refused.js';
import { startTestGateway, type TestGateway } from '../../../test/support/gateway-harness.js';
import { ReferenceDevice } from '../../../test/support/reference-device.js';

describe('RefusedDevices: a bounded, throttled record of devices refused at connect', () => {
  it('keeps the most recent N ids, counts tries, says when a log line is due (once per id per interval), forgets a device that gets in', () => {
    let now = 1000;
    const r = new RefusedDevices({ max: 2, logIntervalMs: 60_000, now: () => now });
    const base = { clientId: 'c', transport: 'websocket' as const, reason: 'missing_token', remoteAddress: '10.0.0.9' };
    const due: Array<[string, number | undefined]> = [];
    const rec = (deviceId: string) => due.push([deviceId, r.record({ deviceId, ...base })?.refusals]);
    for (let i = 0; i < 5; i++) rec('aa:00:00:00:00:01');
    now += 61_000;
    rec('aa:00:00:00:00:01');
    rec('aa:00:00:00:00:02');
    rec('aa:00:00:00:00:03');
    expect(r.list().map((d) => d.deviceId)).toEqual(['aa:00:00:00:00:03', 'aa:00:00:00:00:02']);
    rec('aa:00:00:00:00:02');
    expect(r.list()[0]).toMatchObject({ deviceId: 'aa:00:00:00:00:02', count: 2, firstAt: 62_000, lastAt: 62_000 });
    // device 1: its first try, then one line after the interval summing the 5 since; 2 and 3 once each
    expect(due.filter(([, n]) => n !== undefined)).toEqual([
      ['aa:00:00:00:00:01', 1],
      ['aa:00:00:00:00:01', 5],
      ['aa:00:00:00:00:02', 1],
      ['aa:00:00:00:00:03', 1],
    ]);
    r.forget('aa:00:00:00:00:02');
    expect(r.list().map((d) => d.deviceId)).toEqual(['aa:00:00:00:00:03']);
  });
});

describe('an hmac gateway shows devices that dial in without credentials', () => {
  let t: TestGateway;
  beforeAll(async () => {
    t = await startTestGateway({ deviceAuth: 'hmac', deviceSecret: 'refused-device-secret-0123456789' });
  });
  afterAll(() => t.close());

  it('over WebSocket and MQTT: listed in GET /v1/enrollments/refused with transport, reason, count and address', async () => {
    const ws = new ReferenceDevice({ deviceId: '02:00:00:00:0f:01' });
    await expect(ws.connectWebSocket(t.wsUrl)).rejects.toMatchObject({ statusCode: 401 });
    await expect(ws.connectWebSocket(t.wsUrl)).rejects.toMatchObject({ statusCode: 401 });
    const mq = new ReferenceDevice({ deviceId: '02:00:00:00:0f:02' });
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
    ws.terminate();
    mq.terminate();
  });
});
