import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WebSocket } from 'ws';
import { startTestGateway, TEST_API_KEY, type TestGateway } from '../../../test/support/gateway-harness.js';
import { untilHub } from '../../../test/support/hub.js';

type Rpc = { jsonrpc: '2.0'; id?: number | string; method?: string; params?: Record<string, unknown> };

/** A tool process with one tool, `echo`, answering its call with the length of `text` (what it was sent, read whole). */
function toolProcess(url: string): Promise<WebSocket> {
  const ws = new WebSocket(url);
  const send = (msg: Record<string, unknown>) => ws.send(JSON.stringify(msg));
  ws.on('message', (data) => {
    const m = JSON.parse(data.toString()) as Rpc;
    if (m.id === undefined || !m.method) return;
    if (m.method === 'initialize') {
      const { protocolVersion } = m.params as { protocolVersion: string };
      return send({ jsonrpc: '2.0', id: m.id, result: { protocolVersion, capabilities: { tools: {} }, serverInfo: { name: 'tool', version: '1' } } });
    }
    if (m.method === 'tools/list') return send({ jsonrpc: '2.0', id: m.id, result: { tools: [{ name: 'echo', inputSchema: { type: 'object' } }] } });
    if (m.method === 'tools/call') {
      const text = String((m.params?.['arguments'] as { text?: string } | undefined)?.text ?? '');
      return send({ jsonrpc: '2.0', id: m.id, result: { content: [{ type: 'text', text: `read ${text.length}` }] } });
    }
    send({ jsonrpc: '2.0', id: m.id, result: {} });
  });
  return new Promise((resolve, reject) => {
    ws.once('open', () => resolve(ws));
    ws.once('error', reject);
  });
}

const MiB = 1024 * 1024;

/**
 * Tool processes that read nothing, together (red team 10's open item): each one is bounded on its own (2 × its frame
 * bound + 4 MiB), but 256 of them, the most the endpoint takes, held 256 times that: ~2 GiB at the default
 * mcp.maxResultBytes, for anyone with a few endpoint tokens. Here one tenant's three processes read nothing and send
 * `ping`s whose ids (~150 KB) every answer echoes, against a budget of 6 MiB for the gateway; another tenant's process
 * reads what it is sent.
 */
describe("MCP endpoint: one tenant's tool processes that read nothing, together", { timeout: 120_000 }, () => {
  const ACME_KEY = 'acme-key-0123456789abcdef';
  const GLOBEX_KEY = 'globex-key-0123456789abcdef';
  const budget = 6 * MiB;
  let t: TestGateway;
  beforeAll(async () => {
    t = await startTestGateway({
      apiKeys: [TEST_API_KEY, ACME_KEY, GLOBEX_KEY],
      apiKeyTenants: { [ACME_KEY]: 'acme', [GLOBEX_KEY]: 'globex' },
      // Frames up to ~192 KiB; each process on its own may leave ~4.4 MiB unread. Read as fast as they send.
      mcp: { maxResultBytes: 64 * 1024, unreadBudgetBytes: budget, endpoints: { readBytesPerSecond: 1024 * MiB } },
    });
  });
  afterAll(async () => {
    await t.close();
  });

  it("hold no more than mcp.unreadBudgetBytes; another tenant's process is served, and the flood gives way to it", async () => {
    const endpoint = async (name: string, apiKey: string) => (await t.api<{ url: string }>('POST', '/v1/mcp/endpoints', { name }, { apiKey })).body.url;
    const flooders = await Promise.all([0, 1, 2].map(async (i) => toolProcess(await endpoint(`flood${i}`, ACME_KEY))));
    const calm = await toolProcess(await endpoint('calm', GLOBEX_KEY));
    const hub = t.gw.hub;
    const names = ['acme/flood0', 'acme/flood1', 'acme/flood2', 'globex/calm'];
    await untilHub(hub, () => names.every((n) => hub.upstreams.get(n)?.state === 'ready'), 'every process');
    const outcome = async (o: string) => (await t.gw.metrics.hubUnreadFull.get()).values.find((v) => v.labels['outcome'] === o)?.value ?? 0;

    // They read nothing more (their TCP windows close) and ask, in turn, for answers of ~150 KB each.
    for (const ws of flooders) ws.pause();
    const id = 'x'.repeat(150_000);
    for (let i = 0; i < 1200 && (await outcome('refused')) === 0; i++) {
      const ws = flooders[i % flooders.length]!;
      if (ws.readyState !== WebSocket.OPEN) continue;
      await new Promise<void>((resolve) => ws.send(JSON.stringify({ jsonrpc: '2.0', id: `${id}${i}`, method: 'ping' }), () => resolve()));
    }
    // Before: no total (no such metric); the three held what each may, and 256 such held ~2 GiB.
    await expect.poll(() => outcome('refused'), { timeout: 60_000 }).toBeGreaterThan(0);
    expect(t.logs.some((l) => String(l['msg']).startsWith('MCP unread budget full') && l['tenant'] === 'acme')).toBe(true);

    // Globex's call (~400 KB of arguments, more than the budget has left) goes: acme holds the most, and gives way.
    const text = 'y'.repeat(400_000);
    const r = await t.api<{ content: Array<{ text: string }>; isError?: boolean }>(
      'POST',
      '/v1/tools/mcp__calm__echo/call',
      { arguments: { text } },
      { apiKey: GLOBEX_KEY },
    );
    expect(r.body.isError).toBeFalsy();
    expect(r.body.content[0]!.text).toBe('read 400000');
    expect(await outcome('cut')).toBeGreaterThanOrEqual(1);
    // The one cut is gone from the hub (its socket reset: the paused process itself reads nothing of it).
    await untilHub(hub, () => names.slice(0, 3).some((n) => hub.upstreams.get(n)?.state !== 'ready'), 'an acme process to be cut');

    const peak = (await t.gw.metrics.hubUnreadPeak.get()).values[0]!.value;
    expect(peak).toBeLessThanOrEqual(budget);
    expect(peak).toBeGreaterThan(budget - 200_000);
    expect(await t.metric('voxgate_mcp_unread_bytes')).toBeLessThanOrEqual(budget);
    for (const ws of flooders) ws.terminate();
    calm.close();
  });
});
