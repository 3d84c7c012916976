/**
 * Floor for the MQTT call path: a bare MQTT server (bare-mqtt.ts: packets read and written, no broker) and a fastify
 * route that pushes the call straight to the device's socket (a PUBLISH on devices/p2p/<mac_>, as the device
 * subscribes to nothing) and returns the reply it publishes to `device-server`. No validation, auth,
 * metrics, logging, queue or timeout. `/serial/v1/…` is the same with one call at a time per device (serial.ts).
 */
import Fastify, { type FastifyReply, type FastifyRequest } from 'fastify';
import { serveMemoryProbe } from '../procs/ipc.js';
import { bareMqttServer, type BareMqttClient } from './bare-mqtt.js';
import { nextCall, serially } from './serial.js';

const devices = new Map<string, BareMqttClient>();
const pending = new Map<number, (payload: unknown) => void>();
let nextId = 1;

const macOf = (client: BareMqttClient) => (client.id.split('@@@')[1] ?? '').replace(/_/g, ':');
const mqttServer = bareMqttServer({
  connect(client) {
    if (macOf(client)) devices.set(macOf(client), client);
  },
  close(client) {
    if (devices.get(macOf(client)) === client) devices.delete(macOf(client));
  },
  publish(_client, _topic, payload) {
    const frame = JSON.parse(payload.toString()) as { payload?: { id?: number; result?: unknown } };
    const id = frame.payload?.id;
    const done = id === undefined ? undefined : pending.get(id);
    if (done) {
      pending.delete(id!);
      done(frame.payload!.result);
    }
  },
});
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
    client.publish(`devices/p2p/${deviceId.replace(/:/g, '_')}`, text);
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
