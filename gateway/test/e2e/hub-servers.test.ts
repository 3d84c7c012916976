import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestGateway, type TestGateway } from '../../../test/support/gateway-harness.js';
import { EVERYTHING_BIN, FIXTURE_SERVER, isAlive, nodeServer, untilHub } from '../../../test/support/hub.js';

interface ToolsBody {
  tools: Array<{ name: string; description: string; source: Record<string, unknown>; responseInstruction?: string; autoContext?: boolean }>;
}
interface CallBody {
  content: Array<{ type: string; text?: string }>;
  isError: boolean;
  structuredContent?: Record<string, unknown>;
}
interface ServersBody {
  enabled: boolean;
  servers: Array<{ name: string; state: string; lastError: string | null; tools: string[]; restarts: number; pid: number | null }>;
}
const text = (b: CallBody) => b.content.map((c) => c.text ?? '').join('');

describe('MCP hub: stdio servers, built-in tools, failures and shutdown', () => {
  let t: TestGateway;
  const server = (name: string) => t.gw.hub.servers({}).find((s) => s.name === name)!;

  beforeAll(async () => {
    t = await startTestGateway({
      mcp: {
        killGraceMs: 1000,
        restartBaseDelayMs: 10,
        // Each crash and restart told at once: the down state lasts ~10 ms, and a change merged into the window's
        // last would only ever tell "ready" again (the window itself: mcp-ws-endpoint-hostile.test.ts).
        changeWindowMs: 0,
        maxRestarts: 2,
        servers: {
          everything: { command: process.execPath, args: [EVERYTHING_BIN, 'stdio'] },
          fixture: nodeServer(FIXTURE_SERVER, {
            allowed_tools: ['echo', 'crash', 'pid', 'slow', 'spawn_grandchild', 'add_tool', 'late_tool'],
            system_instruction: 'Use the fixture for echo tests.',
            response_instruction: 'Quote the fixture verbatim.',
            auto_context_tool: 'pid',
          }),
          slowfix: nodeServer(FIXTURE_SERVER, { timeout_ms: 200, allowed_tools: ['slow'] }),
          broken: nodeServer(FIXTURE_SERVER, { env: { FAIL_AT_START: '1' } }),
          missing: { command: '/nonexistent/voxgate-no-such-server' },
          utils: { type: 'builtin', tools: ['current_time', 'calculator'] },
        },
      },
    });
    await t.gw.hubStarted;
  });
  afterAll(() => t.close());

  it('connects every server in parallel, skips the broken ones, and reports state and last error', async () => {
    const r = await t.api<ServersBody>('GET', '/v1/mcp/servers');
    expect(r.status).toBe(200);
    expect(r.body.enabled).toBe(true);
    const by = Object.fromEntries(r.body.servers.map((s) => [s.name, s]));
    expect(by['everything']!.state).toBe('ready');
    expect(by['fixture']!.state).toBe('ready');
    expect(by['utils']!.state).toBe('ready');
    expect(by['broken']!.state).toBe('failed');
    expect(by['broken']!.lastError).toMatch(/closed|fail/i);
    expect(by['missing']!.state).toBe('failed');
    expect(by['missing']!.lastError).toMatch(/ENOENT|not found/);
    expect(await t.metric('voxgate_mcp_server_connects_total', { outcome: 'failed' })).toBe(2);
    expect(t.logs.some((l) => l['server'] === 'broken' && String(l['msg']).includes('skipped'))).toBe(true);
  });

  it('lists every server tool under mcp__{server}__{tool}, filtered by allowed_tools, with instructions', async () => {
    const r = await t.api<ToolsBody>('GET', '/v1/tools');
    const names = r.body.tools.map((x) => x.name);
    expect(names).toContain('mcp__everything__echo');
    expect(names).toContain('mcp__everything__get-sum');
    expect(names).toContain('mcp__fixture__echo');
    expect(names).not.toContain('mcp__fixture__secret_tool');
    expect(names).toEqual(expect.arrayContaining(['mcp__utils__current_time', 'mcp__utils__calculator', 'devices_list', 'device_call']));
    for (const n of names) expect(n).toMatch(/^[a-zA-Z0-9_-]{1,64}$/);
    const echo = r.body.tools.find((x) => x.name === 'mcp__fixture__echo')!;
    expect(echo.source).toEqual({ kind: 'server', server: 'fixture', tool: 'echo' });
    expect(echo.responseInstruction).toBe('Quote the fixture verbatim.');
    expect(r.body.tools.find((x) => x.name === 'mcp__fixture__pid')!.autoContext).toBe(true);

    const ins = await t.api<{ system: unknown[]; responseInstructions: Record<string, string>; autoContextTools: string[] }>('GET', '/v1/mcp/instructions');
    expect(ins.body.system).toEqual([{ server: 'fixture', instruction: 'Use the fixture for echo tests.' }]);
    expect(ins.body.responseInstructions['mcp__fixture__echo']).toBe('Quote the fixture verbatim.');
    expect(ins.body.autoContextTools).toEqual(['mcp__fixture__pid']);
  });

  it('calls upstream tools over stdio', async () => {
    const echo = await t.api<CallBody>('POST', '/v1/tools/mcp__everything__echo/call', { arguments: { message: 'hello hub' } });
    expect(echo.status).toBe(200);
    expect(echo.body.isError).toBe(false);
    expect(text(echo.body)).toContain('hello hub');
    const sum = await t.api<CallBody>('POST', '/v1/tools/mcp__everything__get-sum/call', { arguments: { a: 2, b: 40 } });
    expect(text(sum.body)).toContain('42');
    const fx = await t.api<CallBody>('POST', '/v1/tools/mcp__fixture__echo/call', { arguments: { text: 'fixture says hi' } });
    expect(text(fx.body)).toBe('fixture says hi');
    expect(await t.metric('voxgate_tool_calls_total', { kind: 'server', outcome: 'ok' })).toBeGreaterThanOrEqual(3);
  });

  it('refuses unknown tools, tools hidden by allowed_tools, and malformed requests with stable codes', async () => {
    const unknown = await t.api<{ code: string }>('POST', '/v1/tools/mcp__everything__nope/call', {});
    expect(unknown.status).toBe(404);
    expect(unknown.body.code).toBe('TOOL_NOT_FOUND');
    const hidden = await t.api<{ code: string }>('POST', '/v1/tools/mcp__fixture__secret_tool/call', {});
    expect(hidden.body.code).toBe('TOOL_NOT_FOUND');
    const bad = await t.api<{ code: string }>('POST', '/v1/tools/mcp__fixture__echo/call', { arguments: 'nope' });
    expect(bad.status).toBe(400);
    expect(bad.body.code).toBe('INVALID_REQUEST');
    const noKey = await t.api<{ code: string }>('GET', '/v1/tools', undefined, { apiKey: null });
    expect(noKey.status).toBe(401);
  });

  it('runs the built-in tools: time with a time zone, a calculator without eval', async () => {
    const now = await t.api<CallBody>('POST', '/v1/tools/mcp__utils__current_time/call', { arguments: { timezone: 'Asia/Tokyo' } });
    expect(now.body.isError).toBe(false);
    expect(now.body.structuredContent).toMatchObject({ timezone: 'Asia/Tokyo', utcOffset: '+09:00' });
    expect(String(now.body.structuredContent!['local'])).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\+09:00$/);
    const badTz = await t.api<CallBody>('POST', '/v1/tools/mcp__utils__current_time/call', { arguments: { timezone: 'Mars/Olympus' } });
    expect(badTz.body.isError).toBe(true);
    const calc = await t.api<CallBody>('POST', '/v1/tools/mcp__utils__calculator/call', { arguments: { expression: '(2 + 3) * 4 ^ 2 - sqrt(16) / 2' } });
    expect(calc.body.structuredContent).toMatchObject({ value: 78 });
    for (const expression of ['process.exit(1)', 'constructor', '1/0', '2 +', '__proto__']) {
      const r = await t.api<CallBody>('POST', '/v1/tools/mcp__utils__calculator/call', { arguments: { expression } });
      expect(r.body.isError, expression).toBe(true);
    }
  });

  it('turns a timeout into a tool result with isError and a sentence to relay', async () => {
    const r = await t.api<CallBody>('POST', '/v1/tools/mcp__slowfix__slow/call', { arguments: { ms: 5000 } });
    expect(r.status).toBe(200);
    expect(r.body.isError).toBe(true);
    expect(text(r.body)).toMatch(/did not answer within/);
  });

  it('forwards an upstream tools/list_changed into the namespace', async () => {
    const r = await t.api<CallBody>('POST', '/v1/tools/mcp__fixture__add_tool/call', { arguments: { name: 'late_tool' } });
    expect(r.body.isError).toBe(false);
    await untilHub(t.gw.hub, () => t.gw.hub.tools({}).some((x) => x.name === 'mcp__fixture__late_tool'), 'late_tool to appear');
    const late = await t.api<CallBody>('POST', '/v1/tools/mcp__fixture__late_tool/call', {});
    expect(text(late.body)).toBe('late_tool');
  });

  it('restarts a stdio server that crashes, with backoff, and it serves again', async () => {
    const before = server('fixture').pid!;
    expect(isAlive(before)).toBe(true);
    const restarted = untilHub(t.gw.hub, () => server('fixture').state === 'ready' && server('fixture').pid !== before, 'fixture to restart');
    const r = await t.api<CallBody>('POST', '/v1/tools/mcp__fixture__crash/call', {});
    expect(r.status).toBe(200);
    await restarted;
    expect(server('fixture').restarts).toBe(1);
    const after = await t.api<CallBody>('POST', '/v1/tools/mcp__fixture__pid/call', {});
    expect(Number(text(after.body))).toBe(server('fixture').pid);
    expect(t.logs.some((l) => l['server'] === 'fixture' && String(l['msg']).includes('connection lost'))).toBe(true);
  });

  it('while a server is down, its tools leave the list (calls: see ../hub/hub-limits.test.ts)', async () => {
    const goneOrRestarting = untilHub(t.gw.hub, () => server('fixture').state !== 'ready', 'fixture to go down');
    await t.api('POST', '/v1/tools/mcp__fixture__crash/call', {});
    await goneOrRestarting;
    expect(t.gw.hub.tools({}).some((x) => x.name === 'mcp__fixture__echo')).toBe(false);
    await untilHub(t.gw.hub, () => server('fixture').state === 'ready', 'fixture back');
  });

  it('gives up after the restart limit', async () => {
    // maxRestarts is 2 and two crashes happened already: the third is final.
    const failed = untilHub(t.gw.hub, () => server('fixture').state === 'failed', 'fixture to give up');
    await t.api('POST', '/v1/tools/mcp__fixture__crash/call', {});
    await failed;
    expect(server('fixture').lastError).toMatch(/gave up after 2 restarts/);
    // Its names still resolve: a call is the documented error result, not "no tool named".
    const r = await t.api<CallBody>('POST', '/v1/tools/mcp__fixture__echo/call', { arguments: { text: 'x' } });
    expect(r.status).toBe(200);
    expect(r.body.isError).toBe(true);
    expect(text(r.body)).toMatch(/The tool server "fixture" is not available right now \(failed: .*gave up/);
  });
});

