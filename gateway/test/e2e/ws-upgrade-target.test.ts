/** Which upgrade listener answers which request target: the device endpoint, the MCP endpoint, or a 404. */
import { connect } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WebSocket } from 'ws';
import { startTestGateway, type TestGateway } from '../../../test/support/gateway-harness.js';

/** The upgrade's outcome: 101 when the socket opened, else the refusal's HTTP status. */
function upgradeStatus(url: string, headers: Record<string, string> = {}): Promise<number> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url, { headers });
    ws.once('open', () => {
      ws.terminate();
      resolve(101);
    });
    ws.once('unexpected-response', (_req, res) => {
      resolve(res.statusCode ?? 0);
      res.resume();
      ws.terminate();
    });
    ws.once('error', (e) => reject(e));
  });
}

/** An upgrade request with a raw request target (no client library would send these); the answer's status line. */
function rawUpgrade(port: number, target: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const s = connect(port, '127.0.0.1');
    let got = '';
    s.on('data', (d: Buffer) => {
      got += d.toString('latin1');
      if (got.includes('\r\n')) {
        resolve(got.slice(0, got.indexOf('\r\n')));
        s.destroy();
      }
    });
    s.on('close', () => resolve(got === '' ? '(closed without an answer)' : got));
    s.on('error', reject);
    s.write(
      `GET ${target} HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n` +
        'Sec-WebSocket-Version: 13\r\nDevice-Id: 02:00:00:00:aa:09\r\n\r\n',
    );
  });
}

describe('device WebSocket upgrade targets', () => {
  let t: TestGateway;
  let origin: string;
  beforeAll(async () => {
    t = await startTestGateway();
    origin = `ws://127.0.0.1:${t.gw.httpPort}`;
  });
  afterAll(() => t.close());

  it('accepts the device path with or without its trailing slash, ids in headers or in the query', async () => {
    const headers = { 'Device-Id': '02:00:00:00:aa:01', 'Client-Id': 'c1' };
    expect(await upgradeStatus(`${origin}/xiaozhi/v1/`, headers)).toBe(101);
    expect(await upgradeStatus(`${origin}/xiaozhi/v1`, headers)).toBe(101);
    expect(await upgradeStatus(`${origin}/xiaozhi/v1/?device-id=02:00:00:00:aa:02&client-id=c2`)).toBe(101);
    expect(await upgradeStatus(`${origin}/xiaozhi/v1/?device_id=02:00:00:00:aa:03`)).toBe(101);
    expect(await upgradeStatus(`${origin}/xiaozhi/v1/?client-id=c4`)).toBe(400);
  });

  it('refuses any other path with 404, and leaves the MCP endpoint its own', async () => {
    const headers = { 'Device-Id': '02:00:00:00:aa:05' };
    expect(await upgradeStatus(`${origin}/xiaozhi/v1/extra`, headers)).toBe(404);
    expect(await upgradeStatus(`${origin}/xiaozhi/v2/`, headers)).toBe(404);
    expect(await upgradeStatus(`${origin}/mcp_endpoint/mcp/?token=not-a-token`)).toBe(401);
    expect(await upgradeStatus(`${origin}/mcp_endpoint/mcp?token=not-a-token`)).toBe(401);
  });

  it('answers targets a URL parser refuses with 404, and keeps serving (one used to stop the gateway)', async () => {
    // `new URL('//[', base)` throws: before 2026-11-27 that throw left the upgrade listener and the safety net stopped
    // the process, for anyone who could reach the port, before any authentication.
    for (const target of ['//[', 'http://[', '//a:b@/x', '/xiaozhi/v1/%zz?device-id=%zz'])
      expect(await rawUpgrade(t.gw.httpPort, target), target).toMatch(/^HTTP\/1\.1 (404|400) /);
    expect((await t.api('GET', '/healthz', undefined, { apiKey: null })).status).toBe(200);
    expect(await upgradeStatus(`${origin}/xiaozhi/v1/`, { 'Device-Id': '02:00:00:00:aa:0a' })).toBe(101);
  });
});
