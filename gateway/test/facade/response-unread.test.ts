import { createServer, type Server, type ServerResponse } from 'node:http';
import { connect as connectTcp, type AddressInfo, type Socket } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { countUnread, endpointUnreadTotal, unreadGroup } from '../../src/facade/response-unread.js';
import type { UnreadTotal } from '../../src/hub/unread-total.js';
import { createMetrics } from '../../src/metrics.js';

const MiB = 1024 * 1024;
let server: Server | undefined;
const sockets: Socket[] = [];
afterEach(async () => {
  for (const s of sockets.splice(0)) s.destroy();
  await new Promise<void>((ok) => (server ? server.close(() => ok()) : ok()));
  server = undefined;
});

/** An HTTP server on 127.0.0.1 whose every response counts in `total`, its group the path's first segment. */
async function serve(total: UnreadTotal, answer: (res: ServerResponse, path: string) => void): Promise<number> {
  server = createServer((req, res) => {
    const path = req.url ?? '/';
    countUnread(res, total, { group: unreadGroup(path.split('/')[1], 'p'), who: { path } });
    answer(res, path);
  });
  await new Promise<void>((ok) => server!.listen(0, '127.0.0.1', () => ok()));
  return (server.address() as AddressInfo).port;
}

/** A GET on a raw socket that reads nothing: resolves once the answer has begun ('answering') or the server cut it. */
function stalled(port: number, path: string): Promise<'answering' | 'cut'> {
  const socket = connectTcp(port, '127.0.0.1');
  sockets.push(socket);
  socket.on('error', () => undefined);
  socket.pause();
  socket.write(`GET ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n`);
  return new Promise((ok) => {
    socket.once('readable', () => ok(socket.readableLength > 0 ? 'answering' : 'cut'));
    socket.once('close', () => ok('cut'));
  });
}

function total(maxBytes: number) {
  const metrics = createMetrics();
  const lines: string[] = [];
  const log = { warn: (_o: Record<string, unknown>, msg: string) => void lines.push(msg) } as unknown as Parameters<typeof endpointUnreadTotal>[1];
  const t = endpointUnreadTotal(maxBytes, log, metrics);
  const outcome = async (o: string) => (await metrics.mcpEndpointUnreadFull.get()).values.find((v) => v.labels['outcome'] === o)?.value ?? 0;
  return { t, lines, outcome, metrics };
}

describe('/mcp responses counted in their unread total (facade/response-unread.ts)', () => {
  it('counts a write until the socket took it: a client that reads holds nothing once read, whatever its size', async () => {
    const { t } = total(16 * MiB);
    const body = 'z'.repeat(6 * MiB);
    const port = await serve(t, (res) => {
      res.writeHead(200, { 'content-type': 'text/plain' });
      res.write(body.slice(0, 3 * MiB));
      res.end(body.slice(3 * MiB));
    });
    for (let i = 0; i < 4; i++) expect((await (await fetch(`http://127.0.0.1:${port}/acme`)).text()).length).toBe(body.length);
    expect(t.held).toBe(0);
    expect(t.peak).toBeLessThanOrEqual(16 * MiB);
  });

  it("a full total cuts the writer's own response when its group holds the most, another group's to make room for a reader", async () => {
    const { t, outcome, lines } = total(8 * MiB);
    const big = 'x'.repeat(5 * MiB);
    const port = await serve(t, (res, path) => {
      res.writeHead(200, { 'content-type': 'text/plain' });
      res.end(path.startsWith('/acme') ? big : big.slice(MiB));
    });
    // Acme's first stalled answer holds its 5 MiB; the second does not fit, and acme holds the most: cut.
    expect(await stalled(port, '/acme/1')).toBe('answering');
    expect(t.held).toBe(5 * MiB);
    expect(await stalled(port, '/acme/2')).toBe('cut');
    expect(await outcome('refused')).toBe(1);
    expect(t.held).toBe(5 * MiB);
    // Globex reads: its 4 MiB does not fit beside acme's 5, and acme's answer is cut for it (a group holding no more
    // than the writer's would is never cut: then the writer's own write gives way).
    expect((await (await fetch(`http://127.0.0.1:${port}/globex`)).text()).length).toBe(4 * MiB);
    expect(await outcome('cut')).toBe(1);
    expect(t.held).toBe(0);
    expect(t.peak).toBeLessThanOrEqual(8 * MiB);
    expect(lines.some((l) => l.startsWith('MCP endpoint unread budget full'))).toBe(true);
  });

  it('what a response held stops counting when its client goes', async () => {
    const { t, metrics } = total(8 * MiB);
    const port = await serve(t, (res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write('y'.repeat(5 * MiB));
    });
    expect(await stalled(port, '/acme')).toBe('answering');
    expect(t.held).toBe(5 * MiB);
    const closed = new Promise<void>((ok) => sockets[0]!.once('close', () => ok()));
    sockets[0]!.destroy();
    await closed;
    await expect.poll(() => t.held).toBe(0);
    expect((await metrics.mcpEndpointUnreadBytes.get()).values[0]?.value).toBe(0);
  });
});
