import { OtaResponseSchema, type OtaResponse } from '@voxgate/protocol';
import { describe, expect, it } from 'vitest';
import { startTestGateway, type TestGateway } from '../../../test/support/gateway-harness.js';

/** Behind a TLS-terminating reverse proxy (Caddy, nginx): the gateway speaks plain HTTP to the proxy. */
const deviceHeaders = { 'device-id': '02:00:00:00:15:01', 'client-id': '7d3c1f0e-3b7a-4c8e-9f21-0a1b2c3d4e5f', 'content-type': 'application/json' };
const forwarded = { 'x-forwarded-proto': 'https', 'x-forwarded-host': 'gw.example.net', 'x-forwarded-for': '198.51.100.7' };

async function ota(t: TestGateway, headers: Record<string, string>): Promise<{ status: number; body: OtaResponse & { code?: string } }> {
  const res = await fetch(`${t.baseUrl}/xiaozhi/ota/`, { method: 'POST', headers: { ...deviceHeaders, ...headers }, body: '{}' });
  return { status: res.status, body: (await res.json()) as OtaResponse & { code?: string } };
}

async function withGateway(overrides: Parameters<typeof startTestGateway>[0], run: (t: TestGateway) => Promise<void>): Promise<void> {
  const t = await startTestGateway(overrides);
  try {
    await run(t);
  } finally {
    await t.close();
  }
}

describe('OTA behind a reverse proxy (http.trustProxy)', () => {
  it('builds wss:// URLs from X-Forwarded-Proto/-Host sent by a trusted proxy', () =>
    withGateway({ http: { trustProxy: ['127.0.0.1'] } }, async (t) => {
      const r = await ota(t, forwarded);
      expect(r.status).toBe(200);
      expect(OtaResponseSchema.parse(r.body).websocket?.url).toBe('wss://gw.example.net/xiaozhi/v1/');
      // A port in the forwarded host is kept; the proxy's own default port is dropped.
      expect((await ota(t, { ...forwarded, 'x-forwarded-host': 'gw.example.net:8443' })).body.websocket?.url).toBe('wss://gw.example.net:8443/xiaozhi/v1/');
      expect((await ota(t, { ...forwarded, 'x-forwarded-host': 'gw.example.net:443' })).body.websocket?.url).toBe('wss://gw.example.net/xiaozhi/v1/');
      // A proxy chain: the nearest proxy's entry (the last) counts.
      expect((await ota(t, { 'x-forwarded-proto': 'http, https', 'x-forwarded-host': 'spoofed.example, gw.example.net' })).body.websocket?.url).toBe(
        'wss://gw.example.net/xiaozhi/v1/',
      );
    }));

  it('ignores the forwarded headers from anyone not listed (the default: nobody)', async () => {
    for (const trustProxy of [[], ['10.0.0.1']])
      await withGateway({ http: { trustProxy } }, async (t) => {
        expect((await ota(t, forwarded)).body.websocket?.url).toBe(`ws://127.0.0.1:${t.gw.httpPort}/xiaozhi/v1/`);
      });
  });

  it('refuses a forwarded host that is not a plain host[:port]', () =>
    withGateway({ http: { trustProxy: ['loopback'] } }, async (t) => {
      for (const bad of ['gw.example.net/evil', 'user@gw.example.net', 'gw.example.net:99999']) {
        const r = await ota(t, { ...forwarded, 'x-forwarded-host': bad });
        expect(r.status).toBe(400);
        expect(r.body.code).toBe('INVALID_REQUEST');
      }
    }));

  it('MQTT: the forwarded host with the plain port, or with tls.mqttPort when TLS is terminated in front (tls.advertise=tls)', async () => {
    await withGateway({ http: { trustProxy: ['127.0.0.1'] }, ota: { transport: 'mqtt' } }, async (t) => {
      expect((await ota(t, forwarded)).body.mqtt?.endpoint).toBe(`gw.example.net:${t.gw.mqttPort}`);
    });
    await withGateway({ http: { trustProxy: ['127.0.0.1'] }, ota: { transport: 'mqtt' }, tls: { advertise: 'tls', mqttPort: 8883 } }, async (t) => {
      expect((await ota(t, forwarded)).body.mqtt?.endpoint).toBe('gw.example.net:8883');
    });
    // advertise=tls also makes the WebSocket URL wss:// without a forwarded proto (a TCP/TLS proxy sends no headers).
    await withGateway({ tls: { advertise: 'tls' } }, async (t) => {
      expect((await ota(t, {})).body.websocket?.url).toBe(`wss://127.0.0.1:${t.gw.httpPort}/xiaozhi/v1/`);
    });
  });

  it('rate-limits OTA per device address (X-Forwarded-For), not per proxy', () =>
    withGateway({ http: { trustProxy: ['127.0.0.1'] }, enrollment: { rateLimit: { burst: 1, perSecond: 0.01 } } }, async (t) => {
      expect((await ota(t, { ...forwarded, 'x-forwarded-for': '198.51.100.1' })).status).toBe(200);
      expect((await ota(t, { ...forwarded, 'x-forwarded-for': '198.51.100.1' })).status).toBe(429);
      expect((await ota(t, { ...forwarded, 'x-forwarded-for': '198.51.100.2' })).status).toBe(200);
    }));
});
