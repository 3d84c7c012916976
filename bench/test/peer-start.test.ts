/**
 * The /mcp peers' start (bench/lib/mcp-peers.ts `servePeer`), on real processes and sockets: a port taken between the
 * pick and the peer's bind costs one more start, not the peer's rows; a peer that exits for any other reason fails at
 * once with what it printed. The peer is a stand-in script read with mcp-proxy's command line (`--port N`), so the
 * test needs nothing installed from the network.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { servePeer, stopPeer } from '../lib/mcp-peers.js';
import { freePort } from '../lib/procs.js';

/** Far past the test's own timeout: a start that waited it out instead of failing fast would fail the test. */
const READY_MS = 600_000;

/** Listens on the port after `--port` and answers 200 at /mcp; a listen error is thrown (printed, exit 1), as the peers do. */
const LISTENER = `import { createServer } from 'node:http';
const port = Number(process.argv[process.argv.indexOf('--port') + 1]);
createServer((req, res) => res.writeHead(req.url === '/mcp' ? 200 : 404).end()).listen(port, '127.0.0.1');
`;

describe('the bench peers start', () => {
  const dir = mkdtempSync(join(tmpdir(), 'voxgate-bench-peer-'));
  const holders: Server[] = [];
  afterAll(() => {
    for (const s of holders) s.close();
    rmSync(dir, { recursive: true, force: true });
  });
  const script = (name: string, text: string) => {
    const file = join(dir, name);
    writeFileSync(file, text);
    return file;
  };
  const answers = async (url: URL) => (await fetch(url, { signal: AbortSignal.timeout(2000) })).status === 200;

  it('starts again on a new port when the picked one was taken before the peer bound it', { timeout: 120_000 }, async () => {
    const holder = createServer();
    holders.push(holder);
    await new Promise<void>((resolve) => holder.listen(0, '127.0.0.1', resolve));
    const busy = (holder.address() as { port: number }).port;
    const picks: number[] = [];
    const port = async () => {
      const p = picks.length === 0 ? busy : await freePort();
      picks.push(p);
      return p;
    };
    const peer = await servePeer('mcp-proxy', script('listener.mjs', LISTENER), ['unused'], answers, READY_MS, port);
    try {
      expect(peer.attempts).toBe(2);
      expect(picks).toHaveLength(2);
      expect(Number(peer.url.port)).toBe(picks[1]);
      expect(await answers(peer.url)).toBe(true);
    } finally {
      await stopPeer(peer.child);
    }
  });

  it('fails at once, with what the peer printed, when it exits for another reason', { timeout: 120_000 }, async () => {
    const bin = script('broken.mjs', `console.error('no such server: unused'); process.exit(3);\n`);
    await expect(servePeer('mcp-proxy', bin, ['unused'], answers, READY_MS)).rejects.toThrow(
      /mcp-proxy exited \(3\), start 1 of at most 5: no such server: unused/,
    );
  });
});
