import { mkdtempSync, rmSync } from 'node:fs';
import { connect as netConnect, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connect as tlsConnect } from 'node:tls';
import { formatMqttClientId, OtaResponseSchema } from '@voxgate/protocol';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig, startGateway } from '../../src/index.js';
import { createLogger } from '../../src/log.js';
import { startTestGateway, TEST_API_KEY, type TestGateway } from '../../../test/support/gateway-harness.js';
import { ReferenceDevice } from '../../../test/support/reference-device.js';
import { createTestPki, httpsRequest, type IssuedCertificate, type TestPki } from '../../../test/support/tls-certs.js';
import { once } from '../../../test/support/wait.js';

let dir: string;
let pki: TestPki;
let leaf: IssuedCertificate;

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'voxgate-tls-'));
  pki = createTestPki(dir);
  leaf = pki.issue('voxgate-test-server');
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** TLS on: certFile holds the leaf only; caFile completes the chain up to the root clients trust. */
const tlsConfig = (extra: Record<string, unknown> = {}) => ({
  certFile: leaf.certFile,
  keyFile: leaf.keyFile,
  caFile: pki.intermediateFile,
  mqttPort: 0,
  ...extra,
});

const otaHeaders = (deviceId: string) => ({ 'device-id': deviceId, 'client-id': '7d3c1f0e-3b7a-4c8e-9f21-0a1b2c3d4e5f', 'content-type': 'application/json' });
const otaBody = (deviceId: string) => JSON.stringify({ mac_address: deviceId, application: { name: 'xiaozhi', version: '1.7.6' } });

/** A socket's 'close', however it comes (the server ending it, a reset, a failed handshake). Reads what
 * arrives (a 408, an alert): a paused socket with unread data never gets to 'close'. */
const closed = (s: Socket) => new Promise<void>((resolve) => (s.destroyed ? resolve() : (s.resume(), s.once('close', () => resolve()))));

/** The API over HTTPS, trusting the test root. */
const callTool = (port: number, deviceId: string, volume: number) =>
  httpsRequest(port, `/v1/devices/${deviceId}/tools/self.audio_speaker.set_volume/call`, {
    ca: pki.root,
    method: 'POST',
    headers: { authorization: `Bearer ${TEST_API_KEY}`, 'content-type': 'application/json' },
    body: JSON.stringify({ arguments: { volume } }),
  });