describe('MCP hub shutdown', () => {
  it('ends every child and grandchild (TERM, then KILL after the grace period): no orphan', async () => {
    const t = await startTestGateway({
      mcp: { killGraceMs: 1000, servers: { a: nodeServer(FIXTURE_SERVER), b: { command: process.execPath, args: [EVERYTHING_BIN] } } },
    });
    await t.gw.hubStarted;
    const pids = t.gw.hub.childPids();
    expect(pids).toHaveLength(2);
    const g = await t.api<CallBody>('POST', '/v1/tools/mcp__a__spawn_grandchild/call', {});
    const grandchild = Number(text(g.body));
    for (const pid of [...pids, grandchild]) expect(isAlive(pid), `pid ${pid} before close`).toBe(true);
    await t.close();
    for (const pid of [...pids, grandchild]) expect(isAlive(pid), `pid ${pid} after close`).toBe(false);
  });

  it('with MCP_ENABLED=false no server starts; device tools still work', async () => {
    const t = await startTestGateway({ mcp: { servers: { a: nodeServer(FIXTURE_SERVER) } } }, { MCP_ENABLED: 'false' });
    try {
      await t.gw.hubStarted;
      expect(t.gw.hub.childPids()).toEqual([]);
      const r = await t.api<ServersBody>('GET', '/v1/mcp/servers');
      expect(r.body).toEqual({ enabled: false, servers: [] });
      const tools = await t.api<ToolsBody>('GET', '/v1/tools');
      expect(tools.body.tools.map((x) => x.name)).toEqual(['devices_list', 'device_call']);
    } finally {
      await t.close();
    }
  });
});
