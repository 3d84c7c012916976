import { OtaResponseSchema, verifyDeviceToken, verifyMqttPassword } from '@voxgate/protocol';
import { describe, expect, it } from 'vitest';
import { startTestGateway } from '../../test/support/gateway-harness.js';
import { ReferenceDevice } from '../../test/support/reference-device.js';

const SECRET = 'ota-device-secret-0123456789';
const headers = { 'device-id': 'AA_BB_CC_DD_EE_01', 'client-id': '7d3c1f0e-3b7a-4c8e-9f21-0a1b2c3d4e5f', 'content-type': 'application/json' };
const systemInfo = JSON.stringify({ mac_address: 'aa:bb:cc:dd:ee:01', application: { name: 'xiaozhi', version: '1.7.6' }, board: { type: 'sim' } });

describe('OTA endpoint (/xiaozhi/ota/)', () => {
  it('hands a WebSocket device its URL and a token that the WebSocket link accepts', async () => {
    const t = await startTestGateway({ deviceAuth: 'hmac', deviceSecret: SECRET, ota: { firmwareVersion: '1.8.0', firmwareUrl: 'http://fw.local/1.8.0.bin' } });
    try {
      const res = await fetch(`${t.baseUrl}/xiaozhi/ota/`, { method: 'POST', headers, body: systemInfo });
      expect(res.status).toBe(200);
      const body = OtaResponseSchema.parse(await res.json());
      expect(body.mqtt).toBeUndefined();
      expect(body.firmware).toEqual({ version: '1.8.0', url: 'http://fw.local/1.8.0.bin' });
      expect(Math.abs(body.server_time.timestamp - Date.now())).toBeLessThan(60_000);
      expect(body.websocket!.url).toBe(`ws://127.0.0.1:${t.gw.httpPort}/xiaozhi/v1/`);
      expect(verifyDeviceToken(SECRET, body.websocket!.token, headers['client-id'], 'aa:bb:cc:dd:ee:01', { nowSeconds: Date.now() / 1000, maxAgeSeconds: 60 }).ok).toBe(true);

      const d = new ReferenceDevice({ deviceId: 'aa:bb:cc:dd:ee:01', clientId: headers['client-id'] });
      const ready = t.nextEvent('device.ready', d.deviceId);
      await d.connectWebSocket(body.websocket!.url, { token: body.websocket!.token });
      await ready;
      d.terminate();

      const get = await fetch(`${t.baseUrl}/xiaozhi/ota/`, { headers: { 'device-id': headers['device-id'], 'client-id': headers['client-id'] } });
      expect(get.status).toBe(200);
    } finally {
      await t.close();
    }
  });

  it('hands an MQTT device credentials the broker accepts (and only the mqtt section)', async () => {
    const t = await startTestGateway({ deviceAuth: 'hmac', deviceSecret: SECRET, ota: { transport: 'mqtt' }, mqtt: { publicEndpoint: 'gw.example.lan:1883' } });
    try {
      const body = OtaResponseSchema.parse(await (await fetch(`${t.baseUrl}/xiaozhi/ota/`, { method: 'POST', headers, body: systemInfo })).json());
      expect(body.websocket).toBeUndefined();
      const m = body.mqtt!;
      expect(m).toMatchObject({ endpoint: 'gw.example.lan:1883', publish_topic: 'device-server', subscribe_topic: 'devices/p2p/aa_bb_cc_dd_ee_01' });
      expect(m.client_id).toBe(`GID_voxgate@@@aa_bb_cc_dd_ee_01@@@${headers['client-id']}`);
      expect(JSON.parse(Buffer.from(m.username, 'base64').toString())).toHaveProperty('ip');
      expect(verifyMqttPassword(SECRET, m.client_id, m.username, m.password)).toBe(true);
      expect(JSON.stringify(t.logs)).not.toContain(m.password);
    } finally {
      await t.close();
    }
  });

  it('answers a request without device headers with a 400 problem naming them', async () => {
    const t = await startTestGateway();
    try {
      const res = await fetch(`${t.baseUrl}/xiaozhi/ota/`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' });
      expect(res.status).toBe(400);
      expect(res.headers.get('content-type')).toContain('application/problem+json');
      const p = (await res.json()) as { code: string; detail: string };
      expect(p.code).toBe('INVALID_REQUEST');
      expect(p.detail).toMatch(/device-id/);
      const big = await fetch(`${t.baseUrl}/xiaozhi/ota/`, { method: 'POST', headers, body: JSON.stringify({ pad: 'x'.repeat(100 * 1024) }) });
      expect(big.status).toBe(413);
    } finally {
      await t.close();
    }
  });
});
