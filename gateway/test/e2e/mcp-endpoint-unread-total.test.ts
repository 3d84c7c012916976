import { connect as connectTcp, type Socket } from 'node:net';
import { Client, StreamableHTTPClientTransport, type CallToolResult } from '@modelcontextprotocol/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestGateway, TEST_API_KEY, type TestGateway } from '../../../test/support/gateway-harness.js';
import { FIXTURE_SERVER, nodeServer } from '../../../test/support/hub.js';

const MiB = 1024 * 1024;
const ACME_KEY = 'acme-key-0123456789abcdef';
const GLOBEX_KEY = 'globex-key-0123456789abcdef';

/** A session opened by hand (initialize over fetch): its id. */
async function rawSession(baseUrl: string, key: string): Promise<string> {
  const res = await fetch(`${baseUrl}/mcp`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
    body: JSON.stringify({
      jsonrpc: '2.0',
      id: 1,
      method: 'initialize',
      params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'stalled', version: '0.0.0' } },
    }),
  });
  await res.text();
  expect(res.status).toBe(200);
  return res.headers.get('mcp-session-id')!;
}

/**
 * A client that asks its session for an answer of `idBytes` (a `ping` whose id the answer echoes) on a raw socket and
 * reads none of it: resolves once the gateway has started answering (the first bytes arrived, not consumed), or cut it.
 */
async function stalledPing(port: number, key: string, sid: string, idBytes: number, sockets: Socket[]): Promise<'answering' | 'cut'> {
  const body = JSON.stringify({ jsonrpc: '2.0', id: `${sid}-${'x'.repeat(idBytes)}`, method: 'ping' });
  const socket = connectTcp(port, '127.0.0.1');
  sockets.push(socket);
  socket.on('error', () => undefined);
  socket.pause();
  socket.write(
    'POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: application/json, text/event-stream\r\nContent-Type: application/json\r\n' +
      `Authorization: Bearer ${key}\r\nMcp-Session-Id: ${sid}\r\nMcp-Protocol-Version: 2025-11-25\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
  );
  return new Promise((resolve) => {
    // 'readable' comes at the end of the stream too: a cut before any byte was written is no answer.
    socket.once('readable', () => resolve(socket.readableLength > 0 ? 'answering' : 'cut'));
    socket.once('close', () => resolve('cut'));
  });
}

/**
 * MCP clients that open sessions and stop reading, together (red team 11): each /mcp stream is cut at 1 MiB unread on
 * its own, but a plain JSON answer goes whole, and up to maxSessions (1000) streams could each hold their bound: ~1 GiB.
 * Here one tenant's sessions ask for answers of ~5 MB each (a `ping` echoing its id) and read none of them, against a
 * budget of 16 MiB for all of /mcp; another tenant's SDK client reads what it is sent, and is answered throughout.
 */
describe("/mcp: one tenant's sessions that read nothing, together", { timeout: 180_000 }, () => {
  const budget = 16 * MiB;
  let t: TestGateway;
  const sockets: Socket[] = [];
  beforeAll(async () => {
    t = await startTestGateway({
      apiKeys: [TEST_API_KEY, ACME_KEY, GLOBEX_KEY],
      apiKeyTenants: { [ACME_KEY]: 'acme', [GLOBEX_KEY]: 'globex' },
      http: { bodyLimitBytes: 8 * MiB },
      mcp: {
        maxResultBytes: 8 * MiB,
        servers: { fixture: nodeServer(FIXTURE_SERVER, { allowed_tools: ['echo'] }) },
        endpoint: { unreadBudgetBytes: budget },
      },
    });
    await t.gw.hubStarted;
  });
  afterAll(async () => {
    for (const s of sockets) s.destroy();
    await t.close();
  });

  it("hold no more than mcp.endpoint.unreadBudgetBytes; another tenant's client is answered, and the flood gives way to it", async () => {
    const outcome = (o: string) => t.metric('voxgate_mcp_endpoint_unread_budget_full_total', { outcome: o });
    const client = new Client({ name: 'calm', version: '1.0.0' });
    await client.connect(
      new StreamableHTTPClientTransport(new URL(`${t.baseUrl}/mcp`), { requestInit: { headers: { authorization: `Bearer ${GLOBEX_KEY}` } } }),
    );
    const echo = async (text: string) => {
      const r = (await client.callTool({ name: 'mcp__fixture__echo', arguments: { text } })) as CallToolResult;
      expect(r.isError ?? false).toBe(false);
      return (r.content[0] as { text: string }).text;
    };
    expect(await echo('hello')).toBe('hello');

    // Acme's sessions, one after another, each asking for ~5 MB it never reads (far past what the kernel's buffers
    // take for a reader that reads nothing), until the budget is full and acme's own answers are cut.
    const port = Number(new URL(t.baseUrl).port);
    const outcomes: string[] = [];
    for (let i = 0; i < 12 && (await outcome('refused')) === 0; i++) {
      const sid = await rawSession(t.baseUrl, ACME_KEY);
      outcomes.push(await stalledPing(port, ACME_KEY, sid, 5_000_000, sockets));
      // Meanwhile the calm client's calls are answered.
      expect(await echo(`call ${i}`)).toBe(`call ${i}`);
      expect(await t.metric('voxgate_mcp_endpoint_unread_bytes')).toBeLessThanOrEqual(budget);
    }
    // Before: no total (no such metric); the 12 held ~60 MB, and 1000 sessions ~1 GiB at their own bounds or more.
    expect(await outcome('refused')).toBeGreaterThan(0);
    expect(outcomes.filter((o) => o === 'answering').length).toBeGreaterThanOrEqual(2);
    expect(outcomes.at(-1)).toBe('cut');
    expect(t.logs.some((l) => String(l['msg']).startsWith('MCP endpoint unread budget full') && l['tenant'] === 'acme')).toBe(true);
    const held = await t.metric('voxgate_mcp_endpoint_unread_bytes');
    expect(held).toBeGreaterThan(budget - 5_100_000);
    expect(held).toBeLessThanOrEqual(budget);

    // Globex's answer of 4 MB does not fit beside acme's: acme holds the most, and one of its answers is cut for it.
    const big = 'y'.repeat(4_000_000);
    expect((await echo(big)).length).toBe(big.length);
    expect(await outcome('cut')).toBeGreaterThanOrEqual(1);
    expect(await client.ping()).toEqual({});

    expect(await t.metric('voxgate_mcp_endpoint_unread_bytes_peak')).toBeLessThanOrEqual(budget);
    // The hub's own total is apart: no hosted server was touched.
    expect(await t.metric('voxgate_mcp_unread_budget_full_total')).toBe(0);
    for (const s of sockets.splice(0)) s.destroy();
    await expect.poll(() => t.metric('voxgate_mcp_endpoint_unread_bytes'), { timeout: 30_000 }).toBe(0);
    await client.close();
  });
});
