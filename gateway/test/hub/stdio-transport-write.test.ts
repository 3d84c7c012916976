import type { ChildProcess } from 'node:child_process';
import type { JSONRPCMessage } from '@modelcontextprotocol/client';
import { afterEach, describe, expect, it } from 'vitest';
import { ChildStdioTransport, type MessageTap } from '../../src/hub/stdio-transport.js';

/**
 * When a request leaves for a stdio server: a lone call at once (the server is idle; the rest of the turn runs while
 * it works), concurrent calls together at the end of the turn (one write, one wake-up of the server).
 */
describe('ChildStdioTransport writes', () => {
  let transport: ChildStdioTransport | undefined;
  afterEach(async () => {
    await transport?.close();
    transport = undefined;
  });

  async function start(waiting: () => number): Promise<{ stdin: NonNullable<ChildProcess['stdin']>; lines: string[] }> {
    // A server that reads its stdin and says nothing: what reached it is counted by the test's own pipe.
    transport = new ChildStdioTransport({
      command: process.execPath,
      args: ['-e', 'process.stdin.pipe(process.stdout)'],
      env: {},
      killGraceMs: 1000,
      maxMessageBytes: 1 << 20,
      maxResultBytes: 1 << 20,
    });
    const lines: string[] = [];
    transport.onmessage = (m) => void lines.push(JSON.stringify(m));
    await transport.start();
    const tap: MessageTap = {
      take: () => false,
      closed: () => undefined,
      get size() {
        return waiting();
      },
    };
    transport.tap = tap;
    return { stdin: (transport as unknown as { child: ChildProcess }).child.stdin!, lines };
  }

  const ping = (id: number): JSONRPCMessage => ({ jsonrpc: '2.0', id, method: 'ping' });

  it('a lone call is written at once; concurrent calls wait for the end of the turn, in order, and so does a lone call after them', async () => {
    let waiting = 1;
    const { stdin, lines } = await start(() => waiting);
    transport!.write(ping(1));
    // Handed to the pipe in this turn: nothing corked, nothing buffered.
    expect(stdin.writableCorked).toBe(0);
    expect(stdin.writableLength).toBe(0);

    waiting = 2;
    transport!.write(ping(2));
    transport!.write(ping(3));
    expect(stdin.writableCorked).toBe(1);
    // A lone call after others in the same turn joins them (the order on the pipe is kept).
    waiting = 1;
    transport!.write(ping(4));
    expect(stdin.writableCorked).toBe(1);
    await new Promise((ok) => setImmediate(ok));
    expect(stdin.writableCorked).toBe(0);

    // The last write carried three: calls come several per turn, so a lone one waits for the turn's others too.
    transport!.write(ping(5));
    expect(stdin.writableCorked).toBe(1);
    await new Promise((ok) => setImmediate(ok));
    // That write carried one: the next lone call leaves at once again.
    transport!.write(ping(6));
    expect(stdin.writableCorked).toBe(0);
    expect(stdin.writableLength).toBe(0);
    await expect.poll(() => lines.length).toBe(6);
    expect(lines.map((l) => (JSON.parse(l) as { id: number }).id)).toEqual([1, 2, 3, 4, 5, 6]);
  });
});
