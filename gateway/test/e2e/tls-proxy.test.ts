import { OtaResponseSchema, type OtaResponse } from '@voxgate/protocol';
import { describe, expect, it } from 'vitest';
import { WebSocket } from 'ws';
import { startTestGateway, type TestGateway } from '../../../test/support/gateway-harness.js';
import { ReferenceDevice } from '../../../test/support/reference-device.js';

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

describe('device WebSockets behind a reverse proxy (http.trustProxy)', () => {
  /** Connect a reference device through "the proxy" (loopback), which says the device is at `forwardedFor`. */
  async function joinVia(t: TestGateway, deviceId: string, forwardedFor: string): Promise<ReferenceDevice> {
    const d = new ReferenceDevice({ deviceId });
    const ready = t.nextEvent('device.ready', deviceId);
    await d.connectWebSocket(t.wsUrl, { headers: { 'X-Forwarded-For': forwardedFor } });
    await ready;
    return d;
  }
  const connectedFrom = (t: TestGateway, deviceId: string) =>
    t.logs.filter((l) => l['msg'] === 'device connected' && l['deviceId'] === deviceId).map((l) => l['remote']);

  it("a trusted proxy's X-Forwarded-For is the device's address; from anyone else it is ignored", async () => {
    await withGateway({ http: { trustProxy: ['127.0.0.1'] } }, async (t) => {
      const d = await joinVia(t, '02:00:00:00:15:10', '198.51.100.9');
      // A chain: the entry the trusted proxy added (the last) counts, not what the client put before it.
      const e = await joinVia(t, '02:00:00:00:15:11', '203.0.113.66, 198.51.100.10');
      // Not an address (a misconfigured proxy): the socket's address.
      const f = await joinVia(t, '02:00:00:00:15:12', 'not-an-address');
      expect(connectedFrom(t, d.deviceId)).toEqual(['198.51.100.9']);
      expect(connectedFrom(t, e.deviceId)).toEqual(['198.51.100.10']);
      expect(connectedFrom(t, f.deviceId)).toEqual(['127.0.0.1']);
      for (const x of [d, e, f]) x.terminate();
    });
    for (const trustProxy of [[], ['10.0.0.1']])
      await withGateway({ http: { trustProxy } }, async (t) => {
        const d = await joinVia(t, '02:00:00:00:15:13', '198.51.100.9');
        expect(connectedFrom(t, d.deviceId)).toEqual(['127.0.0.1']);
        d.terminate();
      });
  });

  it('the per-address frame budget counts each device address behind the proxy, not the proxy', () =>
    withGateway(
      { http: { trustProxy: ['loopback'] }, frames: { devicePerSecond: 1000, deviceBurst: 1000, addressPerSecond: 50, addressBurst: 20 } },
      async (t) => {
        const flooder = await joinVia(t, '02:00:00:00:15:20', '198.51.100.21');
        const other = await joinVia(t, '02:00:00:00:15:21', '198.51.100.22');
        for (let i = 0; i < 60; i++) flooder.sendMcp({ jsonrpc: '2.0', id: `f-${i}`, method: 'flood/x' });
        for (let i = 0; i < 15; i++) other.sendMcp({ jsonrpc: '2.0', id: `o-${i}`, method: 'flood/x' });
        await other.waitForMcp((p) => p['id'] === 'o-14', 30_000);
        await flooder.waitForMcp((p) => p['id'] === 'f-59', 60_000);
        const paused = t.logs.filter((l) => l['reason'] === 'frame_rate');
        expect(paused.some((l) => l['deviceId'] === flooder.deviceId && l['budget'] === 'address' && l['remote'] === '198.51.100.21')).toBe(true);
        // 15 frames, under its own address's 20: sharing the proxy's address with the flooder, it would have paused.
        expect(paused.some((l) => l['deviceId'] === other.deviceId)).toBe(false);
        flooder.terminate();
        other.terminate();
      },
    ));
});

describe('tool processes behind a reverse proxy (http.trustProxy)', () => {
  /** The status an upgrade to the MCP endpoint with an unknown token gets, through "the proxy" for `forwardedFor`. */
  const unknownToken = (t: TestGateway, forwardedFor: string) =>
    new Promise<number>((resolve, reject) => {
      const ws = new WebSocket(`ws://127.0.0.1:${t.gw.httpPort}/mcp_endpoint/mcp/?token=wrong`, { headers: { 'X-Forwarded-For': forwardedFor } });
      ws.on('unexpected-response', (_req, res) => {
        resolve(res.statusCode ?? 0);
        ws.terminate();
      });
      ws.on('open', () => reject(new Error('an unknown token was let in')));
      ws.on('error', () => {});
    });

  it('limits unknown tokens per address behind the proxy, not per proxy', () =>
    withGateway({ http: { trustProxy: ['127.0.0.1'] }, mcp: { endpoints: { unknownTokenBurst: 1, unknownTokenPerSecond: 0.01 } } }, async (t) => {
      expect(await unknownToken(t, '198.51.100.31')).toBe(401);
      expect(await unknownToken(t, '198.51.100.31')).toBe(429);
      expect(await unknownToken(t, '198.51.100.32')).toBe(401);
    }));
});
