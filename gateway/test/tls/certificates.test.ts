import { copyFileSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createServer, type Server } from 'node:tls';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { metricValue } from '../../../test/support/device-parts.js';
import { createTestPki, presentedFingerprint, type IssuedCertificate, type TestPki } from '../../../test/support/tls-certs.js';
import { createMetrics } from '../../src/metrics.js';
import { loadTlsFiles, TlsCertificates } from '../../src/tls/certificates.js';

let dir: string;
let pki: TestPki;
let first: IssuedCertificate;
let renewed: IssuedCertificate;

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'voxgate-tls-part-'));
  pki = createTestPki(dir);
  first = pki.issue('voxgate-first');
  renewed = pki.issue('voxgate-renewed');
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** The files as a renewal (certbot, a secret mount) rewrites them. */
function liveFiles(name: string, cert: IssuedCertificate) {
  const live = { certFile: join(dir, `${name}.live.pem`), keyFile: join(dir, `${name}.live.key`), caFile: pki.intermediateFile };
  copyFileSync(cert.certFile, live.certFile);
  copyFileSync(cert.keyFile, live.keyFile);
  return live;
}

describe('loadTlsFiles', () => {
  it('reads a leaf with its chain and summarises it without the key', () => {
    const { options, summary } = loadTlsFiles({ certFile: first.certFile, keyFile: first.keyFile, caFile: pki.intermediateFile });
    expect(summary).toMatchObject({ subject: 'CN=voxgate-first', issuer: 'CN=voxgate-test-intermediate', fingerprint256: first.fingerprint256 });
    expect(Date.parse(summary.validTo)).toBeGreaterThan(Date.now());
    expect(options.ca).toBeDefined();
    expect(JSON.stringify(summary)).not.toMatch(/PRIVATE KEY/);
  });

  it('refuses a key that does not match the certificate, naming the files but not their content', () => {
    expect(() => loadTlsFiles({ certFile: first.certFile, keyFile: renewed.keyFile })).toThrow(/do not make a usable TLS context/);
    try {
      loadTlsFiles({ certFile: first.certFile, keyFile: renewed.keyFile });
    } catch (e) {
      expect((e as Error).message).not.toMatch(/PRIVATE KEY|BEGIN/);
    }
  });

  it('names the file that is missing, or that is not a certificate', () => {
    expect(() => loadTlsFiles({ certFile: join(dir, 'nope.pem'), keyFile: first.keyFile })).toThrow(/^tls.certFile .*nope.pem: ENOENT$/);
    expect(() => loadTlsFiles({ certFile: first.certFile, keyFile: join(dir, 'nope.key') })).toThrow(/^tls.keyFile .*nope.key: ENOENT$/);
    const garbage = join(dir, 'garbage.pem');
    writeFileSync(garbage, 'not a certificate');
    expect(() => loadTlsFiles({ certFile: garbage, keyFile: first.keyFile })).toThrow(/^tls.certFile .*garbage.pem: not a PEM certificate$/);
  });
});

describe('TlsCertificates: reload', () => {
  const lines: Array<Record<string, unknown>> = [];
  const log = pino({ level: 'info' }, { write: (s: string) => void lines.push(JSON.parse(s) as Record<string, unknown>) });

  async function listener(certs: TlsCertificates): Promise<{ server: Server; port: number }> {
    const server = createServer(certs.options, (s) => s.end());
    certs.serve(server);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    return { server, port: (server.address() as { port: number }).port };
  }
  const close = (s: Server) => new Promise<void>((resolve) => s.close(() => resolve()));

  it('swaps the certificate for new connections on every listener it serves', async () => {
    const metrics = createMetrics();
    const live = liveFiles('swap', first);
    const certs = new TlsCertificates(live, log, metrics);
    const [a, b] = [await listener(certs), await listener(certs)];
    try {
      expect(await presentedFingerprint(a.port, pki.root)).toBe(first.fingerprint256);
      copyFileSync(renewed.certFile, live.certFile);
      copyFileSync(renewed.keyFile, live.keyFile);
      expect(certs.reload()).toBe(true);
      expect(certs.summary.fingerprint256).toBe(renewed.fingerprint256);
      expect(await presentedFingerprint(a.port, pki.root)).toBe(renewed.fingerprint256);
      expect(await presentedFingerprint(b.port, pki.root)).toBe(renewed.fingerprint256);
      expect(await metricValue(metrics, 'voxgate_tls_reloads_total', { outcome: 'ok' })).toBe(1);
      expect(lines.find((l) => l['msg'] === 'TLS certificate reloaded')).toMatchObject({
        listeners: 2,
        certificate: { fingerprint256: renewed.fingerprint256 },
      });
    } finally {
      await Promise.all([close(a.server), close(b.server)]);
    }
  });

  it('a new certificate that does not load (garbage, or a key of another certificate) keeps the old one and logs an error', async () => {
    lines.length = 0;
    const metrics = createMetrics();
    const live = liveFiles('bad', first);
    const certs = new TlsCertificates(live, log, metrics);
    const { server, port } = await listener(certs);
    try {
      writeFileSync(live.certFile, 'not a certificate');
      expect(certs.reload()).toBe(false);
      copyFileSync(renewed.certFile, live.certFile); // the renewed certificate, but the first one's key
      expect(certs.reload()).toBe(false);

      expect(await presentedFingerprint(port, pki.root)).toBe(first.fingerprint256);
      expect(certs.summary.fingerprint256).toBe(first.fingerprint256);
      expect(await metricValue(metrics, 'voxgate_tls_reloads_total', { outcome: 'failed' })).toBe(2);
      const errors = lines.filter((l) => l['msg'] === 'TLS reload failed; still serving the previous certificate');
      expect(errors).toHaveLength(2);
      expect(errors[0]).toMatchObject({
        level: 50,
        err: expect.stringContaining('not a PEM certificate'),
        certificate: { fingerprint256: first.fingerprint256 },
      });
      expect(errors[1]).toMatchObject({ err: expect.stringContaining('do not make a usable TLS context') });
      expect(JSON.stringify(errors)).not.toContain('PRIVATE KEY');
    } finally {
      await close(server);
    }
  });
});
