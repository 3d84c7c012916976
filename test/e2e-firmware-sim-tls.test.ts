import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { DeviceSimProcess } from './support/device-sim-process.js';
import { startTestGateway, TEST_API_KEY, type TestGateway } from './support/gateway-harness.js';
import { createTestPki, httpsRequest, type TestPki } from './support/tls-certs.js';

/**
 * The C++ firmware simulator (libwebsockets, libmosquitto: both on OpenSSL) against the gateway's TLS
 * listeners, verifying the gateway's certificate chain against a root given with --ca-file (the host's
 * stand-in for the certificate bundle built into the firmware).
 */
let dir: string;
let pki: TestPki;
let t: TestGateway;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'voxgate-sim-tls-'));
  pki = createTestPki(dir);
  const leaf = pki.issue('voxgate-sim-server');
  t = await startTestGateway({ tls: { certFile: leaf.certFile, keyFile: leaf.keyFile, caFile: pki.intermediateFile } });
});
afterAll(async () => {
  await t.close();
  rmSync(dir, { recursive: true, force: true });
});

describe('firmware simulator over TLS', () => {
  const cleanup: Array<() => Promise<void>> = [];
  afterEach(async () => {
    for (const f of cleanup.splice(0).reverse()) await f();
  });
  const sim = (args: string[]) => {
    const p = new DeviceSimProcess([...args, '--reconnect-max-ms', '1000']);
    cleanup.push(() => p.stop());
    return p;
  };
  const setVolume = (mac: string, volume: number) =>
    httpsRequest(t.gw.httpPort, `/v1/devices/${mac}/tools/self.audio_speaker.set_volume/call`, {
      ca: pki.root,
      method: 'POST',
      headers: { authorization: `Bearer ${TEST_API_KEY}`, 'content-type': 'application/json' },
      body: JSON.stringify({ arguments: { volume } }),
    });

  it.each([
    ['WSS', '02:00:00:00:16:01', () => ['--ws', `wss://127.0.0.1:${t.gw.httpPort}/xiaozhi/v1/`]],
    ['MQTTS', '02:00:00:00:16:02', () => ['--mqtt', `127.0.0.1:${t.gw.mqttTlsPort}`, '--mqtt-tls']],
  ] as const)('connects over %s, lists its tools and answers a call', async (_name, mac, link) => {
    const ready = t.nextEvent('device.ready', mac, 30_000);
    sim([...link(), '--ca-file', pki.rootFile, '--device-id', mac]);
    expect((await ready).data['toolCount']).toBeGreaterThan(0);
    const r = await setVolume(mac, 61);
    expect(r.status).toBe(200);
    expect(JSON.parse(r.body)).toMatchObject({ isError: false });
  });

  it('provisions itself through OTA over HTTPS: handed wss:// (WebSocket) or the TLS broker port (MQTT), it connects there', async () => {
    const wsMac = '02:00:00:00:16:05';
    const wsReady = t.nextEvent('device.ready', wsMac, 30_000);
    sim(['--ota', `https://127.0.0.1:${t.gw.httpPort}/xiaozhi/ota/`, '--ca-file', pki.rootFile, '--device-id', wsMac]);
    await wsReady;
    expect(t.gw.registry.sessions().find((s) => s.deviceId === wsMac)?.transport).toBe('websocket');

    // MQTT: the OTA answer names the TLS port; a port other than 8883 needs --mqtt-tls (the device's rule).
    const m = await startTestGateway({ tls: t.gw.config.tls, ota: { transport: 'mqtt' } });
    cleanup.push(() => m.close());
    const mqttMac = '02:00:00:00:16:06';
    const mqttReady = m.nextEvent('device.ready', mqttMac, 30_000);
    sim(['--ota', `https://127.0.0.1:${m.gw.httpPort}/xiaozhi/ota/`, '--mqtt-tls', '--ca-file', pki.rootFile, '--device-id', mqttMac]);
    await mqttReady;
    expect(m.gw.registry.sessions().find((s) => s.deviceId === mqttMac)?.transport).toBe('mqtt');
  });

  it.each([
    ['WSS', '02:00:00:00:16:03', () => ['--ws', `wss://127.0.0.1:${t.gw.httpPort}/xiaozhi/v1/`]],
    ['MQTTS', '02:00:00:00:16:04', () => ['--mqtt', `127.0.0.1:${t.gw.mqttTlsPort}`, '--mqtt-tls']],
  ] as const)('over %s, refuses a gateway whose certificate it cannot verify (the system store lacks the test root)', async (_name, mac, link) => {
    const p = sim([...link(), '--device-id', mac]);
    // The handshake fails on the device's side; the device never connects.
    const failed = await p.waitFor((e) => e.event === 'error', 30_000, 'a failed connection');
    expect(failed['message']).toMatch(/SSL|TLS/);
    expect(p.events.some((e) => e.event === 'connected')).toBe(false);
    expect(t.gw.registry.sessions().some((s) => s.deviceId === mac)).toBe(false);
  });
});
