import { request } from 'node:http';
import { afterEach, describe, expect, it } from 'vitest';
import { startTestGateway, type TestGateway } from '../../../test/support/gateway-harness.js';
import { RawMqtt } from '../../../test/support/raw-mqtt.js';
import { ReferenceDevice } from '../../../test/support/reference-device.js';

/**
 * A flood of refused connections or requests is counted, not logged line for line (REFUSAL_LINES in
 * throttle/throttled-log.ts): each kind of refusal writes at most 10 lines per 10 s, whatever the sender varies from one
 * connection or request to the next (its device id, client id or Origin). Every refusal is still in the metrics and the
 * operator's list, and a healthy device still gets in.
 */
const FLOOD = 40;
const LINES_PER_WINDOW = 10;
const SECRET = 'refusal-flood-secret-0123456789';

const WINDOW_MS = 10_000;
const linesOf = (t: TestGateway, msg: string) => t.logs.filter((l) => l['msg'] === msg);
/**
 * The lines a flood that began at `since` may have written: a window's worth, and one more for each window that began
 * during it (on a loaded machine the flood may outlast the first window). Below the flood's size on any machine that
 * sends it in under 30 s.
 */
const allowedSince = (since: number) => LINES_PER_WINDOW * (1 + Math.floor((performance.now() - since) / WINDOW_MS));
/** The refusal lines of a flood: at least the first window's, at most what the windows allow. */
const expectBounded = (lines: unknown[], since: number) => {
  expect(lines.length).toBeGreaterThanOrEqual(LINES_PER_WINDOW);
  expect(lines.length).toBeLessThanOrEqual(allowedSince(since));
};
const mqttPort = (t: TestGateway) => Number(new URL(t.mqttUrl).port);

/** One WebSocket upgrade with a wrong token, as a device with this id: the status it got (the socket is then closed). */
const refusedUpgrade = (t: TestGateway, deviceId: string, localAddress?: string): Promise<number> =>
  new Promise((resolve, reject) => {
    const req = request(`${t.baseUrl}/xiaozhi/v1/`, {
      ...(localAddress ? { localAddress } : {}),
      headers: {
        Connection: 'Upgrade',
        Upgrade: 'websocket',
        'Sec-WebSocket-Version': '13',
        'Sec-WebSocket-Key': 'dGhlIHNhbXBsZSBub25jZQ==',
        'Device-Id': deviceId,
        'Client-Id': `client-${deviceId}`,
        Authorization: 'Bearer not-a-valid-token',
      },
    });
    req.on('response', (res) => {
      res.resume();
      resolve(res.statusCode ?? 0);
    });
    req.on('upgrade', (_res, socket) => {
      socket.destroy();
      reject(new Error('a device with a wrong token was let in'));
    });
    req.on('error', reject);
    req.end();
  });

