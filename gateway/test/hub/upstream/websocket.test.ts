import type { AddressInfo } from 'node:net';
import { McpServer, type JSONRPCMessage, type Transport } from '@modelcontextprotocol/server';
import { afterEach, describe, expect, it } from 'vitest';
import { WebSocketServer, type WebSocket } from 'ws';
import { parseServers } from '../../../src/hub/config.js';
import { LANE_FIRST_ID } from '../../../src/hub/upstream/tool-lane.js';
import { buildHub } from '../support.js';

/** The server side of the MCP draft WebSocket transport, written for this test: one message per text frame. */
class WsServerTransport implements Transport {
  onclose?: () => void;
  onerror?: (e: Error) => void;
  onmessage?: (m: JSONRPCMessage) => void;
  constructor(private readonly ws: WebSocket) {}
  start(): Promise<void> {
    this.ws.on('message', (d) => this.onmessage?.(JSON.parse(d.toString()) as JSONRPCMessage));
    this.ws.on('close', () => this.onclose?.());
    return Promise.resolve();
  }
  send(m: JSONRPCMessage): Promise<void> {
    return new Promise((resolve, reject) => this.ws.send(JSON.stringify(m), (e) => (e ? reject(e) : resolve())));
  }
  close(): Promise<void> {
    this.ws.close();
    return Promise.resolve();
  }
}

/** A real SDK McpServer per connection (tool `add`), on a WebSocket server that speaks subprotocol `mcp`. */
async function startWsMcpServer() {
  const seen: Array<{ protocol: string; key: string | undefined }> = [];
  /** The request id of each tools/call the server got. */
  const callIds: unknown[] = [];
  const sockets = new Set<WebSocket>();
  const wss = new WebSocketServer({ host: '127.0.0.1', port: 0, handleProtocols: (p) => (p.has('mcp') ? 'mcp' : false) });
  wss.on('connection', (ws, req) => {
    sockets.add(ws);
    seen.push({ protocol: ws.protocol, key: req.headers['x-key'] as string | undefined });
    const mcp = new McpServer({ name: 'ws-test', version: '1' }, { capabilities: { tools: {} } });
    mcp.server.setRequestHandler('tools/list', () => ({
      tools: [{ name: 'add', description: 'a + b', inputSchema: { type: 'object', properties: { a: { type: 'number' }, b: { type: 'number' } } } }],
    }));
    mcp.server.setRequestHandler('tools/call', (req, ctx) => {
      callIds.push(ctx.mcpReq.id);
      const a = req.params.arguments as { a: number; b: number };
      return { content: [{ type: 'text', text: String(a.a + a.b) }] };
    });
    void mcp.connect(new WsServerTransport(ws));
  });
  await new Promise<void>((resolve) => wss.once('listening', () => resolve()));
  const port = (wss.address() as AddressInfo).port;
  return {
    url: `ws://127.0.0.1:${port}/mcp`,
    seen,
    callIds,
    sockets,
    close: () => {
      for (const s of sockets) s.terminate();
      return new Promise<void>((r) => wss.close(() => r()));
    },
  };
}

describe('websocket upstream', () => {
  const cleanups: Array<() => Promise<void>> = [];
  afterEach(async () => {
    for (const c of cleanups.splice(0).reverse()) await c();
  });

  it('dials with subprotocol mcp and the static headers, calls, and comes back after the connection drops', async () => {
    const srv = await startWsMcpServer();
    cleanups.push(srv.close);
    const { hub } = buildHub({ ws: { url: srv.url, headers: { 'x-key': 'k1' } } });
    cleanups.push(() => hub.close());
    await hub.start();
    expect(hub.servers({})[0]).toMatchObject({ name: 'ws', type: 'websocket', state: 'ready' });
    expect(srv.seen).toEqual([{ protocol: 'mcp', key: 'k1' }]);
    const r = await hub.call('mcp__ws__add', { a: 2, b: 40 }, {});
    expect(r.content).toEqual([{ type: 'text', text: '42' }]);
    // Called through the gateway's own tools/call lane (hub/upstream/tool-lane.ts), whose ids start at 2^30.
    expect(srv.callIds).toEqual([LANE_FIRST_ID]);

    // The server drops us: the server is failed until a request tries it again (as http and sse are).
    for (const s of srv.sockets) s.terminate();
    await expect.poll(() => hub.upstreams.get('ws')!.state).toBe('failed');
    const again = await hub.call('mcp__ws__add', { a: 1, b: 1 }, {});
    expect(again.content).toEqual([{ type: 'text', text: '2' }]);
    expect(srv.seen).toHaveLength(2);
  });

  it('keeps to the SSRF rules: a private address is refused unless allow_private_network', async () => {
    const srv = await startWsMcpServer();
    cleanups.push(srv.close);
    const { hub } = buildHub({ ws: { type: 'websocket', url: srv.url } }, { allowPrivateNetwork: false });
    cleanups.push(() => hub.close());
    await hub.start();
    expect(hub.servers({})[0]).toMatchObject({ state: 'failed', lastError: expect.stringMatching(/refused to connect to 127\.0\.0\.1/) });
    expect(srv.seen).toEqual([]);
  });

  it('checks the entry: ws(s) urls only, and no per-call ${token} placeholders in its headers', () => {
    expect(parseServers({ a: { url: 'wss://example.com/mcp' } })[0]!.type).toBe('websocket');
    expect(() => parseServers({ a: { type: 'websocket', url: 'https://example.com/mcp' } })).toThrow(/a websocket server's "url" is ws:\/\/ or wss:\/\//);
    expect(() => parseServers({ a: { type: 'http', url: 'ws://example.com/mcp' } })).toThrow(/a http server's "url" is http/);
    expect(() => parseServers({ a: { url: 'ws://example.com/mcp', headers_template: { authorization: 'Bearer ${key}' } } })).toThrow(/placeholders/);
  });
});
