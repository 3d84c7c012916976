/**
 * The MCP proxies users put in front of a stdio server, for the /mcp rows: supergateway (stdio → Streamable
 * HTTP, stateful) and punkpeye's mcp-proxy. Installed at run time into a cache outside the repository
 * (pinned versions, never committed), as the conformance suite brings in its runner.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { freePort } from './procs.js';

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

/** Starts made before giving up on ports taken under the peer (each start picks a new one). */
const PEER_START_ATTEMPTS = 5;

export interface ServedPeer {
  child: ChildProcess;
  /** `http://127.0.0.1:<port>/mcp` */
  url: URL;
  /** Starts made (more than one when a picked port was taken before the peer bound it). */
  attempts: number;
}

/**
 * `startPeer` on a port picked for it, resolved once `answers(url)` is true. The port is free when picked and bound
 * by the peer a moment later: on a busy machine another process's connection may take it in between, and the peer
 * exits with EADDRINUSE. Such a start is made again on a new port (up to PEER_START_ATTEMPTS); any other exit fails
 * at once with the peer's last output, and a peer not answering within `readyMs` is stopped and fails.
 */
export async function servePeer(
  name: PeerName,
  bin: string,
  server: readonly string[],
  answers: (url: URL) => Promise<boolean>,
  readyMs: number,
  port: () => Promise<number> = freePort,
): Promise<ServedPeer> {
  for (let attempt = 1; ; attempt++) {
    const url = new URL(`http://127.0.0.1:${await port()}/mcp`);
    const child = startPeer(name, bin, Number(url.port), server);
    let stderr = '';
    child.stderr?.setEncoding('utf8').on('data', (d: string) => (stderr = (stderr + d).slice(-2000)));
    let exited = false;
    // 'close' once stderr is drained; a child that could not be spawned ('error') ends the wait the same way.
    void once(child, 'close').then(
      () => (exited = true),
      () => (exited = true),
    );
    for (const end = Date.now() + readyMs; !exited; await sleep(200)) {
      if (await answers(url).catch(() => false)) return { child, url, attempts: attempt };
      if (Date.now() > end) {
        await stopPeer(child);
        throw new Error(`${name} did not answer within ${readyMs} ms (${url.href})`);
      }
    }
    const tail = stderr.trim().split('\n').slice(-6).join(' | ');
    if (!stderr.includes('EADDRINUSE') || attempt >= PEER_START_ATTEMPTS)
      throw new Error(`${name} exited (${String(child.exitCode ?? child.signalCode)}), start ${attempt} of at most ${PEER_START_ATTEMPTS}: ${tail}`);
  }
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
