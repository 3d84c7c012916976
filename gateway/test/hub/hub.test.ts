import { fileURLToPath } from 'node:url';
import type { CallToolResult } from '@modelcontextprotocol/client';
import { ProtocolErrorCode } from '@modelcontextprotocol/client';
import { afterEach, describe, expect, it } from 'vitest';
import { isAlive, untilHub } from '../../../test/support/hub.js';
import type { McpHub } from '../../src/hub/hub.js';
import { buildHub, facadeClient } from './support.js';

const SHAPES = fileURLToPath(new URL('./fixtures/shapes-server.mjs', import.meta.url));
const SILENT = fileURLToPath(new URL('./fixtures/silent-server.mjs', import.meta.url));
const node = (file: string) => ({ command: process.execPath, args: [file] });
const text = (r: CallToolResult) => r.content.map((c) => (c.type === 'text' ? c.text : '')).join('');

// Child processes on a loaded machine: only the test's own timeout bounds them (events, never sleeps).
const PROCESS_TEST_MS = 60_000;
let hubs: McpHub[] = [];
afterEach(async () => {
  await Promise.all(hubs.map((h) => h.close()));
  hubs = [];
}, PROCESS_TEST_MS);

describe('McpHub, built directly', { timeout: PROCESS_TEST_MS }, () => {
  it('passes every field of a hosted tool definition through to /mcp (issue 24 item 16)', async () => {
    const { hub } = buildHub({ shapes: node(SHAPES) });
    hubs.push(hub);
    await hub.start();
    const client = await facadeClient(hub, {});
    const rich = (await client.listTools()).tools.find((t) => t.name === 'mcp__shapes__rich')!;
    expect(rich).toMatchObject({
      title: 'A rich tool',
      execution: { taskSupport: 'optional' },
      icons: [{ src: 'https://example.com/icon.png', mimeType: 'image/png', sizes: ['48x48'] }],
      annotations: { readOnlyHint: true, title: 'Rich' },
      outputSchema: { type: 'object', properties: { ok: { type: 'boolean' } } },
    });
    expect(rich._meta).toEqual({ 'example/flag': 'kept' });
    await client.close();
  });

  it('answers an invalid tools/list cursor with -32602, not the whole list (issue 24 item 18)', async () => {
    const { hub } = buildHub({});
    hubs.push(hub);
    const client = await facadeClient(hub, {});
    await expect(client.listTools({ cursor: 'not-a-cursor' })).rejects.toMatchObject({ code: ProtocolErrorCode.InvalidParams });
    expect((await client.listTools()).tools.length).toBe(0);
    await client.close();
  });

  it('counts a result repeated in structuredContent once against mcp.maxResultBytes, and names the large part (issue 24 item 17)', async () => {
    const { hub, metrics } = buildHub({ shapes: node(SHAPES) }, { maxResultBytes: 1024 * 1024 });
    hubs.push(hub);
    await hub.start();
    // 900 KB as text and again as structuredContent: about 1.8 MB on the wire, one 900 KB result.
    const ok = await hub.call('mcp__shapes__read_file', { bytes: 900_000 }, {});
    expect(ok.isError).toBeFalsy();
    expect(text(ok)).toHaveLength(900_000);
    const big = await hub.call('mcp__shapes__read_file', { bytes: 1_050_000 }, {});
    expect(big.isError).toBe(true);
    expect(text(big)).toMatch(/too large to pass on: its (structuredContent|content) was \d+ bytes, over the limit of 1048576 bytes \(mcp\.maxResultBytes\)/);
    expect(big._meta).toEqual({ 'voxgate/code': 'UPSTREAM_ERROR' });
    expect(hub.servers({})[0]!.state).toBe('ready');
    expect(await metrics.registry.getSingleMetricAsString('voxgate_mcp_server_oversized_messages_total')).toMatch(/_total 1$/m);
  });

  it('closes at once a stdio server that never answers initialize and ignores EOF and SIGTERM (issue 20 item 8)', async () => {
    const { hub, untilLog } = buildHub({ silent: node(SILENT) }, { connectTimeoutMs: 600_000, killGraceMs: 200 });
    hubs.push(hub);
    const started = hub.start();
    // The child is up and has ignored nothing yet: wait for its first line.
    await untilLog((l) => l['stderr'] === 'silent: started');
    const [pid] = hub.childPids();
    expect(pid).toBeDefined();
    await hub.close();
    await started; // start() settles once close() ended the connect
    expect(isAlive(pid!)).toBe(false);
    expect(hub.servers({})[0]!.state).toBe('stopped');
  });

  it('goes through setState for a disabled server: its since and the state metric follow', async () => {
    const { hub, metrics } = buildHub({ off: { ...node(SHAPES), disabled: true } });
    hubs.push(hub);
    await hub.start();
    expect(hub.servers({})[0]!.state).toBe('disabled');
    expect(await metrics.registry.getSingleMetricAsString('voxgate_mcp_server_state_changes_total')).toMatch(/state="disabled"\} 1/);
  });

  it('resolves names through one namespace and keeps failures of a caller apart from tool errors', async () => {
    const { hub } = buildHub({ shapes: node(SHAPES) });
    hubs.push(hub);
    await hub.start();
    await untilHub(hub, () => hub.tools({}).length === 2, 'the shapes tools');
    await expect(hub.call('mcp__shapes__nope', {}, {})).rejects.toMatchObject({ code: 'TOOL_NOT_FOUND' });
    await expect(hub.call('mcp__shapes__read_file', { bytes: 'x' }, {})).rejects.toMatchObject({ code: 'INVALID_ARGUMENTS' });
    // call and callTimed give the same result: call's with its duration in it, callTimed's with the duration beside it.
    const plain = await hub.call('mcp__shapes__read_file', { bytes: 3 }, {});
    const timed = await hub.callTimed('mcp__shapes__read_file', { bytes: 3 }, {});
    const { durationMs, ...rest } = plain;
    expect(typeof durationMs).toBe('number');
    expect(rest).toEqual(timed.result);
    expect(Object.keys(plain)).toEqual([...Object.keys(timed.result), 'durationMs']);
    expect(timed.result).not.toHaveProperty('durationMs');
    expect(timed.durationMs).toBeGreaterThanOrEqual(0);
    await expect(hub.callTimed('mcp__shapes__nope', {}, {})).rejects.toMatchObject({ code: 'TOOL_NOT_FOUND' });
    await hub.drain();
    const r = await hub.call('mcp__shapes__read_file', { bytes: 1 }, {});
    expect(r).toMatchObject({ isError: true, _meta: { 'voxgate/code': 'SHUTTING_DOWN' } });
  });
});
