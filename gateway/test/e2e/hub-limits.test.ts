import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BoundedLineReader, idOfTruncated } from '../../src/hub/line-reader.js';
import { startTestGateway, type TestGateway } from '../../../test/support/gateway-harness.js';
import { FIXTURE_SERVER, nodeServer, untilHub } from '../../../test/support/hub.js';

interface CallBody {
  content: Array<{ type: string; text?: string }>;
  isError: boolean;
}
const text = (b: CallBody) => b.content.map((c) => c.text ?? '').join('');

describe('an oversized result from a stdio server', () => {
  let t: TestGateway;
  beforeAll(async () => {
    t = await startTestGateway({
      mcp: { maxResultBytes: 64 * 1024, maxRestarts: 2, servers: { fixture: nodeServer(FIXTURE_SERVER, { allowed_tools: ['big', 'echo', 'pid'] }) } },
    });
    await t.gw.hubStarted;
  });
  afterAll(() => t.close());

  it('is an isError result for that call only; the server stays up for every caller', async () => {
    const pid = text((await t.api<CallBody>('POST', '/v1/tools/mcp__fixture__pid/call', { arguments: {} })).body);
    // More oversized answers than maxRestarts: none of them may cost the server its connection.
    for (let i = 0; i < 4; i++) {
      const r = await t.api<CallBody>('POST', '/v1/tools/mcp__fixture__big/call', { arguments: { bytes: 300_000 } });
      expect(r.status).toBe(200);
      expect(r.body.isError).toBe(true);
      expect(text(r.body)).toMatch(/too large to pass on.*over the limit of 65536 bytes/);
    }
    const small = await t.api<CallBody>('POST', '/v1/tools/mcp__fixture__big/call', { arguments: { bytes: 1000 } });
    expect(small.body.isError).toBe(false);
    expect(text(small.body)).toHaveLength(1000);
    expect(text((await t.api<CallBody>('POST', '/v1/tools/mcp__fixture__pid/call', { arguments: {} })).body)).toBe(pid);
    const s = t.gw.hub.servers({}).find((x) => x.name === 'fixture')!;
    expect(s.state).toBe('ready');
    expect(s.restarts).toBe(0);
    expect(await t.metric('voxgate_mcp_server_oversized_messages_total')).toBe(4);
  });
});

describe('arguments to a hosted server tool (issue 9 item 17)', () => {
  it('are checked against its inputSchema before the call: 422 naming the argument, not an error result from the server', async () => {
    const t = await startTestGateway({ mcp: { servers: { fixture: nodeServer(FIXTURE_SERVER, { allowed_tools: ['echo', 'slow'] }) } } });
    try {
      await t.gw.hubStarted;
      const bad = await t.api<{ code: string; detail: string; errors: Array<{ argument: string }> }>('POST', '/v1/tools/mcp__fixture__echo/call', {
        arguments: { text: 42 },
      });
      expect(bad.status).toBe(422);
      expect(bad.body.code).toBe('INVALID_ARGUMENTS');
      expect(bad.body.errors[0]!.argument).toBe('text');
      const missing = await t.api<{ code: string }>('POST', '/v1/tools/mcp__fixture__slow/call', { arguments: {} });
      expect(missing.status).toBe(422);
      const ok = await t.api<CallBody>('POST', '/v1/tools/mcp__fixture__echo/call', { arguments: { text: 'hi' } });
      expect(ok.status).toBe(200);
      expect(text(ok.body)).toBe('hi');
      expect(await t.metric('voxgate_tool_calls_total', { kind: 'server', outcome: 'invalid_arguments' })).toBe(2);
    } finally {
      await t.close();
    }
  });
});

describe('a call to a restarting server', () => {
  it('answers the documented error result, not "no tool named"', async () => {
    // A long backoff keeps the server in "restarting" for the whole test.
    const t = await startTestGateway({
      mcp: { restartBaseDelayMs: 600_000, servers: { fixture: nodeServer(FIXTURE_SERVER, { allowed_tools: ['crash', 'echo'] }) } },
    });
    try {
      await t.gw.hubStarted;
      const restarting = untilHub(t.gw.hub, () => t.gw.hub.servers({})[0]!.state === 'restarting', 'fixture restarting');
      await t.api('POST', '/v1/tools/mcp__fixture__crash/call', {});
      await restarting;
      expect(t.gw.hub.tools({}).some((x) => x.name === 'mcp__fixture__echo')).toBe(false);
      const r = await t.api<CallBody>('POST', '/v1/tools/mcp__fixture__echo/call', { arguments: { text: 'x' } });
      expect(r.status).toBe(200);
      expect(r.body.isError).toBe(true);
      expect(text(r.body)).toMatch(/The tool server "fixture" is not available right now \(restarting: connection lost/);
    } finally {
      await t.close();
    }
  });
});

describe('BoundedLineReader', () => {
  it('skips an over-long line up to its newline and keeps reading the next ones', () => {
    const r = new BoundedLineReader(16);
    const out = [
      ...r.push(Buffer.from('{"a":1}\n{"jsonrpc":"2.0","id":7,"result":"')),
      ...r.push(Buffer.from('y'.repeat(100))),
      ...r.push(Buffer.from('"}\n{"b":2}\r\n{"c"')),
    ];
    expect(out[0]).toEqual({ kind: 'line', text: '{"a":1}' });
    expect(out[1]).toMatchObject({ kind: 'oversized', bytes: 136 });
    expect(out[2]).toEqual({ kind: 'line', text: '{"b":2}' });
    expect(out).toHaveLength(3);
    expect(r.push(Buffer.from(':3}\n'))).toEqual([{ kind: 'line', text: '{"c":3}' }]);
  });

  it('finds the id at the start (jsonrpc, id first) or at the end (the TypeScript SDK order)', () => {
    expect(idOfTruncated('{"jsonrpc":"2.0","id":7,"result":{"content"', 'xx"}]}}')).toBe(7);
    expect(idOfTruncated('{"result":{"content":[{"type":"text","text":"', 'xxx"}]},"jsonrpc":"2.0","id":"a-1"}')).toBe('a-1');
    // an "id" inside the result is not the message's id
    expect(idOfTruncated('{"result":{"content":[{"type":"text","text":"', '"id":3}}')).toBeUndefined();
  });
});
