import { createServer, request, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { DeferredHeaders } from '../../src/facade/deferred-headers.js';

describe('DeferredHeaders', () => {
  const closers: Array<() => void> = [];
  afterEach(() => closers.splice(0).forEach((c) => c()));

  /** A server whose handler defers the headers, flushes them (as the SDK's adapter does), then runs `then`. */
  async function serve(deferred: DeferredHeaders, then: (res: ServerResponse) => void): Promise<number> {
    const server = createServer((_req, res) => {
      deferred.defer(res);
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.flushHeaders();
      then(res);
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    closers.push(
      () => server.close(),
      () => deferred.close(),
    );
    return (server.address() as AddressInfo).port;
  }

  const get = (port: number) =>
    new Promise<IncomingMessage>((resolve, reject) => request({ port, host: '127.0.0.1', method: 'POST' }, resolve).on('error', reject).end());
  const body = (res: IncomingMessage) =>
    new Promise<string>((resolve) => {
      let text = '';
      res.setEncoding('utf8').on('data', (c: string) => (text += c));
      res.on('end', () => resolve(text));
    });

  it('sends the headers with the first event when it comes in time', async () => {
    const deferred = new DeferredHeaders(60_000);
    const port = await serve(deferred, (res) => setImmediate(() => res.end('data: {"result":1}\n\n')));
    const res = await get(port);
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-type']).toBe('text/event-stream');
    expect(await body(res)).toBe('data: {"result":1}\n\n');
  });

  it('sends the headers on their own once the delay has passed without an event', async () => {
    const deferred = new DeferredHeaders(20);
    let answer!: ServerResponse;
    const port = await serve(deferred, (res) => (answer = res));
    // The response (its headers) arrives while the handler has written nothing yet.
    const res = await get(port);
    expect(res.statusCode).toBe(200);
    expect(answer.writableEnded).toBe(false);
    answer.end('data: late\n\n');
    expect(await body(res)).toBe('data: late\n\n');
    expect(deferred.size).toBe(0);
  });
});
