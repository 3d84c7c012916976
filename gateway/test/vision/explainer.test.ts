import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { afterEach, describe, expect, it } from 'vitest';
import { httpExplainer, NO_EXPLAINER_ANSWER, noExplainer } from '../../src/vision/explainer.js';

const JPEG = Buffer.concat([Buffer.from([0xff, 0xd8, 0xff, 0xe0]), Buffer.alloc(64, 7), Buffer.from([0xff, 0xd9])]);
const input = { deviceId: 'aa:bb:cc:dd:ee:01', question: 'what is it?', image: JPEG, mimeType: 'image/jpeg' };

const servers: Server[] = [];
afterEach(async () => {
  for (const s of servers.splice(0)) await new Promise<void>((resolve) => s.close(() => resolve()));
});

/** An explainer service on 127.0.0.1 that answers as `handle` says; its URL. */
async function service(handle: (req: IncomingMessage, body: string, res: ServerResponse) => void): Promise<string> {
  const s = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => handle(req, Buffer.concat(chunks).toString('latin1'), res));
  });
  servers.push(s);
  await new Promise<void>((resolve) => s.listen(0, '127.0.0.1', resolve));
  return `http://127.0.0.1:${(s.address() as { port: number }).port}/explain`;
}

describe('vision explainers', () => {
  it('without one configured, says so (and is not a success)', async () => {
    expect(await noExplainer.explain(input)).toEqual({ success: false, action: 'RESPONSE', response: NO_EXPLAINER_ANSWER });
  });

  it('posts the question and photo as multipart with the device id and token, and passes the answer on', async () => {
    let seen: { auth?: string | undefined; device?: string | undefined; type?: string | undefined; body: string } | undefined;
    const url = await service((req, body, res) => {
      seen = { auth: req.headers.authorization, device: req.headers['device-id'] as string, type: req.headers['content-type'], body };
      res.end(JSON.stringify({ success: true, response: 'A mug.' }));
    });
    expect(await httpExplainer(url, { token: 'secret', timeoutMs: 5000 }).explain(input)).toEqual({ success: true, action: 'RESPONSE', response: 'A mug.' });
    expect(seen?.auth).toBe('Bearer secret');
    expect(seen?.device).toBe(input.deviceId);
    expect(seen?.type).toMatch(/^multipart\/form-data; boundary=/);
    expect(seen?.body).toContain('what is it?');
    expect(seen?.body).toContain('filename="camera.jpg"');
  });

  it('sends no Authorization without a token, and keeps success false when the service says so', async () => {
    let auth: string | undefined = 'unset';
    const url = await service((req, _body, res) => {
      auth = req.headers.authorization;
      res.end(JSON.stringify({ success: false, response: 'Too dark to see.' }));
    });
    expect(await httpExplainer(url, { timeoutMs: 5000 }).explain(input)).toEqual({ success: false, action: 'RESPONSE', response: 'Too dark to see.' });
    expect(auth).toBeUndefined();
  });

  it('throws on an HTTP error, an answer that is not JSON, or one without a text response', async () => {
    for (const [status, text] of [
      [500, JSON.stringify({ response: 'broken' })],
      [200, '<html>not json</html>'],
      [200, JSON.stringify({ success: true, response: 42 })],
    ] as const) {
      const url = await service((_req, _body, res) => {
        res.statusCode = status;
        res.end(text);
      });
      await expect(httpExplainer(url, { timeoutMs: 5000 }).explain(input)).rejects.toThrow(`explainer answered HTTP ${status} without a text response`);
    }
  });

  it('gives up after its timeout when the service does not answer', async () => {
    const url = await service(() => undefined); // never answers
    await expect(httpExplainer(url, { timeoutMs: 200 }).explain(input)).rejects.toThrow(/abort|timeout/i);
  });
});
