/**
 * The MCP proxies users put in front of a stdio server, for the /mcp rows: supergateway (stdio → Streamable
 * HTTP, stateful) and punkpeye's mcp-proxy. Installed at run time into a cache outside the repository
 * (pinned versions, never committed), as the conformance suite brings in its runner.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export const PEER_VERSIONS = { supergateway: '4.0.0', 'mcp-proxy': '6.7.19' } as const;
export type PeerName = keyof typeof PEER_VERSIONS;

const CACHE = join(tmpdir(), 'voxgate-bench-peers');
const BINS: Record<PeerName, string> = { supergateway: 'supergateway/dist/index.js', 'mcp-proxy': 'mcp-proxy/dist/bin/mcp-proxy.mjs' };

const installedVersion = (name: PeerName): string | undefined => {
  try {
    return (JSON.parse(readFileSync(join(CACHE, 'node_modules', name, 'package.json'), 'utf8')) as { version?: string }).version;
  } catch {
    return undefined;
  }
};

/** The peers' entry scripts, installing what is missing; a peer that could not be installed is left out (with why). */
export function installPeers(log: (s: string) => void): { bins: Partial<Record<PeerName, string>>; notes: string[] } {
  const names = Object.keys(PEER_VERSIONS) as PeerName[];
  const missing = names.filter((n) => installedVersion(n) !== PEER_VERSIONS[n]);
  const notes: string[] = [];
  if (missing.length > 0) {
    mkdirSync(CACHE, { recursive: true });
    if (!existsSync(join(CACHE, 'package.json'))) writeFileSync(join(CACHE, 'package.json'), '{"private":true}\n');
    log(`installing ${missing.map((n) => `${n}@${PEER_VERSIONS[n]}`).join(', ')} into ${CACHE}`);
    const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm';
    const r = spawnSync(npm, ['install', '--no-audit', '--no-fund', '--prefix', CACHE, ...missing.map((n) => `${n}@${PEER_VERSIONS[n]}`)], {
      stdio: ['ignore', 'ignore', 'pipe'],
      encoding: 'utf8',
      timeout: 240_000,
    });
    if (r.status !== 0) notes.push(`npm install failed (${r.error?.message ?? `exit ${String(r.status)}`}): ${String(r.stderr).trim().slice(-300)}`);
  }
  const bins: Partial<Record<PeerName, string>> = {};
  for (const n of names) {
    const bin = join(CACHE, 'node_modules', BINS[n]);
    if (installedVersion(n) === PEER_VERSIONS[n] && existsSync(bin)) bins[n] = bin;
    else notes.push(`${n}@${PEER_VERSIONS[n]} is not installed in ${CACHE}`);
  }
  return { bins, notes };
}

/** A peer listening on 127.0.0.1:`port` at /mcp, fronting `server` (a command line run by the peer). */
export function startPeer(name: PeerName, bin: string, port: number, server: readonly string[]): ChildProcess {
  // Both defaults as users get them, except what the bench needs: a loopback port, quiet logs, and
  // supergateway's stateful mode (its stateless mode starts a server process per request).
  const args =
    name === 'supergateway'
      ? [bin, '--stdio', server.map(quote).join(' '), '--outputTransport', 'streamableHttp', '--stateful', '--port', String(port), '--logLevel', 'none']
      : [bin, '--host', '127.0.0.1', '--port', String(port), '--server', 'stream', '--', ...server];
  // Its own process group, so that stopping it stops the servers it started too (stopPeer).
  const child = spawn(process.execPath, args, { stdio: ['ignore', 'ignore', 'pipe'], detached: true });
  const killNow = () => signalGroup(child, 'SIGKILL');
  process.once('exit', killNow);
  child.once('exit', () => process.off('exit', killNow));
  return child;
}

/** SIGTERM to the peer's group, SIGKILL after `graceMs`; resolves when the peer has exited. */
export async function stopPeer(child: ChildProcess, graceMs = 3000): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return signalGroup(child, 'SIGKILL');
  const exited = new Promise((resolve) => child.once('exit', resolve));
  signalGroup(child, 'SIGTERM');
  const timer = setTimeout(() => signalGroup(child, 'SIGKILL'), graceMs);
  await exited;
  clearTimeout(timer);
  signalGroup(child, 'SIGKILL'); // whatever it left in its group
}

function signalGroup(child: ChildProcess, signal: NodeJS.Signals): void {
  if (child.pid === undefined) return;
  try {
    process.kill(-child.pid, signal);
  } catch {
    /* gone */
  }
}

/** supergateway runs its --stdio command through a shell. */
const quote = (s: string) => (/^[\w./:=@-]+$/.test(s) ? s : `'${s.replace(/'/g, `'\\''`)}'`);
