/**
 * Floor for the MQTT call path: a bare aedes broker (no hooks, no packet guard) and a fastify route that
 * pushes the call straight to the device's client (`client.publish` on devices/p2p/<mac_>, as the device
 * subscribes to nothing) and returns the reply it publishes to `device-server`. No validation, auth,
 * metrics, logging, queue or timeout.
 */
import { createServer } from 'node:net';
import { Aedes, type Client } from 'aedes';
import Fastify from 'fastify';
import { serveMemoryProbe } from '../procs/ipc.js';

const devices = new Map<string, Client>();
const pending = new Map<number, (payload: unknown) => void>();
let nextId = 1;

const broker = await Aedes.createBroker();
broker.on('clientReady', (client) => {
  const mac = client.id.split('@@@')[1];
  if (mac) devices.set(mac.replace(/_/g, ':'), client);
});
broker.on('clientDisconnect', (client) => {
  const mac = client.id.split('@@@')[1];
  if (mac && devices.get(mac.replace(/_/g, ':')) === client) devices.delete(mac.replace(/_/g, ':'));
});
broker.on('publish', (packet, client) => {
  if (!client) return;
  const frame = JSON.parse(packet.payload.toString()) as { payload?: { id?: number; result?: unknown } };
  const id = frame.payload?.id;
  const done = id === undefined ? undefined : pending.get(id);
  if (done) {
    pending.delete(id!);
    done(frame.payload!.result);
  }
});
const mqttServer = createServer((socket) => broker.handle(socket));
await new Promise<void>((resolve) => mqttServer.listen(0, '127.0.0.1', resolve));

const app = Fastify({ logger: false });
app.post<{ Params: { deviceId: string; toolName: string }; Body: { arguments?: Record<string, unknown> } }>(
  '/v1/devices/:deviceId/tools/:toolName/call',
  (req, reply) => {
    const client = devices.get(req.params.deviceId);
    if (!client) return reply.code(503).send({ error: 'offline' });
    const id = nextId++;
    pending.set(id, (result) => void reply.send(result));
    const text = `{"session_id":"","type":"mcp","payload":${JSON.stringify({ jsonrpc: '2.0', id, method: 'tools/call', params: { name: req.params.toolName, arguments: req.body?.arguments ?? {} } })}}`;
    client.publish({ cmd: 'publish', topic: `devices/p2p/${req.params.deviceId.replace(/:/g, '_')}`, payload: Buffer.from(text), qos: 0, retain: false, dup: false }, () => {});
    return reply;
  },
);

serveMemoryProbe(() => ({ devices: devices.size }));
await app.listen({ host: '127.0.0.1', port: 0 });
const httpAddress = app.server.address();
const mqttAddress = mqttServer.address();
process.send?.({
  id: 0,
  ok: true,
  port: typeof httpAddress === 'object' && httpAddress ? httpAddress.port : 0,
  mqttPort: typeof mqttAddress === 'object' && mqttAddress ? mqttAddress.port : 0,
});
