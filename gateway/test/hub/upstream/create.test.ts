import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { parseServers } from '../../../src/hub/config.js';
import type { HubSettings, UpstreamDeps } from '../../../src/hub/upstream/base.js';
import { createUpstream, loadMcpUpstreams } from '../../../src/hub/upstream/create.js';

// This file must not import test/hub/support.ts: it loads the MCP client for every hub it builds.
const deps = { log: pino({ level: 'silent' }), settings: {} as HubSettings, onToolsChanged: () => undefined } satisfies UpstreamDeps;
const [builtin, stdio] = parseServers({
  clock: { tools: ['current_time'] },
  everything: { command: 'node', args: ['server.js'] },
});

describe('the MCP client loads on first use (issue 21: idle memory)', () => {
  it('builtin servers need no MCP client; a server that speaks MCP says clearly that it is not loaded, then works once it is', async () => {
    expect(createUpstream(builtin!, deps).config.type).toBe('builtin');
    expect(() => createUpstream(stdio!, deps)).toThrow(/needs the MCP client, which was not loaded/);
    await loadMcpUpstreams();
    const u = createUpstream(stdio!, deps);
    expect(u.config.type).toBe('stdio');
    expect(u.childPid).toBeUndefined();
  });
});
