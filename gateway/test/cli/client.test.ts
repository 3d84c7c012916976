import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ApiError, GatewayClient, type TurnEventData } from '../../src/cli/client.js';

/** A stand-in gateway: each test sets how the next request is answered; what was asked is kept. */
let server: Server;
let url = '';
let answer: (req: IncomingMessage, body: string, res: ServerResponse) => void = (_q, _b, res) => res.end();
const asked: Array<{ method: string; path: string; headers: IncomingMessage['headers']; body: string }> = [];

beforeAll(async () => {
  server = createServer((req, res) => {
    let body = '';
    req.on('data', (d: Buffer) => (body += d.toString()));
    req.on('end', () => {
      asked.push({ method: req.method!, path: req.url!, headers: req.headers, body });
      answer(req, body, res);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  url = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
});
afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

const json = (status: number, v: unknown) => (_q: IncomingMessage, _b: string, res: ServerResponse) => {
  res.writeHead(status, { 'content-type': 'application/json' });
  res.end(JSON.stringify(v));
};

describe('GatewayClient.request', () => {
  it('sends the key as a bearer token and JSON bodies as JSON, and reads the JSON answer', async () => {
    answer = json(200, { devices: [] });
    const r = await new GatewayClient(url, 'key-123').request<{ devices: unknown[] }>('POST', '/v1/x', { a: 1 });
    expect(r).toEqual({ devices: [] });
    const last = asked.at(-1)!;
    expect(last).toMatchObject({ method: 'POST', path: '/v1/x', body: '{"a":1}' });
    expect(last.headers['authorization']).toBe('Bearer key-123');
    expect(last.headers['content-type']).toBe('application/json');
  });

  it('sends no authorization without a key, no content type without a body, and gives undefined for an empty answer', async () => {
    answer = (_q, _b, res) => res.writeHead(204).end();
    expect(await new GatewayClient(url, undefined).request('DELETE', '/v1/y')).toBeUndefined();
    expect(asked.at(-1)!.headers['authorization']).toBeUndefined();
    expect(asked.at(-1)!.headers['content-type']).toBeUndefined();
  });

  it('turns a problem answer into an ApiError with its status, code and detail', async () => {
    answer = json(404, { code: 'DEVICE_NOT_FOUND', detail: 'no device 02:00:00:00:00:09 has ever connected' });
    const e = (await new GatewayClient(url, 'k').request('GET', '/v1/devices/x').catch((x: unknown) => x)) as ApiError;
    expect(e).toBeInstanceOf(ApiError);
    expect([e.status, e.code, e.message]).toEqual([404, 'DEVICE_NOT_FOUND', 'no device 02:00:00:00:00:09 has ever connected']);
  });

  it('names an answer that is not a problem by its status, with at most 200 characters of its text', async () => {
    answer = (_q, _b, res) => res.writeHead(502).end('x'.repeat(500));
    const e = (await new GatewayClient(url, 'k').request('GET', '/').catch((x: unknown) => x)) as ApiError;
    expect([e.status, e.code, e.message]).toEqual([502, 'HTTP_502', 'x'.repeat(200)]);
    answer = (_q, _b, res) => res.writeHead(503).end();
    const empty = (await new GatewayClient(url, 'k').request('GET', '/').catch((x: unknown) => x)) as ApiError;
    expect([empty.code, empty.message]).toEqual(['HTTP_503', 'HTTP 503']);
  });
});

describe('GatewayClient.turn', () => {
  it('asks for a stream and hands over every SSE event, whatever the chunks it arrives in', async () => {
    const frames = [
      'event: turn.started\ndata: {"type":"turn.started","turnId":"t1"}\n\n',
      ': a comment line\n\n',
      'data: {"type":"text.delta",\ndata: "text":"hi"}\n\n',
      'data: {"type":"turn.completed","text":"hi"}\n\n',
    ].join('');
    answer = (_q, _b, res) => {
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      // Split mid-frame and mid-line: the client must join them.
      for (let i = 0; i < frames.length; i += 7) res.write(frames.slice(i, i + 7));
      res.end();
    };
    const events: TurnEventData[] = [];
    await new GatewayClient(url, 'k').turn({ message: 'hello' }, new AbortController().signal, (e) => void events.push(e));
    expect(JSON.parse(asked.at(-1)!.body)).toEqual({ message: 'hello', stream: true });
    expect(asked.at(-1)!.path).toBe('/v1/assistant/chat');
    expect(events).toEqual([
      { type: 'turn.started', turnId: 't1' },
      { type: 'text.delta', text: 'hi' },
      { type: 'turn.completed', text: 'hi' },
    ]);
  });

  it('turns a refused turn into an ApiError', async () => {
    answer = json(409, { code: 'CONVERSATION_BUSY', detail: 'a turn is already running on this conversation' });
    const e = (await new GatewayClient(url, 'k').turn({ message: 'x' }, new AbortController().signal, () => undefined).catch((x: unknown) => x)) as ApiError;
    expect([e.status, e.code]).toEqual([409, 'CONVERSATION_BUSY']);
  });
});