describe('TLS on the HTTP listener and a second MQTT listener', () => {
  let t: TestGateway;
  beforeAll(async () => {
    t = await startTestGateway({ tls: tlsConfig() });
  });
  afterAll(() => t.close());

  it('serves the API over HTTPS, with the chain completed from caFile, and nothing over plain HTTP', async () => {
    expect(t.gw.tls).toBeDefined();
    const health = await httpsRequest(t.gw.httpPort, '/healthz', { ca: pki.root });
    expect(health.status).toBe(200);
    expect(health.fingerprint256).toBe(leaf.fingerprint256);
    const devices = await httpsRequest(t.gw.httpPort, '/v1/devices', { ca: pki.root, headers: { authorization: `Bearer ${TEST_API_KEY}` } });
    expect(devices.status).toBe(200);
    expect(await httpsRequest(t.gw.httpPort, '/v1/devices', { ca: pki.root })).toMatchObject({ status: 401 });
    // Plain HTTP on the TLS port is no HTTP exchange with the API, but it gets a hint (issue 24 item 10):
    // a 400 that says to use https://, a throttled warning and a counter.
    // (t.metric speaks plain HTTP: read the counter in process)
    const plainCount = async () => (await t.gw.metrics.tlsHandshakeFailures.get()).values.find((v) => v.labels.reason === 'plain_http')?.value ?? 0;
    const before = await plainCount();
    const plain = await fetch(`http://127.0.0.1:${t.gw.httpPort}/healthz`);
    expect(plain.status).toBe(400);
    expect(await plain.text()).toContain('This port speaks TLS: use https://');
    expect(await plainCount()).toBe(before + 1);
    expect(t.logs.map((l) => l.msg)).toContain('plain HTTP sent to the HTTPS port; answered 400 "use https://"');
  });

  it('a WSS device connects, and the API calls its tool', async () => {
    const d = new ReferenceDevice({ deviceId: '02:00:00:00:13:01' });
    try {
      const ready = t.nextEvent('device.ready', d.deviceId);
      await d.connectWebSocket(`wss://127.0.0.1:${t.gw.httpPort}/xiaozhi/v1/`, { ca: pki.root });
      await ready;
      expect((await callTool(t.gw.httpPort, d.deviceId, 21)).status).toBe(200);
      expect(d.volume).toBe(21);
    } finally {
      d.terminate();
    }
  });

  it('an MQTTS device connects on the TLS listener (the plain one keeps serving), and the API calls its tool', async () => {
    expect(t.gw.mqttTlsPort).toBeGreaterThan(0);
    expect(t.gw.mqttTlsPort).not.toBe(t.gw.mqttPort);
    const overTls = new ReferenceDevice({ deviceId: '02:00:00:00:13:02' });
    const plain = new ReferenceDevice({ deviceId: '02:00:00:00:13:03' });
    try {
      const ready = t.nextEvent('device.ready', overTls.deviceId);
      await overTls.connectMqtt(`mqtts://127.0.0.1:${t.gw.mqttTlsPort}`, { clientId: formatMqttClientId('voxgate', overTls.deviceId, 'u1'), ca: pki.root });
      await ready;
      const plainReady = t.nextEvent('device.ready', plain.deviceId);
      await plain.connectMqtt(t.mqttUrl, { clientId: formatMqttClientId('voxgate', plain.deviceId, 'u2') });
      await plainReady;
      expect((await callTool(t.gw.httpPort, overTls.deviceId, 33)).status).toBe(200);
      expect(overTls.volume).toBe(33);
    } finally {
      overTls.terminate();
      plain.terminate();
    }
  });

  it('OTA over HTTPS hands WebSocket devices wss:// and MQTT devices the TLS port', async () => {
    const id = '02:00:00:00:13:04';
    const ws = await httpsRequest(t.gw.httpPort, '/xiaozhi/ota/', { ca: pki.root, method: 'POST', headers: otaHeaders(id), body: otaBody(id) });
    expect(ws.status).toBe(200);
    expect(OtaResponseSchema.parse(JSON.parse(ws.body)).websocket?.url).toBe(`wss://127.0.0.1:${t.gw.httpPort}/xiaozhi/v1/`);

    const m = await startTestGateway({ tls: tlsConfig(), metrics: { port: 0 }, ota: { transport: 'mqtt' } });
    try {
      const r = await httpsRequest(m.gw.httpPort, '/xiaozhi/ota/', { ca: pki.root, method: 'POST', headers: otaHeaders(id), body: otaBody(id) });
      const mqtt = OtaResponseSchema.parse(JSON.parse(r.body)).mqtt!;
      expect(mqtt.endpoint).toBe(`127.0.0.1:${m.gw.mqttTlsPort}`);
      // The device can use what it was handed.
      const d = new ReferenceDevice({ deviceId: id });
      const ready = m.nextEvent('device.ready', id);
      await d.connectMqtt(`mqtts://${mqtt.endpoint}`, { clientId: mqtt.client_id!, username: mqtt.username!, password: mqtt.password!, ca: pki.root });
      await ready;
      d.terminate();
    } finally {
      await m.close();
    }
  });

  it('explicit settings override what OTA advertises: tls.advertise=plain, mqtt.publicEndpoint', async () => {
    const id = '02:00:00:00:13:05';
    const plain = await startTestGateway({ tls: tlsConfig({ advertise: 'plain' }) });
    const pinned = await startTestGateway({ tls: tlsConfig(), ota: { transport: 'mqtt' }, mqtt: { publicEndpoint: 'mqtt.example.net:1884' } });
    try {
      const ws = await httpsRequest(plain.gw.httpPort, '/xiaozhi/ota/', { ca: pki.root, method: 'POST', headers: otaHeaders(id), body: otaBody(id) });
      expect(OtaResponseSchema.parse(JSON.parse(ws.body)).websocket?.url).toBe(`ws://127.0.0.1:${plain.gw.httpPort}/xiaozhi/v1/`);
      const mq = await httpsRequest(pinned.gw.httpPort, '/xiaozhi/ota/', { ca: pki.root, method: 'POST', headers: otaHeaders(id), body: otaBody(id) });
      expect(OtaResponseSchema.parse(JSON.parse(mq.body)).mqtt?.endpoint).toBe('mqtt.example.net:1884');
    } finally {
      await plain.close();
      await pinned.close();
    }
  });

  it('the plain broker listener and the TLS one share the per-address cap', async () => {
    const g = await startTestGateway({ tls: tlsConfig(), metrics: { port: 0 }, mqtt: { maxConnectionsPerAddress: 1 } });
    const held: Socket[] = [];
    try {
      const plain = netConnect(g.gw.mqttPort!, '127.0.0.1');
      held.push(plain);
      await once(plain, 'connect');
      await new Promise<void>((resolve) => setImmediate(resolve));
      // The plain socket is the address's one connection: the TLS port refuses the second.
      const refusedBefore = await g.metric('voxgate_connections_refused_total', { listener: 'mqtt', reason: 'address_full' });
      const second = tlsConnect({ host: '127.0.0.1', port: g.gw.mqttTlsPort!, ca: pki.root });
      held.push(second);
      second.on('error', () => {});
      await closed(second);
      expect(second.authorized).toBe(false);
      expect(await g.metric('voxgate_connections_refused_total', { listener: 'mqtt', reason: 'address_full' })).toBe(refusedBefore + 1);
    } finally {
      for (const s of held) s.destroy();
      await g.close();
    }
  });

  it('the HTTPS listener keeps its per-address cap', async () => {
    const g = await startTestGateway({ tls: tlsConfig(), metrics: { port: 0 }, http: { maxConnectionsPerAddress: 1 } });
    const held: Socket[] = [];
    try {
      const first = tlsConnect({ host: '127.0.0.1', port: g.gw.httpPort, ca: pki.root });
      held.push(first);
      await once(first, 'secureConnect');
      const second = tlsConnect({ host: '127.0.0.1', port: g.gw.httpPort, ca: pki.root });
      held.push(second);
      second.on('error', () => {});
      await closed(second);
      expect(second.authorized).toBe(false);
      expect(first.destroyed).toBe(false);
      first.destroy();
      await closed(first);
      expect(await g.metric('voxgate_connections_refused_total', { listener: 'http', reason: 'address_full' })).toBe(1);
    } finally {
      for (const s of held) s.destroy();
      await g.close();
    }
  });

  it('deadlines: a socket that never finishes the handshake, or says nothing after it, is closed on both listeners', async () => {
    const g = await startTestGateway({ tls: tlsConfig(), metrics: { port: 0 }, http: { headersTimeoutMs: 300 }, mqtt: { connectTimeoutMs: 300 } });
    const held: Socket[] = [];
    try {
      // TCP only, no ClientHello: the handshake deadline closes it.
      for (const port of [g.gw.httpPort, g.gw.mqttTlsPort!]) {
        const raw = netConnect(port, '127.0.0.1');
        held.push(raw);
        raw.on('error', () => {});
        await closed(raw);
      }
      expect(await g.metric('voxgate_tls_handshake_failures_total', { listener: 'http', reason: 'timeout' })).toBe(1);
      expect(await g.metric('voxgate_tls_handshake_failures_total', { listener: 'mqtt', reason: 'timeout' })).toBe(1);
      // Handshake done, then silence: no HTTP request / no MQTT CONNECT closes it too.
      for (const port of [g.gw.httpPort, g.gw.mqttTlsPort!]) {
        const s = tlsConnect({ host: '127.0.0.1', port, ca: pki.root });
        held.push(s);
        s.on('error', () => {});
        await once(s, 'secureConnect');
        await closed(s);
      }
      expect(await g.metric('voxgate_connections_refused_total', { listener: 'mqtt', reason: 'no_connect' })).toBe(1);
      expect(await g.metric('voxgate_connections_refused_total', { listener: 'http', reason: 'no_request' })).toBe(1);
    } finally {
      for (const s of held) s.destroy();
      await g.close();
    }
  });
});

