import { copyFileSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { formatMqttClientId } from '@voxgate/protocol';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isolatedEnv, startCompiledGateway } from '../../../test/support/gateway-process.js';
import { startTestGateway, TEST_API_KEY } from '../../../test/support/gateway-harness.js';
import { ReferenceDevice } from '../../../test/support/reference-device.js';
import { createTestPki, httpsRequest, presentedFingerprint, type IssuedCertificate, type TestPki } from '../../../test/support/tls-certs.js';

let dir: string;
let pki: TestPki;
let first: IssuedCertificate;
let renewed: IssuedCertificate;

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'voxgate-tls-reload-'));
  pki = createTestPki(dir);
  first = pki.issue('voxgate-first');
  renewed = pki.issue('voxgate-renewed');
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** The files the gateway is configured with, as a certificate renewal (certbot, a secret mount) rewrites them. */
function liveFiles(name: string, cert: IssuedCertificate) {
  const live = { certFile: join(dir, `${name}.live.pem`), keyFile: join(dir, `${name}.live.key`) };
  install(live, cert);
  return live;
}
function install(live: { certFile: string; keyFile: string }, cert: IssuedCertificate): void {
  copyFileSync(cert.certFile, live.certFile);
  copyFileSync(cert.keyFile, live.keyFile);
}

/** The reload itself (swap, a set that does not load): ../tls/certificates.test.ts; here, both listeners and open devices. */
describe('TLS certificate reload', () => {
  it('swaps the certificate for new connections on both listeners while open devices keep theirs', async () => {
    const live = liveFiles('swap', first);
    const t = await startTestGateway({ tls: { ...live, caFile: pki.intermediateFile, mqttPort: 0 }, metrics: { port: 0 } });
    const ws = new ReferenceDevice({ deviceId: '02:00:00:00:14:01' });
    const mq = new ReferenceDevice({ deviceId: '02:00:00:00:14:02' });
    try {
      const ready = Promise.all([t.nextEvent('device.ready', ws.deviceId), t.nextEvent('device.ready', mq.deviceId)]);
      await ws.connectWebSocket(`wss://127.0.0.1:${t.gw.httpPort}/xiaozhi/v1/`, { ca: pki.root });
      await mq.connectMqtt(`mqtts://127.0.0.1:${t.gw.mqttTlsPort}`, { clientId: formatMqttClientId('voxgate', mq.deviceId, 'u'), ca: pki.root });
      await ready;
      expect(await presentedFingerprint(t.gw.httpPort, pki.root)).toBe(first.fingerprint256);

      install(live, renewed);
      expect(t.gw.reloadTls()).toBe(true);

      expect(await presentedFingerprint(t.gw.httpPort, pki.root)).toBe(renewed.fingerprint256);
      expect(await presentedFingerprint(t.gw.mqttTlsPort!, pki.root)).toBe(renewed.fingerprint256);
      // The devices connected before the reload were not dropped: their sessions still answer calls.
      expect(ws.connected && mq.connected).toBe(true);
      for (const [d, volume] of [
        [ws, 41],
        [mq, 42],
      ] as const) {
        const r = await httpsRequest(t.gw.httpPort, `/v1/devices/${d.deviceId}/tools/self.audio_speaker.set_volume/call`, {
          ca: pki.root,
          method: 'POST',
          headers: { authorization: `Bearer ${TEST_API_KEY}`, 'content-type': 'application/json' },
          body: JSON.stringify({ arguments: { volume } }),
        });
        expect(r.status).toBe(200);
        expect(r.fingerprint256).toBe(renewed.fingerprint256);
        expect(d.volume).toBe(volume);
      }
      expect(await t.metric('voxgate_tls_reloads_total', { outcome: 'ok' })).toBe(1);
      // The served certificate's expiry, for an alert (the test certificates live two days).
      expect(await t.metric('voxgate_tls_certificate_expiry_timestamp_seconds')).toBeGreaterThan(Date.now() / 1000 + 86_400);
      expect(t.logs.find((l) => l.msg === 'TLS certificate reloaded')).toMatchObject({ certificate: { fingerprint256: renewed.fingerprint256 } });
    } finally {
      ws.terminate();
      mq.terminate();
      await t.close();
    }
  });

  it('without TLS a reload is a logged no-op', async () => {
    const t = await startTestGateway();
    try {
      expect(t.gw.reloadTls()).toBe(false);
      expect(t.logs.map((l) => l.msg)).toContain('TLS reload asked, but no tls.certFile is configured; nothing to reload');
    } finally {
      await t.close();
    }
  });
});

describe('signals to the compiled gateway as a process', () => {
  it('SIGUSR2 rereads the certificate files and keeps running; SIGHUP (twice, as a closed terminal sends it) stops it gracefully', async () => {
    const live = liveFiles('sighup', first);
    const dataDir = mkdtempSync(join(tmpdir(), 'voxgate-tls-hup-'));
    writeFileSync(join(dataDir, 'gateway.config.json'), '{}');
    const run = startCompiledGateway(
      isolatedEnv(dataDir, {
        GATEWAY_API_KEYS: 'hup-test-key',
        GATEWAY_TLS_CERT_FILE: live.certFile,
        GATEWAY_TLS_KEY_FILE: live.keyFile,
        GATEWAY_TLS_CA_FILE: pki.intermediateFile,
        GATEWAY_TLS_MQTT_PORT: '0',
      }),
    );
    try {
      const started = (await run.logLine('voxgate started')) as { http: string; mqttTls: string; tls: boolean };
      expect(started.tls).toBe(true);
      const httpPort = Number(started.http.split(':').pop());
      const mqttTlsPort = Number(started.mqttTls.split(':').pop());
      const d = new ReferenceDevice({ deviceId: '02:00:00:00:14:03' });
      await d.connectWebSocket(`wss://127.0.0.1:${httpPort}/xiaozhi/v1/`, { ca: pki.root });

      install(live, renewed);
      run.child.kill('SIGUSR2');
      await run.logLine('TLS certificate reloaded');
      expect(await presentedFingerprint(httpPort, pki.root)).toBe(renewed.fingerprint256);
      expect(await presentedFingerprint(mqttTlsPort, pki.root)).toBe(renewed.fingerprint256);
      expect(d.connected).toBe(true);
      expect(run.child.exitCode).toBeNull();

      run.child.kill('SIGHUP');
      await run.logLine('signal received');
      run.child.kill('SIGHUP');
      expect((await d.closed()).code).toBe(1001);
      expect(await run.exited).toEqual({ code: 0, signal: null });
      expect(run.logs.map((l) => l.msg)).toContain('stopped');
    } finally {
      run.child.kill('SIGKILL');
      rmSync(dataDir, { recursive: true, force: true });
    }
  }, 60_000);
});
