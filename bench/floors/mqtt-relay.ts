/**
 * Floor for the MQTT call path: a bare aedes broker (no hooks, no packet guard) and a fastify route that
 * pushes the call straight to the device's client (`client.publish` on devices/p2p/<mac_>, as the device
 * subscribes to nothing) and returns the reply it publishes to `device-server`. No validation, auth,
 * metrics, logging, queue or timeout. `/serial/v1/…` is the same with one call at a time per device (serial.ts).
 */
import { createServer } from 'node:net';
import { Aedes, type Client } from 'aedes';
import Fastify, { type FastifyReply, type FastifyRequest } from 'fastify';
import { serveMemoryProbe } from '../procs/ipc.js';
import { nextCall, serially } from './serial.js';

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

type CallRequest = { Params: { deviceId: string; toolName: string }; Body: { arguments?: Record<string, unknown> } };
const route = (serial: boolean) => (req: FastifyRequest<CallRequest>, reply: FastifyReply) => {
  const { deviceId, toolName } = req.params;
  const send = () => {
    const client = devices.get(deviceId);
    if (!client) {
      if (serial) nextCall(deviceId);
      return void reply.code(503).send({ error: 'offline' });
    }
    const id = nextId++;
    pending.set(id, (result) => {
      if (serial) nextCall(deviceId);
      void reply.send(result);
    });
    const text = `{"session_id":"","type":"mcp","payload":${JSON.stringify({ jsonrpc: '2.0', id, method: 'tools/call', params: { name: toolName, arguments: req.body?.arguments ?? {} } })}}`;
    client.publish(
      { cmd: 'publish', topic: `devices/p2p/${deviceId.replace(/:/g, '_')}`, payload: Buffer.from(text), qos: 0, retain: false, dup: false },
      () => {},
    );
  };
  if (serial) serially(deviceId, send);
  else send();
  return reply;
};
const app = Fastify({ logger: false });
app.post<CallRequest>('/v1/devices/:deviceId/tools/:toolName/call', route(false));
app.post<CallRequest>('/serial/v1/devices/:deviceId/tools/:toolName/call', route(true));

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
