/** Which upgrade listener answers which request target: the device endpoint, the MCP endpoint, or a 404. */
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
});
