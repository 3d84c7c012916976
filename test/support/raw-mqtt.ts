import { connect as netConnect, type Socket } from 'node:net';
import mqttPacket, { type IConnackPacket, type IConnectPacket, type Packet } from 'mqtt-packet';
import { AsyncQueue, deferred, once } from './wait.js';

/** A packet from its first byte and its body, with the remaining length written for it (any packet, legal or not). */
export function mqttFrame(first: number, body: Buffer): Buffer {
  const len: number[] = [];
  let n = body.length;
  do {
    let b = n % 128;
    n = Math.floor(n / 128);
    if (n > 0) b |= 0x80;
    len.push(b);
  } while (n > 0);
  return Buffer.concat([Buffer.from([first, ...len]), body]);
}

/**
 * An MQTT client with no manners, for tests: it writes exactly the packets it is given (a QoS 2
 * PUBLISH never followed by PUBREL, a CONNECT with keepalive 0, nothing at all) and records the packets
 * it gets back. Unlike mqtt.js it answers nothing by itself, not even a PINGREQ.
 */
export class RawMqtt {
  readonly packets = new AsyncQueue<Packet>();
  /** Settles when the socket closes, from either side. */
  readonly closed = deferred();
  /** True when this side ended the connection (so a close is not the server's doing). */
  private ending = false;

  private constructor(
    readonly socket: Socket,
    protocolVersion: 4 | 5,
  ) {
    const parser = mqttPacket.parser({ protocolVersion });
    parser.on('packet', (p: Packet) => this.packets.push(p));
    socket.on('data', (d: Buffer) => parser.parse(d));
    socket.on('error', () => {});
    socket.on('close', () => this.closed.resolve());
  }

  /**
   * A TCP connection (optionally from another loopback address), with nothing sent yet. It reads what comes back as
   * MQTT 3.1.1, or as MQTT 5 when asked (a v5 CONNACK carries a property length the 3.1.1 parser does not read).
   */
  static async open(port: number, opts: { localAddress?: string; protocolVersion?: 4 | 5 } = {}): Promise<RawMqtt> {
    const socket = netConnect({ port, host: '127.0.0.1', ...(opts.localAddress ? { localAddress: opts.localAddress } : {}) });
    const c = new RawMqtt(socket, opts.protocolVersion ?? 4);
    await Promise.race([once(socket, 'connect'), c.closed.promise]);
    return c;
  }

  /** Open, send CONNECT and return the CONNACK. */
  static async connect(port: number, connect: Partial<IConnectPacket> & { clientId: string }): Promise<{ c: RawMqtt; connack: IConnackPacket }> {
    const c = await RawMqtt.open(port);
    c.send({ cmd: 'connect', protocolId: 'MQTT', protocolVersion: 4, clean: true, keepalive: 60, ...connect });
    return { c, connack: await c.nextOf('connack') };
  }

  /** The next packet of this kind, skipping others (e.g. the gateway's own pushes to a device). */
  async nextOf<C extends Packet['cmd']>(cmd: C, timeoutMs = 15_000): Promise<Extract<Packet, { cmd: C }>> {
    for (;;) {
      const p = await this.packets.next(timeoutMs, cmd.toUpperCase());
      if (p.cmd === cmd) return p as Extract<Packet, { cmd: C }>;
    }
  }

  send(packet: Packet): void {
    this.socket.write(mqttPacket.generate(packet));
  }

  sendBytes(bytes: Buffer): void {
    this.socket.write(bytes);
  }

  get endedByUs(): boolean {
    return this.ending;
  }

  destroy(): void {
    this.ending = true;
    this.socket.destroy();
  }
}
