/**
 * Floor for the WebSocket call path: a fastify route that forwards the call to a bare `ws` connection and
 * returns the reply. No validation, auth, metrics, logging, queue or timeout: the least a relay can do.
 * `/serial/v1/…` is the same with one call at a time per device (see serial.ts).
 */
import Fastify, { type FastifyReply, type FastifyRequest } from 'fastify';
import { WebSocketServer, type WebSocket } from 'ws';
import { serveMemoryProbe } from '../procs/ipc.js';
import { nextCall, serially } from './serial.js';

const devices = new Map<string, WebSocket>();
const pending = new Map<number, (payload: unknown) => void>();
let nextId = 1;

type CallRequest = { Params: { deviceId: string; toolName: string }; Body: { arguments?: Record<string, unknown> } };
const route = (serial: boolean) => (req: FastifyRequest<CallRequest>, reply: FastifyReply) => {
  const { deviceId, toolName } = req.params;
  const send = () => {
    const ws = devices.get(deviceId);
    if (!ws) {
      if (serial) nextCall(deviceId);
      return void reply.code(503).send({ error: 'offline' });
    }
    const id = nextId++;
    pending.set(id, (result) => {
      if (serial) nextCall(deviceId);
      void reply.send(result);
    });
    ws.send(
      `{"session_id":"floor","type":"mcp","payload":${JSON.stringify({ jsonrpc: '2.0', id, method: 'tools/call', params: { name: toolName, arguments: req.body?.arguments ?? {} } })}}`,
    );
  };
  if (serial) serially(deviceId, send);
  else send();
  return reply;
};
const app = Fastify({ logger: false });
app.post<CallRequest>('/v1/devices/:deviceId/tools/:toolName/call', route(false));
app.post<CallRequest>('/serial/v1/devices/:deviceId/tools/:toolName/call', route(true));

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
