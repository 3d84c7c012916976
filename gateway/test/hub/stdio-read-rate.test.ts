import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { parseServers } from '../../src/hub/config.js';
import { FIXTURE_SERVER } from '../../../test/support/hub.js';
import { buildHub, type BuiltHub } from './support.js';

const CHATTY = fileURLToPath(new URL('./fixtures/chatty-server.mjs', import.meta.url));
const PAUSED = 'MCP server sends more than its read budget (mcp.stdioReadBytesPerSecond); reading its output paused';

/**
 * A stdio server's output is parsed on the event loop every device and caller shares (~30 ms per MB of small objects),
 * as a tool process's is: the tool processes' were bounded per tenant (mcp.endpoints.readBytesPerSecond, red team 10),
 * a stdio server's were read as fast as it wrote.
 */
describe('a stdio server that writes more than its byte rate', { timeout: 60_000 }, () => {
  let b: BuiltHub | undefined;
  afterEach(async () => {
    await b?.hub.close();
    b = undefined;
  });

  it('is read no faster than its rate (its output waits in the pipe), nothing dropped; another server is read as before', async () => {
    // ~200 KB of small objects against 64 KiB a second (a second's worth at once).
    b = buildHub({
      chatty: { command: process.execPath, args: [CHATTY], read_bytes_per_second: 64 * 1024 },
      fix: { command: process.execPath, args: [FIXTURE_SERVER] },
    });
    const { hub, metrics } = b;
    await hub.start();
    // Before: no such budget (the entry's field was refused), every line parsed as fast as it came.
    await b.untilLog((l) => l['msg'] === PAUSED && l['server'] === 'chatty' && l['readBytesPerSecond'] === 64 * 1024);
    const paused = (await metrics.readsPaused.get()).values.find((v) => v.labels['transport'] === 'mcp_stdio' && v.labels['budget'] === 'server');
    expect(paused?.value).toBeGreaterThanOrEqual(1);
    // The other server is not held back by chatty's budget.
    expect((await hub.call('mcp__fix__echo', { text: 'hi' }, {})).isError).toBeFalsy();
    // Nothing dropped, nothing cut: chatty's answer follows everything it wrote before, read once the budget allowed.
    const r = await hub.call('mcp__chatty__echo', {}, {});
    expect(r.content).toEqual([{ type: 'text', text: 'here' }]);
    expect(hub.servers({}).find((s) => s.name === 'chatty')?.state).toBe('ready');
    await b.untilLog((l) => l['stderr'] === 'chatty: all sent');
    expect(b.logs.filter((l) => l['msg'] === PAUSED)).toHaveLength(1);
  });

  it("is a stdio server's own setting: refused on a server of another type", () => {
    expect(parseServers({ s: { command: 'x', read_bytes_per_second: 1024 * 1024 } })[0]!.readBytesPerSecond).toBe(1024 * 1024);
    expect(() => parseServers({ h: { url: 'https://example.com/mcp', read_bytes_per_second: 1024 * 1024 } })).toThrow(/applies to stdio servers/);
    expect(() => parseServers({ s: { command: 'x', read_bytes_per_second: 1000 } })).toThrow(/read_bytes_per_second/);
  });
});
