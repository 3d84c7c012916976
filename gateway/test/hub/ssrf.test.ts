import { createServer, type Server } from 'node:http';
import { fetch as undiciFetch } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { guardedDispatcher, guardedFetch, guardedRequest, isBlockedAddress } from '../../src/hub/ssrf.js';

describe('SSRF guard for HTTP and SSE upstreams', () => {
  let server: Server;
  let port = 0;
  const seen: Array<{ method: string; body: string; key: string | undefined }> = [];
  beforeAll(async () => {
    server = createServer((req, res) => {
      let body = '';
      req.on('data', (c: Buffer) => (body += c.toString()));
      req.on('end', () => {
        seen.push({ method: req.method ?? '', body, key: req.headers['x-api-key'] as string | undefined });
        res.end('ok');
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    port = (server.address() as { port: number }).port;
  });
  afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

  it('checks the address inside the connection itself, so a re-resolved name cannot slip through', async () => {
    // The dispatcher alone (no up-front check): `localhost` resolves to loopback at connect time and is refused.
    await expect(undiciFetch(`http://localhost:${port}/`, { dispatcher: await guardedDispatcher() })).rejects.toMatchObject({ cause: { name: 'SsrfError' } });
    // Control: the same request without the guard reaches the server.
    expect(await (await undiciFetch(`http://localhost:${port}/`)).text()).toBe('ok');
  });

  it('refuses private addresses up front with a clear error, and passes method, body and filled headers when allowed', async () => {
    const guarded = guardedFetch(false, () => ({}));
    await expect(guarded(`http://localhost:${port}/mcp`)).rejects.toThrow(/refused to connect to localhost/);
    await expect(guarded(`http://127.0.0.1:${port}/mcp`)).rejects.toThrow(/refused to connect to 127\.0\.0\.1/);

    const allowed = guardedFetch(true, () => ({ 'x-api-key': 'filled-per-request' }));
    const viaInit = await allowed(`http://127.0.0.1:${port}/mcp`, { method: 'POST', body: '{"a":1}', headers: { 'content-type': 'application/json' } });
    expect(await viaInit.text()).toBe('ok');
    const viaRequest = await allowed(new Request(`http://127.0.0.1:${port}/mcp`, { method: 'POST', body: '{"b":2}' }));
    expect(viaRequest.status).toBe(200);
    expect(seen.slice(-2)).toEqual([
      { method: 'POST', body: '{"a":1}', key: 'filled-per-request' },
      { method: 'POST', body: '{"b":2}', key: 'filled-per-request' },
    ]);
  });
});

describe('the SSRF guard (moved from e2e/hub-openapi.test.ts)', () => {
  it('blocks every private, loopback, link-local and metadata range, and resolves names before connecting', async () => {
    for (const a of [
      '127.0.0.1',
      '10.1.2.3',
      '172.16.0.1',
      '192.168.1.1',
      '169.254.169.254',
      '100.64.0.1',
      '0.0.0.0',
      '::1',
      'fe80::1',
      'fd00::1',
      '::ffff:127.0.0.1',
    ])
      expect(isBlockedAddress(a), a).toBe(true);
    for (const a of ['93.184.216.34', '8.8.8.8', '2606:4700:4700::1111']) expect(isBlockedAddress(a), a).toBe(false);
    // "localhost" resolves to loopback: refused inside the lookup, before any connection.
    await expect(
      guardedRequest(new URL('http://localhost:9/whoami'), {
        method: 'GET',
        headers: {},
        timeoutMs: 5000,
        maxResponseBytes: 1000,
        allowPrivateNetwork: false,
      }),
    ).rejects.toThrow(/refused to connect to localhost/);
  });
});
