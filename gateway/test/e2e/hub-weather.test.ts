import { readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { fileURLToPath } from 'node:url';
import { Client, StreamableHTTPClientTransport, type CallToolResult } from '@modelcontextprotocol/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestGateway, TEST_API_KEY, type TestGateway } from '../../../test/support/gateway-harness.js';
import { EVERYTHING_BIN, isAlive } from '../../../test/support/hub.js';
import { ReferenceDevice } from '../../../test/support/reference-device.js';

/** "Done means": server-everything, the weather server and an OpenAPI spec, plus a device, through /mcp. */
const WEATHER_MAIN = fileURLToPath(new URL('../../../mcp_servers/weather/src/main.ts', import.meta.url));
const JMA_FIXTURE = readFileSync(fileURLToPath(new URL('../../../mcp_servers/weather/test/fixtures/130000.json', import.meta.url)), 'utf8');
const text = (r: CallToolResult) => r.content.map((c) => (c.type === 'text' ? c.text : '')).join('');

describe('one MCP client, every kind of tool', () => {
  let upstream: Server;
  let t: TestGateway;
  const device = new ReferenceDevice({ deviceId: '02:00:00:00:03:01' });

  beforeAll(async () => {
    // One local HTTP server plays both the JMA API and a small REST API with an OpenAPI document.
    upstream = createServer((req, res) => {
      if (req.url === '/bosai/forecast/data/forecast/130000.json') return res.writeHead(200, { 'content-type': 'application/json' }).end(JMA_FIXTURE);
      if (req.url === '/api/ping') return res.writeHead(200, { 'content-type': 'application/json' }).end('{"pong":true}');
      res.writeHead(404).end();
    });
    await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve));
    const base = `http://127.0.0.1:${(upstream.address() as AddressInfo).port}`;
    t = await startTestGateway({
      mcp: {
        servers: {
          everything: { command: process.execPath, args: [EVERYTHING_BIN] },
          weather: {
            command: process.execPath,
            args: ['--import', 'tsx', WEATHER_MAIN],
            env: { JMA_BASE_URL: base },
            response_instruction: 'Say which office issued the forecast.',
          },
          rest: {
            type: 'openapi',
            openapi_base_url: `${base}/api`,
            allow_private_network: true,
            openapi_spec: { openapi: '3.0.3', info: { title: 'r', version: '1' }, paths: { '/ping': { get: { operationId: 'ping', summary: 'Ping' } } } },
          },
        },
      },
    });
    const ready = t.nextEvent('device.ready', device.deviceId);
    await device.connectWebSocket(t.wsUrl);
    await Promise.all([ready, t.gw.hubStarted]);
  });
  afterAll(async () => {
    device.terminate();
    const pids = t.gw.hub.childPids();
    await t.close();
    for (const pid of pids) expect(isAlive(pid)).toBe(false);
    await new Promise((resolve) => upstream.close(resolve));
  });

  it('lists and calls tools of server-everything, the weather server, the OpenAPI server and the device', async () => {
    const client = new Client({ name: 'done-means', version: '1' });
    await client.connect(
      new StreamableHTTPClientTransport(new URL(`${t.baseUrl}/mcp`), { requestInit: { headers: { authorization: `Bearer ${TEST_API_KEY}` } } }),
    );
    try {
      const tools = (await client.listTools()).tools;
      const names = tools.map((x) => x.name);
      expect(names).toEqual(
        expect.arrayContaining(['mcp__everything__echo', 'mcp__weather__get_forecast', 'mcp__rest__ping', 'device__020000000301__self_get_device_status']),
      );
      expect(tools.find((x) => x.name === 'mcp__weather__get_forecast')!._meta).toEqual({
        'voxgate/responseInstruction': 'Say which office issued the forecast.',
      });

      const weather = (await client.callTool({ name: 'mcp__weather__get_forecast', arguments: { location: '東京' } })) as CallToolResult;
      expect(weather.isError ?? false).toBe(false);
      expect(text(weather)).toContain('気象庁');
      expect(text((await client.callTool({ name: 'mcp__everything__echo', arguments: { message: 'e' } })) as CallToolResult)).toContain('e');
      expect(text((await client.callTool({ name: 'mcp__rest__ping', arguments: {} })) as CallToolResult)).toBe('{"pong":true}');
      expect(text((await client.callTool({ name: 'device__020000000301__self_get_device_status', arguments: {} })) as CallToolResult)).toContain('battery');
    } finally {
      await client.close();
    }
  });
});
