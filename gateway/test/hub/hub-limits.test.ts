import type { CallToolResult } from '@modelcontextprotocol/client';
import { afterEach, describe, expect, it } from 'vitest';
import { metricValue } from '../../../test/support/device-parts.js';
import { FIXTURE_SERVER, nodeServer, untilHub } from '../../../test/support/hub.js';
import type { GatewayError } from '../../src/errors.js';
import type { McpHub } from '../../src/hub/hub.js';
import { buildHub } from './support.js';

/** Moved from e2e/hub-limits.test.ts: the hub built directly over the stdio fixture server. */
const text = (r: CallToolResult) => r.content.map((c) => (c.type === 'text' ? c.text : '')).join('');
let hubs: McpHub[] = [];
afterEach(async () => {
  await Promise.all(hubs.map((h) => h.close()));
  hubs = [];
});
const started = async (...args: Parameters<typeof buildHub>) => {
  const built = buildHub(...args);
  hubs.push(built.hub);
  await built.hub.start();
  return built;
};

describe('an oversized result from a stdio server', () => {
  it('is an isError result for that call only; the server stays up for every caller', async () => {
    const { hub, metrics } = await started(
      { fixture: nodeServer(FIXTURE_SERVER, { allowed_tools: ['big', 'echo', 'pid'] }) },
      { maxResultBytes: 64 * 1024, maxRestarts: 2 },
    );
    const pid = text(await hub.call('mcp__fixture__pid', {}, {}));
    // More oversized answers than maxRestarts: none of them may cost the server its connection.
    for (let i = 0; i < 4; i++) {
      const r = await hub.call('mcp__fixture__big', { bytes: 300_000 }, {});
      expect(r.isError).toBe(true);
      expect(text(r)).toMatch(/too large to pass on.*over the limit of 65536 bytes/);
    }
    const small = await hub.call('mcp__fixture__big', { bytes: 1000 }, {});
    expect(small.isError).toBeFalsy();
    expect(text(small)).toHaveLength(1000);
    expect(text(await hub.call('mcp__fixture__pid', {}, {}))).toBe(pid);
    const s = hub.servers({}).find((x) => x.name === 'fixture')!;
    expect(s.state).toBe('ready');
    expect(s.restarts).toBe(0);
    expect(await metricValue(metrics, 'voxgate_mcp_server_oversized_messages_total')).toBe(4);
  });
});

describe('arguments to a hosted server tool (issue 9 item 17)', () => {
  it('are checked against its inputSchema before the call: INVALID_ARGUMENTS naming the argument, not an error result from the server', async () => {
    const { hub, metrics } = await started({ fixture: nodeServer(FIXTURE_SERVER, { allowed_tools: ['echo', 'slow'] }) });
    const bad = (await hub.call('mcp__fixture__echo', { text: 42 }, {}).catch((e: unknown) => e)) as GatewayError;
    expect(bad.code).toBe('INVALID_ARGUMENTS');
    expect((bad.extra['errors'] as Array<{ argument: string }>)[0]!.argument).toBe('text');
    const missing = (await hub.call('mcp__fixture__slow', {}, {}).catch((e: unknown) => e)) as GatewayError;
    expect(missing.code).toBe('INVALID_ARGUMENTS');
    const ok = await hub.call('mcp__fixture__echo', { text: 'hi' }, {});
    expect(ok.isError).toBeFalsy();
    expect(text(ok)).toBe('hi');
    expect(await metricValue(metrics, 'voxgate_tool_calls_total', { kind: 'server', outcome: 'invalid_arguments' })).toBe(2);
  });
});

describe('a call to a restarting server', () => {
  it('answers the documented error result, not "no tool named"', async () => {
    // A long backoff keeps the server in "restarting" for the whole test.
    const { hub } = await started({ fixture: nodeServer(FIXTURE_SERVER, { allowed_tools: ['crash', 'echo'] }) }, { restartBaseDelayMs: 600_000 });
    const restarting = untilHub(hub, () => hub.servers({})[0]!.state === 'restarting', 'fixture restarting');
    await hub.call('mcp__fixture__crash', {}, {}).catch(() => undefined);
    await restarting;
    expect(hub.tools({}).some((x) => x.name === 'mcp__fixture__echo')).toBe(false);
    const r = await hub.call('mcp__fixture__echo', { text: 'x' }, {});
    expect(r.isError).toBe(true);
    expect(text(r)).toMatch(/The tool server "fixture" is not available right now \(restarting: connection lost/);
  });
});
