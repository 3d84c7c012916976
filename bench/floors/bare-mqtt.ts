/**
 * The least an MQTT server can do for the floors: read packets (mqtt-packet's parser on the socket), answer CONNECT,
 * SUBSCRIBE and PINGREQ, report CONNECT, PUBLISH and the socket's close, and write a QoS 0 PUBLISH to a client. No
 * broker (no subscriptions, sessions, auth, keepalive or packet guard): the gateway serves its devices without one
 * (links/mqtt-device-connection.ts), so a floor on a general broker would be heavier than what it bounds.
 */
import { createServer, type Server, type Socket } from 'node:net';
import { BufferList } from 'bl';
import mqttPacket, { type Packet } from 'mqtt-packet';

export interface BareMqttClient {
  readonly id: string;
  publish(topic: string, payload: Buffer | string): void;
}

export interface BareMqttHandlers {
  connect?(client: BareMqttClient): void;
  publish(client: BareMqttClient, topic: string, payload: Buffer): void;
  close?(client: BareMqttClient): void;
}

const CONNACK = Buffer.from([0x20, 0x02, 0x00, 0x00]);
const PINGRESP = Buffer.from([0xd0, 0x00]);

export function bareMqttServer(h: BareMqttHandlers): Server {
  return createServer((socket: Socket) => {
    socket.setNoDelay(true);
    socket.on('error', () => socket.destroy());
    const parser = mqttPacket.parser();
    // The byte list alone, as the gateway's parsers read into (its stream half is a Duplex nothing uses).
    (parser as unknown as { _list: unknown })._list = new BufferList();
    let client: BareMqttClient | undefined;
    parser.on('packet', (p: Packet) => {
      if (p.cmd === 'connect') {
        client = { id: p.clientId, publish: (topic, payload) => socket.write(publishPacket(topic, payload)) };
        socket.write(CONNACK);
        h.connect?.(client);
      } else if (!client) socket.destroy();
      else if (p.cmd === 'publish') h.publish(client, p.topic, typeof p.payload === 'string' ? Buffer.from(p.payload) : p.payload);
      else if (p.cmd === 'pingreq') socket.write(PINGRESP);
      else if (p.cmd === 'subscribe') socket.write(mqttPacket.generate({ cmd: 'suback', messageId: p.messageId, granted: p.subscriptions.map((s) => s.qos) }));
      else if (p.cmd === 'disconnect') socket.end();
    });
    parser.on('error', () => socket.destroy());
    socket.on('data', (chunk: Buffer) => parser.parse(chunk));
    socket.on('close', () => client && h.close?.(client));
  });
}

/** A QoS 0 PUBLISH in one buffer (as the gateway writes one). */
function publishPacket(topic: string, payload: Buffer | string): Buffer {
  const body = typeof payload === 'string' ? Buffer.from(payload) : payload;
  const topicBytes = Buffer.byteLength(topic);
  const remaining = 2 + topicBytes + body.length;
  const header: number[] = [0x30];
  let n = remaining;
  do {
    header.push((n % 128) | (n >= 128 ? 0x80 : 0));
    n = Math.floor(n / 128);
  } while (n > 0);
  const buf = Buffer.allocUnsafe(header.length + remaining);
  buf.set(header, 0);
  buf.writeUInt16BE(topicBytes, header.length);
  buf.write(topic, header.length + 2, 'utf8');
  body.copy(buf, header.length + 2 + topicBytes);
  return buf;
}
