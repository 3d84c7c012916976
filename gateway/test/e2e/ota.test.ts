import { OtaResponseSchema } from '@voxgate/protocol';
import { describe, expect, it } from 'vitest';
import { startTestGateway } from '../../../test/support/gateway-harness.js';
import { ReferenceDevice } from '../../../test/support/reference-device.js';

const SECRET = 'ota-device-secret-0123456789';
const headers = { 'device-id': 'AA_BB_CC_DD_EE_01', 'client-id': '7d3c1f0e-3b7a-4c8e-9f21-0a1b2c3d4e5f', 'content-type': 'application/json' };
const systemInfo = JSON.stringify({ mac_address: 'aa:bb:cc:dd:ee:01', application: { name: 'xiaozhi', version: '1.7.6' }, board: { type: 'sim' } });

// Bad headers, a malformed Host and the rate limit are the route's own (test/api/ota.test.ts); here, credentials the
// links accept.
describe('OTA endpoint (/xiaozhi/ota/)', () => {
  it('hands a new WebSocket device (enrollment open) its URL and a token the WebSocket link accepts; later checks without proof get no token', async () => {
    const t = await startTestGateway({
      deviceAuth: 'hmac',
      deviceSecret: SECRET,
      enrollment: { policy: 'open' },
      ota: { firmwareVersion: '1.8.0', firmwareUrl: 'http://fw.local/1.8.0.bin' },
    });
    try {
      const res = await fetch(`${t.baseUrl}/xiaozhi/ota/`, { method: 'POST', headers, body: systemInfo });
      expect(res.status).toBe(200);
      const body = OtaResponseSchema.parse(await res.json());
      expect(body.mqtt).toBeUndefined();
      expect(body.activation).toBeUndefined();
      expect(body.firmware).toEqual({ version: '1.8.0', url: 'http://fw.local/1.8.0.bin' });
      expect(Math.abs(body.server_time.timestamp - Date.now())).toBeLessThan(60_000);
      expect(body.websocket!.url).toBe(`ws://127.0.0.1:${t.gw.httpPort}/xiaozhi/v1/`);
      expect(body.websocket!.token).toMatch(/^[A-Za-z0-9_-]{43}\.\d+$/);

      const d = new ReferenceDevice({ deviceId: 'aa:bb:cc:dd:ee:01', clientId: headers['client-id'] });
      const ready = t.nextEvent('device.ready', d.deviceId);
      await d.connectWebSocket(body.websocket!.url, { token: body.websocket!.token! });
      await ready;
      d.terminate();

      // Enrolled now: a check that proves nothing gets the URL only (the device keeps its stored token).
      const get = await fetch(`${t.baseUrl}/xiaozhi/ota/`, { headers: { 'device-id': headers['device-id'], 'client-id': headers['client-id'] } });
      expect(get.status).toBe(200);
      expect(OtaResponseSchema.parse(await get.json()).websocket).toEqual({ url: body.websocket!.url });
      // Presenting the current token proves it is the device: it gets its credentials again.
      const proven = await fetch(`${t.baseUrl}/xiaozhi/ota/`, {
        method: 'POST',
        headers: { ...headers, authorization: `Bearer ${body.websocket!.token}` },
        body: systemInfo,
      });
      expect(OtaResponseSchema.parse(await proven.json()).websocket?.token).toBe(body.websocket!.token);
    } finally {
      await t.close();
    }
  });

  it("a check that proves nothing does not change what an enrolled device reported (its board steers fleet jobs' filters)", async () => {
    const t = await startTestGateway({ deviceAuth: 'hmac', deviceSecret: SECRET, enrollment: { policy: 'open' } });
    const d = new ReferenceDevice({ deviceId: 'aa:bb:cc:dd:ee:01', clientId: headers['client-id'] });
    try {
      const body = OtaResponseSchema.parse(await (await fetch(`${t.baseUrl}/xiaozhi/ota/`, { method: 'POST', headers, body: systemInfo })).json());
      const ready = t.nextEvent('device.ready', d.deviceId);
      await d.connectWebSocket(body.websocket!.url, { token: body.websocket!.token! });
      await ready;
      const proven = { ...headers, authorization: `Bearer ${body.websocket!.token}` };
      expect((await fetch(`${t.baseUrl}/xiaozhi/ota/`, { method: 'POST', headers: proven, body: systemInfo })).status).toBe(200);
      const board = async () => (await t.api<{ board: string | null }>('GET', `/v1/devices/${d.deviceId}`)).body.board;
      expect(await board()).toBe('sim');
      // Anyone may name the device in an OTA check: without its credentials or its client id, what it says is not the device's.
      const forged = JSON.stringify({ application: { name: 'xiaozhi', version: '0.0.1' }, board: { type: 'forged-board' } });
      const refused = () => t.metric('voxgate_enrollment_decisions_total', { outcome: 'report_refused' });
      const stranger = { ...headers, 'client-id': '00000000-0000-4000-8000-000000000000', 'user-agent': 'forged-board/0.0.1' };
      expect((await fetch(`${t.baseUrl}/xiaozhi/ota/`, { method: 'POST', headers: stranger, body: forged })).status).toBe(200);
      expect(await board()).toBe('sim');
      expect(await refused()).toBe(1);
      // The stock firmware presents no proof, but its checks carry the client id it connects with: they still count.
      const newer = JSON.stringify({ application: { name: 'xiaozhi', version: '1.7.7' }, board: { type: 'sim-2' } });
      expect((await fetch(`${t.baseUrl}/xiaozhi/ota/`, { method: 'POST', headers, body: newer })).status).toBe(200);
      expect(await board()).toBe('sim-2');
      expect(await refused()).toBe(1);
    } finally {
      d.terminate();
      await t.close();
    }
  });

  it("token device auth (nothing enrolled): a check under another client id changes neither a device's board nor its tenant", async () => {
    // The WebSocket needs the token; the OTA endpoint needs nothing. A rule on what a check reports (client id, board)
    // gave a known device without a tenant to whichever tenant the sender matched.
    const t = await startTestGateway({
      deviceAuth: 'token',
      deviceTokens: ['device-token-0123456789'],
      enrollment: { tenantRules: [{ tenant: 'globex', clientIdPrefix: 'globex-' }] },
    });
    const d = new ReferenceDevice({ deviceId: 'aa:bb:cc:dd:ee:01', clientId: headers['client-id'] });
    try {
      const ready = t.nextEvent('device.ready', d.deviceId);
      await d.connectWebSocket(t.wsUrl, { token: 'device-token-0123456789' });
      await ready;
      expect((await fetch(`${t.baseUrl}/xiaozhi/ota/`, { method: 'POST', headers, body: systemInfo })).status).toBe(200);
      const seen = async () => (await t.api<{ board: string | null; tenant: string | null }>('GET', `/v1/devices/${d.deviceId}`)).body;
      expect(await seen()).toMatchObject({ board: 'sim', tenant: null });
      const forged = JSON.stringify({ application: { name: 'xiaozhi', version: '0.0.1' }, board: { type: 'forged-board' } });
      const stranger = { ...headers, 'client-id': 'globex-1' };
      const reported = async () => (await t.api<{ reported: { version: string | null } | null }>('GET', `/v1/devices/${d.deviceId}/firmware`)).body.reported;
      const own = await reported();
      expect(own?.version).toBeTruthy();
      expect((await fetch(`${t.baseUrl}/xiaozhi/ota/`, { method: 'POST', headers: stranger, body: forged })).status).toBe(200);
      expect(await seen()).toMatchObject({ board: 'sim', tenant: null });
      // Nor the firmware version the preview (and the listing of an offline device) shows for it.
      expect(await reported()).toEqual(own);
      expect(await t.metric('voxgate_enrollment_decisions_total', { outcome: 'report_refused' })).toBe(1);
      // The device's own check (its client id) still counts.
      const newer = JSON.stringify({ application: { name: 'xiaozhi', version: '1.7.7' }, board: { type: 'sim-2' } });
      expect((await fetch(`${t.baseUrl}/xiaozhi/ota/`, { method: 'POST', headers, body: newer })).status).toBe(200);
      expect(await seen()).toMatchObject({ board: 'sim-2', tenant: null });
      expect((await reported())?.version).toBe('1.7.7');
    } finally {
      d.terminate();
      await t.close();
    }
  });

  it('hands a new MQTT device (enrollment open) credentials the broker accepts (and only the mqtt section)', async () => {
    const t = await startTestGateway({
      deviceAuth: 'hmac',
      deviceSecret: SECRET,
      enrollment: { policy: 'open' },
      ota: { transport: 'mqtt' },
      mqtt: { publicEndpoint: 'gw.example.lan:1883' },
    });
    try {
      const body = OtaResponseSchema.parse(await (await fetch(`${t.baseUrl}/xiaozhi/ota/`, { method: 'POST', headers, body: systemInfo })).json());
      expect(body.websocket).toBeUndefined();
      const m = body.mqtt!;
      expect(m).toMatchObject({ endpoint: 'gw.example.lan:1883', publish_topic: 'device-server', subscribe_topic: 'devices/p2p/aa_bb_cc_dd_ee_01' });
      expect(m.client_id).toBe(`GID_voxgate@@@aa_bb_cc_dd_ee_01@@@${headers['client-id']}`);
      expect(JSON.parse(Buffer.from(m.username!, 'base64').toString())).toHaveProperty('ip');
      expect(JSON.stringify(t.logs)).not.toContain(m.password);

      const d = new ReferenceDevice({ deviceId: 'aa:bb:cc:dd:ee:01', clientId: headers['client-id'] });
      const ready = t.nextEvent('device.ready', d.deviceId);
      await d.connectMqtt(t.mqttUrl, { clientId: m.client_id!, username: m.username!, password: m.password!, publishTopic: m.publish_topic });
      await ready;
      d.terminate();

      // MQTT credentials (Basic) prove the device too.
      const basic = Buffer.from(`${m.username}:${m.password}`).toString('base64');
      const proven = OtaResponseSchema.parse(
        await (await fetch(`${t.baseUrl}/xiaozhi/ota/`, { method: 'POST', headers: { ...headers, authorization: `Basic ${basic}` }, body: systemInfo })).json(),
      );
      expect(proven.mqtt?.client_id).toBe(m.client_id);
      const unproven = OtaResponseSchema.parse(await (await fetch(`${t.baseUrl}/xiaozhi/ota/`, { method: 'POST', headers, body: systemInfo })).json());
      expect(unproven.mqtt).toEqual({ endpoint: 'gw.example.lan:1883', publish_topic: 'device-server', subscribe_topic: 'devices/p2p/aa_bb_cc_dd_ee_01' });
    } finally {
      await t.close();
    }
  });
});
