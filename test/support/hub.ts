import { spawn, type ChildProcess } from 'node:child_process';
import { readdirSync, readFileSync, readlinkSync } from 'node:fs';
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

/** The TCP port a process listens on, read from /proc (the server is started with PORT=0). */
function listeningPort(pid: number): number | undefined {
  const inodes = new Set<string>();
  for (const fd of readdirSync(`/proc/${pid}/fd`)) {
    try {
      const m = /^socket:\[(\d+)\]$/.exec(readlinkSync(`/proc/${pid}/fd/${fd}`));
      if (m) inodes.add(m[1]!);
    } catch {
      /* closed meanwhile */
    }
  }
  for (const table of ['/proc/net/tcp6', '/proc/net/tcp']) {
    let text = '';
    try {
      text = readFileSync(table, 'utf8');
    } catch {
      continue;
    }
    for (const line of text.split('\n').slice(1)) {
      const f = line.trim().split(/\s+/);
      if (f[3] === '0A' && inodes.has(f[9] ?? '')) return parseInt(f[1]!.split(':')[1]!, 16);
    }
  }
  return undefined;
}

/** server-everything in one of its HTTP modes on a free port; resolves once it listens. */
export async function startEverything(mode: 'streamableHttp' | 'sse', port = 0): Promise<{ child: ChildProcess; port: number }> {
  const child = spawn(process.execPath, [EVERYTHING_BIN, mode], { env: { ...process.env, PORT: String(port) }, stdio: ['ignore', 'ignore', 'pipe'] });
  // It writes "listening on port" (streamableHttp) or "is running on port" (sse) to stderr once listening.
  await new Promise<void>((resolve, reject) => {
    let buf = '';
    child.stderr!.on('data', (d: Buffer) => {
      buf += d.toString();
      if (/listening on port|is running on port/.test(buf)) resolve();
    });
    child.once('exit', (code) => reject(new Error(`server-everything exited (${code}): ${buf}`)));
  });
  const listening = listeningPort(child.pid!);
  if (!listening) throw new Error('could not find the port server-everything listens on');
  return { child, port: listening };
}