/** The configuration rules: ../config.test.ts; the files and the reload: ../tls/certificates.test.ts. */
describe('TLS configuration at start', () => {
  it('refuses to start on a key that does not match the certificate, naming the files but not their content', async () => {
    const other = pki.issue('voxgate-test-other');
    const dataDir = mkdtempSync(join(tmpdir(), 'voxgate-tls-bad-'));
    try {
      const config = loadConfig(
        {},
        { dataDir, http: { host: '127.0.0.1', port: 0 }, mqtt: { host: '127.0.0.1', port: 0 }, tls: { certFile: leaf.certFile, keyFile: other.keyFile } },
      );
      const err = await startGateway(config, { log: createLogger('silent') }).then(
        () => undefined,
        (e: unknown) => e as Error,
      );
      expect(err?.message).toMatch(/do not make a usable TLS context/);
      expect(err?.message).not.toMatch(/PRIVATE KEY|BEGIN/);
      const missing = loadConfig({}, { dataDir, tls: { certFile: join(dir, 'nope.pem'), keyFile: other.keyFile } });
      await expect(startGateway(missing, { log: createLogger('silent') })).rejects.toThrow(/tls.certFile .*nope.pem: ENOENT/);
    } finally {
      rmSync(dataDir, { recursive: true, force: true });
    }
  });
});
