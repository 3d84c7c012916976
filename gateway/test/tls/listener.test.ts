import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { connect, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createServer as createHttpsServer } from 'node:https';
import { createServer as createTlsServer, type Server } from 'node:tls';
import pino from 'pino';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { metricValue } from '../../../test/support/device-parts.js';
import { createTestPki, type IssuedCertificate } from '../../../test/support/tls-certs.js';
import { createMetrics } from '../../src/metrics.js';
import { closeFailedHandshakes } from '../../src/tls/listener.js';

let dir: string;
let leaf: IssuedCertificate;
beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'voxgate-tls-listener-'));
  leaf = createTestPki(dir).issue('voxgate-listener');
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const servers: Server[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => new Promise<void>((resolve) => s.close(() => resolve()))));
});

/** Write `text` on a raw socket and collect what comes back until the server closes it. */
function exchange(port: number, text: string): Promise<string> {
  return new Promise((resolve) => {
    const s: Socket = connect({ port, host: '127.0.0.1' });
    let got = '';
    s.on('data', (d: Buffer) => (got += d.toString('latin1')));
    s.on('error', () => undefined);
    s.on('close', () => resolve(got));
    s.write(text);
  });
}

async function listen(server: Server): Promise<number> {
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return (server.address() as { port: number }).port;
}

describe('closeFailedHandshakes', () => {
  const pem = () => ({ cert: readFileSync(leaf.certFile), key: readFileSync(leaf.keyFile) });

  it('answers plain HTTP sent to the HTTPS port with a 400 that says to use https://, and counts it', async () => {
    const metrics = createMetrics();
    const server = createHttpsServer(await pem(), (_req, res) => res.end('tls ok'));
    closeFailedHandshakes(server, 'http', metrics, pino({ level: 'silent' }));
    const port = await listen(server);
    const answer = await exchange(port, 'GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n');
    expect(answer).toMatch(/^HTTP\/1\.1 400 Bad Request\r\n/);
    expect(answer).toContain('This port speaks TLS: use https:// (and wss:// for devices) instead of http://.');
    expect(await metricValue(metrics, 'voxgate_tls_handshake_failures_total', { listener: 'http', reason: 'plain_http' })).toBe(1);
  });

  it('closes a socket whose handshake fails on the broker port, without an answer, and counts it as an error', async () => {
    const metrics = createMetrics();
    const server = createTlsServer(await pem(), (s) => s.end());
    closeFailedHandshakes(server, 'mqtt', metrics, pino({ level: 'silent' }));
    const port = await listen(server);
    expect(await exchange(port, 'GET / HTTP/1.1\r\n\r\n')).not.toContain('use https://');
    await expect.poll(() => metricValue(metrics, 'voxgate_tls_handshake_failures_total', { listener: 'mqtt', reason: 'error' })).toBe(1);
  });

  it('closes a socket that never finishes its handshake within handshakeTimeout, counted as a timeout', async () => {
    const metrics = createMetrics();
    const server = createTlsServer({ ...pem(), handshakeTimeout: 100 }, (s) => s.end());
    closeFailedHandshakes(server, 'mqtt', metrics, pino({ level: 'silent' }));
    const port = await listen(server);
    // Says nothing at all: the deadline ends it.
    await exchange(port, '');
    expect(await metricValue(metrics, 'voxgate_tls_handshake_failures_total', { listener: 'mqtt', reason: 'timeout' })).toBe(1);
  });
});
