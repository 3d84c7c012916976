import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { McpHub } from '../../gateway/src/hub/hub.js';

/** Helpers for the MCP hub tests: real child processes, awaited through the hub's own change events. */
const require = createRequire(import.meta.url);

export const EVERYTHING_BIN = (() => {
  const pkgFile = require.resolve('@modelcontextprotocol/server-everything/package.json');
  const pkg = JSON.parse(readFileSync(pkgFile, 'utf8')) as { bin: Record<string, string> };
  return join(dirname(pkgFile), pkg.bin['mcp-server-everything']!);
})();

export const FIXTURE_SERVER = fileURLToPath(new URL('../../gateway/test/fixtures/mcp-test-server.mjs', import.meta.url));

/** A stdio entry for `mcpServers` running a JS file with this Node. */
export const nodeServer = (file: string, extra: Record<string, unknown> = {}) => ({ command: process.execPath, args: [file], ...extra });

/** Resolve when `pred` holds, re-checking every time the hub's namespace changes. */
export function untilHub(hub: McpHub, pred: () => boolean, what: string, timeoutMs = 15_000): Promise<void> {
  if (pred()) return Promise.resolve();
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      off();
      reject(new Error(`timed out after ${timeoutMs} ms waiting for ${what}`));
    }, timeoutMs);
    const off = hub.onToolsChanged(() => {
      if (!pred()) return;
      clearTimeout(timer);
      off();
      resolve();
    });
  });
}

/** Alive and not a zombie (a container's PID 1 may never reap re-parented grandchildren). */
export function isAlive(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const state = stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3);
    return state !== 'Z' && state !== 'X';
  } catch {
    return false;
  }
}
