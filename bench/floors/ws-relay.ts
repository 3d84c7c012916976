/**
 * Floor for the WebSocket call path: a fastify route that forwards the call to a bare `ws` connection and
 * returns the reply. No validation, auth, metrics, logging, queue or timeout: the least a relay can do.
 */
import Fastify from 'fastify';
import { WebSocketServer, type WebSocket } from 'ws';
import { serveMemoryProbe } from '../procs/ipc.js';

const devices = new Map<string, WebSocket>();
const pending = new Map<number, (payload: unknown) => void>();
let nextId = 1;

const app = Fastify({ logger: false });
app.post<{ Params: { deviceId: string; toolName: string }; Body: { arguments?: Record<string, unknown> } }>(
  '/v1/devices/:deviceId/tools/:toolName/call',
  (req, reply) => {
    const ws = devices.get(req.params.deviceId);
    if (!ws) return reply.code(503).send({ error: 'offline' });
    const id = nextId++;
    pending.set(id, (result) => void reply.send(result));
    ws.send(`{"session_id":"floor","type":"mcp","payload":${JSON.stringify({ jsonrpc: '2.0', id, method: 'tools/call', params: { name: req.params.toolName, arguments: req.body?.arguments ?? {} } })}}`);
    return reply;
  },
);

const wss = new WebSocketServer({ noServer: true, perMessageDeflate: false });
app.server.on('upgrade', (req, socket, head) => {
  const deviceId = String(req.headers['device-id'] ?? '');
  wss.handleUpgrade(req, socket, head, (ws) => {
    devices.set(deviceId, ws);
    ws.on('message', (data) => {
      const frame = JSON.parse(String(data)) as { type?: string; payload?: { id?: number; result?: unknown } };
      if (frame.type === 'hello') return void ws.send('{"type":"hello","transport":"websocket","session_id":"floor"}');
      const id = frame.payload?.id;
      const done = id === undefined ? undefined : pending.get(id);
      if (done) {
        pending.delete(id!);
        done(frame.payload!.result);
      }
    });
    ws.on('close', () => {
      if (devices.get(deviceId) === ws) devices.delete(deviceId);
    });
  });
});

serveMemoryProbe(() => ({ devices: devices.size }));
await app.listen({ host: '127.0.0.1', port: 0 });
const address = app.server.address();
process.send?.({ id: 0, ok: true, port: typeof address === 'object' && address ? address.port : 0 });
