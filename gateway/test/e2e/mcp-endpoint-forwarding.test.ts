import { Client, StreamableHTTPClientTransport, type CallToolResult } from '@modelcontextprotocol/client';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startTestGateway, TEST_API_KEY, type TestGateway } from '../../../test/support/gateway-harness.js';
import { FIXTURE_SERVER, nodeServer } from '../../../test/support/hub.js';

const text = (r: CallToolResult) => r.content.map((c) => (c.type === 'text' ? c.text : '')).join('');

describe('/mcp forwards what passes between a host and a hosted server', () => {
  let t: TestGateway;
  const clients: Client[] = [];
  const connect = async () => {
    const client = new Client({ name: 'forwarding-test', version: '1.0.0' });
    await client.connect(
      new StreamableHTTPClientTransport(new URL(`${t.baseUrl}/mcp`), { requestInit: { headers: { authorization: `Bearer ${TEST_API_KEY}` } } }),
    );
    clients.push(client);
    return client;
  };
  const stderrLines = (needle: string) => t.logs.filter((l) => typeof l['stderr'] === 'string' && (l['stderr'] as string).includes(needle)).length;

  beforeAll(async () => {
    t = await startTestGateway({ mcp: { servers: { fixture: nodeServer(FIXTURE_SERVER) } } });
    await t.gw.hubStarted;
  });
  afterEach(async () => {
    for (const c of clients.splice(0)) await c.close().catch(() => undefined);
  });
  afterAll(() => t.close());

  it('notifications/progress from the upstream reach the caller, under its own progress token', async () => {
    const a = await connect();
    const b = await connect();
    const gotA: Array<{ progress: number; total?: number; message?: string }> = [];
    const gotB: unknown[] = [];
    const [ra, rb] = await Promise.all([
      a.callTool({ name: 'mcp__fixture__progress', arguments: { steps: 4 } }, { onprogress: (p) => gotA.push(p) }) as Promise<CallToolResult>,
      b.callTool({ name: 'mcp__fixture__progress', arguments: { steps: 2 } }, { onprogress: (p) => gotB.push(p) }) as Promise<CallToolResult>,
    ]);
    expect(text(ra)).toBe('did 4 steps');
    expect(text(rb)).toBe('did 2 steps');
    expect(gotA).toEqual([1, 2, 3, 4].map((i) => ({ progress: i, total: 4, message: `step ${i}` })));
    // each caller sees only its own call's progress
    expect(gotB).toHaveLength(2);
  });

  it('a caller that cancels its call has the upstream call cancelled too', async () => {
    const client = await connect();
    const abort = new AbortController();
    const call = client.callTool({ name: 'mcp__fixture__wait_cancel', arguments: {} }, { signal: abort.signal });
    await expect.poll(() => stderrLines('wait_cancel started'), { timeout: 15_000 }).toBe(1);
    abort.abort('the user pressed stop');
    await expect(call).rejects.toThrow();
    await expect.poll(() => stderrLines('wait_cancel was cancelled'), { timeout: 15_000 }).toBe(1);
  });
});
