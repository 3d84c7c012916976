/**
 * Floors for the fleet, on one plain `ws` server (no session, no validation, no heartbeat):
 * - any path but /xiaozhi/…: connections that are accepted and kept, nothing more. What N sockets cost.
 * - /xiaozhi/v1/: the four round trips a device needs to be ready, and nothing else — the client hello
 *   answered, `initialize`, then `tools/list` page after page (following `nextCursor`), each reply read with
 *   `JSON.parse` only. A device is ready when its last page is in: what the gateway's ready/s is compared with.
 */
import { createServer } from 'node:http';
import { WebSocketServer, type WebSocket } from 'ws';
import { serveMemoryProbe } from '../procs/ipc.js';

const server = createServer((_req, res) => res.writeHead(404).end());
const wss = new WebSocketServer({ server, perMessageDeflate: false });
let ready = 0;
let sessions = 0;

function handshake(ws: WebSocket): void {
  const sid = `floor-${++sessions}`;
  let isReady = false;
  const request = (id: number, method: string, params: Record<string, unknown>) =>
    ws.send(`{"session_id":"${sid}","type":"mcp","payload":${JSON.stringify({ jsonrpc: '2.0', id, method, params })}}`);
  ws.on('message', (data, isBinary) => {
    if (isBinary) return;
    const m = JSON.parse(String(data)) as { type?: string; payload?: { id?: number; result?: { nextCursor?: string } } };
    if (m.type === 'hello') {
      ws.send(`{"type":"hello","transport":"websocket","session_id":"${sid}"}`);
      return request(1, 'initialize', { protocolVersion: '2024-11-05', capabilities: {}, clientInfo: { name: 'floor', version: '1' } });
    }
    const id = m.payload?.id;
    if (typeof id !== 'number') return;
    const cursor = m.payload?.result?.nextCursor;
    if (id === 1 || cursor) return request(id + 1, 'tools/list', cursor ? { cursor } : {});
    if (!isReady) {
      isReady = true;
      ready++;
    }
  });
  ws.on('close', () => {
    if (isReady) ready--;
  });
}

wss.on('connection', (ws, req) => {
  ws.on('error', () => {});
  if (req.url?.startsWith('/xiaozhi/')) handshake(ws);
});

serveMemoryProbe(() => ({ devices: wss.clients.size, ready }));
await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
const address = server.address();
process.send?.({ id: 0, ok: true, port: typeof address === 'object' && address ? address.port : 0 });