describe('refusal floods are counted, not logged line by line', () => {
  const cleanup: Array<() => unknown> = [];
  afterEach(async () => {
    for (const f of cleanup.splice(0).reverse()) await f();
  });
  const gateway = async (overrides: Parameters<typeof startTestGateway>[0] = {}) => {
    const t = await startTestGateway(overrides);
    cleanup.push(() => t.close());
    return t;
  };

  it('MQTT clients that are neither devices nor backends, each with its own client id', async () => {
    const t = await gateway();
    const since = performance.now();
    for (let i = 0; i < FLOOD; i++) {
      const { c, connack } = await RawMqtt.connect(mqttPort(t), { clientId: `intruder-${i}` });
      expect(connack.returnCode).toBe(5);
      await c.closed.promise;
    }
    expect(await t.metric('voxgate_device_auth_refused_total', { transport: 'mqtt', reason: 'unknown_client' })).toBe(FLOOD);
    const lines = linesOf(t, 'MQTT client refused: neither a device client id nor a valid API key');
    expectBounded(lines, since);
    expect(lines[0]).toMatchObject({ clientId: 'intruder-0', remote: '127.0.0.1' });

    // The broker still serves: a device (open auth: its client id is enough) connects and gets ready.
    const device = new ReferenceDevice({ deviceId: '02:00:00:0f:10:01' });
    cleanup.push(() => device.terminate());
    const ready = t.nextEvent('device.ready', device.deviceId);
    await device.connectMqtt(t.mqttUrl, { clientId: 'GID_test@@@02_00_00_0f_10_01@@@healthy' });
    await ready;
  });

  it('MQTT connections with broken framing', async () => {
    const t = await gateway();
    const since = performance.now();
    for (let i = 0; i < FLOOD; i++) {
      const c = await RawMqtt.open(mqttPort(t));
      // A CONNECT whose remaining length never ends (five continuation bytes).
      c.sendBytes(Buffer.from([0x10, 0xff, 0xff, 0xff, 0xff, 0x7f]));
      await c.closed.promise;
    }
    expect(await t.metric('voxgate_frames_rejected_total', { reason: 'mqtt_protocol' })).toBe(FLOOD);
    expectBounded(linesOf(t, 'MQTT connection dropped'), since);
  });

  it('/mcp requests from a foreign Origin and vision uploads without a valid token, before any key or token checks out', async () => {
    const t = await gateway({ vision: { url: 'http://127.0.0.1:1/mcp/vision/explain' } });
    const since = performance.now();
    for (let i = 0; i < FLOOD; i++) {
      const mcp = await fetch(`${t.baseUrl}/mcp`, {
        method: 'POST',
        headers: { origin: `http://evil-${i}.example`, 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
        body: JSON.stringify({ jsonrpc: '2.0', id: i, method: 'ping' }),
      });
      expect(mcp.status).toBe(403);
      await mcp.text();
      const vision = await fetch(`${t.baseUrl}/mcp/vision/explain`, {
        method: 'POST',
        headers: { 'device-id': `02:00:00:0f:20:${(i & 255).toString(16).padStart(2, '0')}`, authorization: 'Bearer forged' },
      });
      expect(vision.status).toBe(401);
      await vision.text();
    }
    expect(await t.metric('voxgate_mcp_endpoint_requests_total', { outcome: 'forbidden_origin' })).toBe(FLOOD);
    expect(await t.metric('voxgate_vision_uploads_total', { outcome: 'unauthorized' })).toBe(FLOOD);
    expectBounded(linesOf(t, 'mcp request from a foreign origin refused'), since);
    expectBounded(linesOf(t, 'vision upload refused: missing, expired or foreign token'), since);
  });

  it('devices refused for their credentials, a new device id every time, over WebSocket and MQTT', async () => {
    const t = await gateway({ deviceAuth: 'hmac', deviceSecret: SECRET });
    const since = performance.now();
    const id = (i: number) => `02:00:00:0f:${(i >> 8).toString(16).padStart(2, '0')}:${(i & 255).toString(16).padStart(2, '0')}`;
    for (let i = 0; i < FLOOD; i++) expect(await refusedUpgrade(t, id(i))).toBe(401);
    for (let i = FLOOD; i < 2 * FLOOD; i++) {
      const mac = id(i).replace(/:/g, '_');
      const { c, connack } = await RawMqtt.connect(mqttPort(t), { clientId: `GID_test@@@${mac}@@@uuid-${i}`, username: 'u', password: Buffer.from('wrong') });
      expect(connack.returnCode).toBe(5);
      await c.closed.promise;
    }
    expect(await t.metric('voxgate_device_auth_refused_total', { transport: 'websocket' })).toBe(FLOOD);
    expect(await t.metric('voxgate_device_auth_refused_total', { transport: 'mqtt' })).toBe(FLOOD);
    expectBounded(linesOf(t, 'device WebSocket refused'), since);
    expectBounded(linesOf(t, 'MQTT device refused'), since);
    // The operator's list still has every one of them (its own bound is far above this).
    const refused = await t.api<{ refused: Array<{ deviceId: string }> }>('GET', '/v1/enrollments/refused');
    expect(refused.status).toBe(200);
    expect(refused.body.refused).toHaveLength(2 * FLOOD);
  });

  it("a flood of refusals from one address does not push another address's stranded device out of the operator's list", async () => {
    const t = await gateway({ deviceAuth: 'hmac', deviceSecret: SECRET });
    // A real device, stranded (it redials without valid credentials), from another address (Linux routes 127/8 to lo).
    const stranded = '02:00:00:0f:30:01';
    expect(await refusedUpgrade(t, stranded, '127.0.0.2')).toBe(401);
    // Then more refusals than the list holds (256), each under a new device id, from 127.0.0.1.
    const id = (i: number) => `02:00:00:0f:${(0x40 + (i >> 8)).toString(16)}:${(i & 255).toString(16).padStart(2, '0')}`;
    for (let i = 0; i < 300; i++) expect(await refusedUpgrade(t, id(i), '127.0.0.1')).toBe(401);
    const refused = await t.api<{ refused: Array<{ deviceId: string; remoteAddress: string }> }>('GET', '/v1/enrollments/refused');
    expect(refused.status).toBe(200);
    expect(refused.body.refused).toHaveLength(256);
    expect(refused.body.refused.find((d) => d.deviceId === stranded)).toMatchObject({ remoteAddress: '127.0.0.2' });
    // The flooding address kept its most recent refusals, all but the one slot the other address holds.
    expect(refused.body.refused[0]!.deviceId).toBe(id(299));
    expect(refused.body.refused.filter((d) => d.remoteAddress === '127.0.0.1')).toHaveLength(255);
  }, 120_000);
});
