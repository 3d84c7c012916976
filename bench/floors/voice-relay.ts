/**
 * Floor for the voice relay: a bare byte relay on the same sockets, with no protocol work beyond what the wire
 * requires. No validation, metrics, logging, sequence checks or MCP.
 * - WebSocket in → WebSocket out: each device connection gets its own upstream connection to the voice server
 *   (same headers); every message, text or binary, goes across unchanged, both ways.
 * - MQTT + UDP in → WebSocket out: a bare MQTT server (bare-mqtt.ts) takes the device's hello (published to `device-server`),
 *   opens an upstream WebSocket with binary protocol 2, and answers with the server hello's `udp` block. A UDP
 *   packet is decrypted (AES-128-CTR, its 16-byte header as the counter block) and sent up in a protocol-2 frame;
 *   a frame from upstream is encrypted the same way and sent to the device's last address. A cipher per packet,
 *   as the peer (78/xiaozhi-mqtt-gateway) does.
 */
import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';
import { createSocket, type RemoteInfo } from 'node:dgram';
import { createServer as createHttpServer } from 'node:http';
import { WebSocket, WebSocketServer, type RawData } from 'ws';
import { serveMemoryProbe } from '../procs/ipc.js';
import { bareMqttServer, type BareMqttClient as Client } from './bare-mqtt.js';

const upstreamUrl = process.env['VOICE_UPSTREAM_URL'] ?? '';
const V2_HEADER = 16;
let open = 0;

// WebSocket devices: pipe each connection to its own upstream connection.
const http = createHttpServer((_req, res) => res.writeHead(404).end());
const wss = new WebSocketServer({ server: http, perMessageDeflate: false });
wss.on('connection', (device, req) => {
  open++;
  const h = req.headers;
  const headers: Record<string, string> = {};
  for (const k of ['device-id', 'client-id', 'protocol-version', 'authorization']) if (typeof h[k] === 'string') headers[k] = h[k];
  const up = new WebSocket(upstreamUrl, { headers, perMessageDeflate: false });
  const early: Array<[RawData, boolean]> = [];
  up.on('open', () => {
    for (const [d, b] of early.splice(0)) up.send(d, { binary: b });
  });
  device.on('message', (d, binary) => (up.readyState === WebSocket.OPEN ? up.send(d, { binary }) : void early.push([d, binary])));
  up.on('message', (d, binary) => device.send(d, { binary }));
  const close = () => {
    device.terminate();
    up.terminate();
  };
  device.on('close', () => {
    open--;
    close();
  });
  up.on('close', close);
  device.on('error', () => undefined);
  up.on('error', () => undefined);
});

// MQTT + UDP devices.
interface UdpSession {
  client: Client;
  up: WebSocket;
  key: Buffer;
  nonce: Buffer;
  sequence: number;
  address?: RemoteInfo;
}
const sessions = new Map<number, UdpSession>();
const udp = createSocket('udp4');
let nextSsrc = 1;

udp.on('message', (packet, rinfo) => {
  if (packet.length < V2_HEADER || packet[0] !== 0x01) return;
  const s = sessions.get(packet.readUInt32BE(4));
  if (!s || s.up.readyState !== WebSocket.OPEN) return;
  s.address = rinfo;
  const d = createDecipheriv('aes-128-ctr', s.key, packet.subarray(0, V2_HEADER));
  const opus = Buffer.concat([d.update(packet.subarray(V2_HEADER)), d.final()]);
  const frame = Buffer.alloc(V2_HEADER + opus.length);
  frame.writeUInt16BE(2, 0);
  frame.writeUInt32BE(packet.readUInt32BE(8), 8);
  frame.writeUInt32BE(opus.length, 12);
  opus.copy(frame, V2_HEADER);
  s.up.send(frame, { binary: true });
});

function openUdpSession(client: Client, mac: string, hello: { audio_params?: unknown }): void {
  const ssrc = nextSsrc++;
  const nonce = Buffer.alloc(16);
  nonce[0] = 0x01;
  nonce.writeUInt32BE(ssrc, 4);
  const up = new WebSocket(upstreamUrl, { headers: { 'device-id': mac, 'client-id': client.id, 'protocol-version': '2' }, perMessageDeflate: false });
  const s: UdpSession = { client, up, key: randomBytes(16), nonce, sequence: 0 };
  sessions.set(ssrc, s);
  up.on('open', () => up.send(JSON.stringify({ type: 'hello', version: 2, transport: 'websocket', audio_params: hello.audio_params })));
  up.on('message', (data: Buffer, binary) => {
    if (!binary) {
      const m = JSON.parse(data.toString('utf8')) as { type?: string; session_id?: string; audio_params?: unknown };
      if (m.type !== 'hello') return;
      const reply = {
        type: 'hello',
        transport: 'udp',
        session_id: m.session_id,
        audio_params: m.audio_params,
        udp: { server: '127.0.0.1', port: udpPort, key: s.key.toString('hex'), nonce: nonce.toString('hex') },
      };
      return void client.publish(`devices/p2p/${mac.replace(/:/g, '_')}`, JSON.stringify(reply));
    }
    if (!s.address || data.length < V2_HEADER) return;
    const len = data.readUInt32BE(12);
    const header = Buffer.from(nonce);
    header.writeUInt16BE(len, 2);
    header.writeUInt32BE(data.readUInt32BE(8), 8);
    header.writeUInt32BE(++s.sequence, 12);
    const c = createCipheriv('aes-128-ctr', s.key, header);
    udp.send(Buffer.concat([header, c.update(data.subarray(V2_HEADER, V2_HEADER + len)), c.final()]), s.address.port, s.address.address);
  });
  up.on('error', () => undefined);
  up.on('close', () => sessions.delete(ssrc));
}

const byClient = new Map<Client, number>();
const mqtt = bareMqttServer({
  publish(client, topic, payload) {
    if (topic !== 'device-server') return;
    const m = JSON.parse(payload.toString()) as { type?: string; transport?: string; audio_params?: unknown };
    const mac = (client.id.split('@@@')[1] ?? '').replace(/_/g, ':');
    if (m.type === 'hello' && m.transport === 'udp') {
      open++;
      byClient.set(client, nextSsrc);
      openUdpSession(client, mac, m);
    } else if (m.type === 'goodbye') closeUdp(client);
  },
  close: (client) => closeUdp(client),
});
function closeUdp(client: Client): void {
  const ssrc = byClient.get(client);
  if (ssrc === undefined) return;
  byClient.delete(client);
  open--;
  sessions.get(ssrc)?.up.terminate();
  sessions.delete(ssrc);
}

await new Promise<void>((resolve) => udp.bind(0, '127.0.0.1', resolve));
const udpPort = udp.address().port;
await new Promise<void>((resolve) => http.listen(0, '127.0.0.1', resolve));
await new Promise<void>((resolve) => mqtt.listen(0, '127.0.0.1', resolve));
const port = (s: { address(): unknown }) => (s.address() as { port: number }).port;
serveMemoryProbe(() => ({ devices: open }));
// Exit (not die) on the runner's SIGTERM, so a --cpu-prof profile is written.
process.once('SIGTERM', () => process.exit(0));
process.send?.({ id: 0, ok: true, port: port(http), mqttPort: port(mqtt), udpPort });
