import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { buildHub, type BuiltHub } from './support.js';

/**
 * A Streamable HTTP server answering with more than a message may hold (red team 10): the SDK read a JSON answer
 * whole and an SSE event until it ended, so one event that never ended held 418 MB of the gateway's heap within
 * seconds, and every further megabyte, for as long as the call's timeout.
 */
const MAX_RESULT = 64 * 1024;
/** What each answer over the bound carries: 64 times the message bound (2 x 64 KiB + 64 KiB). */
const HUGE = 64 * (2 * MAX_RESULT + 64 * 1024);

type Rpc = { jsonrpc: '2.0'; id?: number; method: string; params?: { protocolVersion?: string; name?: string } };

/** Writes `total` bytes of `x` to `res`, as fast as it drains, then `end` (nothing more once the client is gone). */
function stream(res: ServerResponse, total: number, end: string, sent: { bytes: number }): void {
  const chunk = 'x'.repeat(64 * 1024);
  let written = 0;
  const more = (): void => {
    while (written < total && !res.destroyed) {
      written += chunk.length;
      sent.bytes += chunk.length;
      if (!res.write(chunk)) return void res.once('drain', more);
    }
    if (!res.destroyed) res.end(end);
  };
  more();
}

function hostileHttp(sent: { bytes: number }): Server {
  return createServer((req: IncomingMessage, res: ServerResponse) => {
    if (req.method !== 'POST') return void res.writeHead(405).end();
    let body = '';
    req.on('data', (c: Buffer) => (body += c.toString()));
    req.on('end', () => {
      const m = JSON.parse(body) as Rpc;
      if (m.id === undefined) return void res.writeHead(202).end();
      const json = (result: unknown, headers: Record<string, string> = {}) =>
        res.writeHead(200, { 'content-type': 'application/json', ...headers }).end(JSON.stringify({ jsonrpc: '2.0', id: m.id, result }));
      if (m.method === 'initialize')
        return json(
          { protocolVersion: m.params!.protocolVersion, capabilities: { tools: {} }, serverInfo: { name: 'hostile-http', version: '1' } },
          { 'mcp-session-id': 'session-1' },
        );
      if (m.method === 'tools/list') return json({ tools: ['huge_event', 'huge_json', 'small'].map((name) => ({ name, inputSchema: { type: 'object' } })) });
      const tool = m.params!.name;
      if (tool === 'small') return json({ content: [{ type: 'text', text: 'still here' }] });
      // The SDK's own servers write the id last: `{"result":...,"jsonrpc":"2.0","id":N}`.
      const tailOf = `"}]},"jsonrpc":"2.0","id":${m.id}}`;
      if (tool === 'huge_json') {
        res.writeHead(200, { 'content-type': 'application/json' });
        res.write('{"result":{"content":[{"type":"text","text":"');
        return stream(res, HUGE, tailOf, sent);
      }
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      res.write('event: message\ndata: {"result":{"content":[{"type":"text","text":"');
      stream(res, HUGE, `${tailOf}\n\n`, sent);
    });
  });
}

describe('a Streamable HTTP server answering with more than a message may hold', { timeout: 60_000 }, () => {
  let b: BuiltHub | undefined;
  let server: Server | undefined;
  afterEach(async () => {
    await b?.hub.close();
    server?.closeAllConnections();
    server?.close();
    b = server = undefined;
  });

  it('has the answer skipped past the bound as it streams (an SSE event) or refused (a JSON body): the call fails too large; the server stays', async () => {
    const sent = { bytes: 0 };
    server = hostileHttp(sent);
    await new Promise<void>((resolve) => server!.listen(0, '127.0.0.1', resolve));
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/mcp`;
    b = buildHub({ hostile: { url, allow_private_network: true } }, { maxResultBytes: MAX_RESULT, callTimeoutMs: 60_000 });
    await b.hub.start();
    expect(b.hub.servers({})[0]?.state).toBe('ready');
    const skipped = () => b!.logs.filter((l) => l['msg'] === 'upstream message over the size limit skipped; the server stays connected').length;

    // Before: the whole event was read into memory before anything looked at its size.
    const event = await b.hub.call('mcp__hostile__huge_event', {}, {});
    expect(event.isError).toBe(true);
    expect(JSON.stringify(event.content)).toContain('answered with a result too large to pass on');
    expect(JSON.stringify(event.content)).toContain(`over the limit of ${MAX_RESULT} bytes`);
    expect(skipped()).toBe(1);
    // All of it was read (and let go of): the call's answer came when the event ended.
    expect(sent.bytes).toBeGreaterThanOrEqual(HUGE);

    const json = await b.hub.call('mcp__hostile__huge_json', {}, {});
    expect(json.isError).toBe(true);
    expect(JSON.stringify(json.content)).toContain('answered with a result too large to pass on');
    expect(skipped()).toBe(2);
    expect((await b.metrics.hubOversized.get()).values[0]?.value).toBe(2);

    expect(await b.hub.call('mcp__hostile__small', {}, {})).toMatchObject({ content: [{ type: 'text', text: 'still here' }] });
    expect(b.hub.servers({})[0]?.state).toBe('ready');
  });
});
