import { Client, StreamableHTTPClientTransport, type CallToolResult } from '@modelcontextprotocol/client';
import { describe, expect, it } from 'vitest';
import { startTestGateway, TEST_API_KEY } from '../../../test/support/gateway-harness.js';
import { FIXTURE_SERVER, nodeServer } from '../../../test/support/hub.js';

const text = (r: { content: Array<{ type: string; text?: string }> }) => r.content.map((c) => c.text ?? '').join('');

describe('shutdown answers calls in flight to hosted servers', () => {
  it('an HTTP caller and an /mcp caller each get a SHUTTING_DOWN result, not a reset connection', async () => {
    const t = await startTestGateway({ mcp: { killGraceMs: 1000, servers: { fixture: nodeServer(FIXTURE_SERVER, { allowed_tools: ['slow'] }) } } });
    await t.gw.hubStarted;
    const client = new Client({ name: 'shutdown-test', version: '1.0.0' });
    await client.connect(
      new StreamableHTTPClientTransport(new URL(`${t.baseUrl}/mcp`), { requestInit: { headers: { authorization: `Bearer ${TEST_API_KEY}` } } }),
    );
    const started = () => t.logs.filter((l) => typeof l['stderr'] === 'string' && (l['stderr'] as string).includes('slow started')).length;

    const viaHttp = t.api<{ content: Array<{ type: string; text?: string }>; isError: boolean }>('POST', '/v1/tools/mcp__fixture__slow/call', {
      arguments: { ms: 600_000 },
    });
    const viaMcp = client.callTool({ name: 'mcp__fixture__slow', arguments: { ms: 600_000 } }) as Promise<CallToolResult>;
    // Both calls have reached the server (it writes a stderr line per call, which the hub logs).
    await expect.poll(started, { timeout: 15_000 }).toBe(2);

    const closed = t.close();
    const [http, mcp] = await Promise.all([viaHttp, viaMcp]);
    await closed;

    expect(http.status).toBe(200);
    expect(http.body.isError).toBe(true);
    expect(text(http.body)).toMatch(/shutting down/);
    expect(mcp.isError).toBe(true);
    expect(text(mcp)).toMatch(/shutting down/);
    expect(mcp._meta?.['voxgate/code']).toBe('SHUTTING_DOWN');
    await client.close().catch(() => undefined);
  });
});
