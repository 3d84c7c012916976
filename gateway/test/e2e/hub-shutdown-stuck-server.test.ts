import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { isAlive } from '../../../test/support/hub.js';
import { descendants, isolatedEnv, startCompiledGateway } from '../../../test/support/gateway-process.js';

const SILENT = fileURLToPath(new URL('../hub/fixtures/silent-server.mjs', import.meta.url));
const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

describe('a gateway whose stdio server never answers initialize (issue 20 item 8)', () => {
  it('stops on SIGTERM without waiting for the connect: exit 0, and the child (which ignores EOF and SIGTERM) is gone', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'voxgate-stuck-'));
    dirs.push(dir);
    const config = {
      logLevel: 'debug',
      mcp: { connectTimeoutMs: 60_000, killGraceMs: 300, servers: { silent: { command: process.execPath, args: [SILENT] } } },
    };
    writeFileSync(join(dir, 'gateway.config.json'), JSON.stringify(config));
    const gw = startCompiledGateway(isolatedEnv(dir));
    await gw.logLine('voxgate started');
    // The child has started and is now ignoring the initialize request.
    await gw.logLine('upstream stderr');
    const children = descendants(gw.pid);
    expect(children.length).toBeGreaterThan(0);
    gw.child.kill('SIGTERM');
    const { code } = await gw.exited;
    expect(code).toBe(0);
    for (const pid of children) expect(isAlive(pid)).toBe(false);
  }, 60_000);
});
