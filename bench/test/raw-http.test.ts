/**
 * The /mcp load's HTTP client (bench/lib/raw-http.ts) against real servers on 127.0.0.1: every way an answer may be
 * framed, answers split across packets, a server that closes its connection, one that dies mid-answer.
 */
import { createServer as createHttpServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { createServer as createNetServer, type AddressInfo, type Server, type Socket } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { RawHttpConnection } from '../lib/raw-http.js';

const servers: Server[] = [];
const connections: RawHttpConnection[] = [];

afterEach(async () => {
  for (const c of connections.splice(0)) c.close();
  await Promise.all(servers.splice(0).map((s) => new Promise((r) => s.close(r))));
});

async function listen(s: Server): Promise<RawHttpConnection> {
  servers.push(s);
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  const c = new RawHttpConnection('127.0.0.1', (s.address() as AddressInfo).port);
  connections.push(c);
  return c;
}

function bodyOf(req: IncomingMessage): Promise<string> {
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    req.on('data', (d: Buffer) => chunks.push(d));
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
  });
}

/** A raw TCP server that answers every request (read up to its blank line) with `answer`, written in `pieces`. */
async function scripted(answer: (n: number) => string[], after?: (socket: Socket) => void): Promise<RawHttpConnection> {
  let n = 0;
  const server = createNetServer((socket) => {
    let seen = '';
    socket.on('data', (d) => {
      seen += d.toString('latin1');
      while (seen.includes('\r\n\r\n')) {
        seen = seen.slice(seen.indexOf('\r\n\r\n') + 4);
        const pieces = answer(n++);
        pieces.forEach((p, i) => setTimeout(() => socket.write(p), i * 5));
        setTimeout(() => after?.(socket), pieces.length * 5 + 5);
      }
    });
  });
  return listen(server);
}

describe('RawHttpConnection', () => {
  it('sends the method, path, headers and body, and reads a Content-Length answer, many times on one socket', async () => {
    const sockets = new Set<unknown>();
    const c = await listen(
      createHttpServer(async (req: IncomingMessage, res: ServerResponse) => {
        sockets.add(req.socket);
        const body = await bodyOf(req);
        const text = JSON.stringify({ method: req.method, url: req.url, token: req.headers['x-token'], body });
        res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text), 'x-answer': 'Yes' }).end(text);
      }),
    );
    for (let i = 0; i < 3; i++) {
      const r = await c.request('POST', '/mcp?x=1', 'x-token: t\r\ncontent-type: application/json\r\n', `{"n":${i},"é":1}`);
      expect(r.status).toBe(200);
      expect(r.headers['x-answer']).toBe('Yes');
      expect(JSON.parse(r.body)).toEqual({ method: 'POST', url: '/mcp?x=1', token: 't', body: `{"n":${i},"é":1}` });
    }
    expect(sockets.size).toBe(1);
  });

  it('reads chunked answers (SSE), 202 without a body, and a DELETE', async () => {
    const c = await listen(
      createHttpServer(async (req, res) => {
        await bodyOf(req);
        if (req.method === 'DELETE') return res.writeHead(204).end();
        if (req.url === '/note') return res.writeHead(202, { 'content-length': '0' }).end();
        res.writeHead(200, { 'content-type': 'text/event-stream' });
        res.write('event: message\ndata: {"a":1}\n\n');
        setTimeout(() => res.end('data: {"b":"ü"}\n\n'), 5);
      }),
    );
    const sse = await c.request('POST', '/sse', '', '{}');
    expect(sse.headers['transfer-encoding']).toBe('chunked');
    expect(sse.body).toBe('event: message\ndata: {"a":1}\n\ndata: {"b":"ü"}\n\n');
    expect((await c.request('POST', '/note', '', '{}')).status).toBe(202);
    expect(await c.request('DELETE', '/sse', '')).toMatchObject({ status: 204, body: '' });
  });

  it('reads an answer split inside its head and inside a chunk size, with a 100 Continue before it', async () => {
    const c = await scripted(() => [
      'HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nTransfer-Enc',
      'oding: chunked\r\n\r\n1',
      '0\r\n0123456789abcdef\r\n3;ext=1\r\nxyz\r\n',
      '0\r\n\r\n',
    ]);
    expect(await c.request('GET', '/', '')).toMatchObject({ status: 200, body: '0123456789abcdefxyz' });
    expect(await c.request('GET', '/', '')).toMatchObject({ status: 200, body: '0123456789abcdefxyz' });
  });

  it('reads a body that ends with the connection, and dials again for the next request', async () => {
    const c = await scripted(
      (n) => [`HTTP/1.1 200 OK\r\nConnection: close\r\n\r\nanswer ${n}, `, 'to the end'],
      (socket) => socket.end(),
    );
    expect(await c.request('GET', '/', '')).toMatchObject({ status: 200, body: 'answer 0, to the end' });
    // The first connection is gone: the second request goes out on a new one.
    expect(await c.request('GET', '/', '')).toMatchObject({ status: 200, body: 'answer 1, to the end' });
  });

  it('rejects a request whose answer the server cut off, and one sent while another is in flight', async () => {
    const c = await scripted(
      () => ['HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nonly part'],
      (socket) => socket.destroy(),
    );
    const first = c.request('GET', '/', '');
    await expect(c.request('GET', '/', '')).rejects.toThrow(/one request at a time/);
    await expect(first).rejects.toThrow(/closed the connection/);
  });

  it('rejects an answer it cannot frame, and requests after close', async () => {
    const c = await scripted(() => ['HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n']);
    await expect(c.request('GET', '/', '')).rejects.toThrow(/bad chunk size/);
    c.close();
    await expect(c.request('GET', '/', '')).rejects.toThrow(/closed/);
  });
});
