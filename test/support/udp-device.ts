/**
 * The firmware's UDP audio channel (main/protocols/mqtt_protocol.cc), written from the firmware and not
 * from the gateway's code: it builds each packet from the server's nonce (length, timestamp and
 * ++sequence written in), encrypts with AES-128-CTR using the header as the counter block, and on receive
 * drops a packet whose type is not 1, whose declared length is not what came, or whose sequence is not above
 * the last one taken, as the firmware does.
 */
import { createCipheriv } from 'node:crypto';
import { createSocket, type Socket } from 'node:dgram';
import type { UdpParams } from './reference-device.js';
import { AsyncQueue } from './wait.js';

export interface ReceivedAudio {
  timestamp: number;
  sequence: number;
  opus: Buffer;
}

export class UdpDeviceChannel {
  readonly received: ReceivedAudio[] = [];
  /** Packets the firmware would drop (type, length, old or repeated sequence). */
  dropped = 0;
  localSequence = 0;
  private remoteSequence = 0;
  private readonly key: Buffer;
  private readonly nonce: Buffer;
  private readonly queue = new AsyncQueue<ReceivedAudio>();

  private constructor(
    readonly socket: Socket,
    readonly params: UdpParams,
  ) {
    this.key = Buffer.from(params.key, 'hex');
    this.nonce = Buffer.from(params.nonce, 'hex');
    socket.on('message', (data) => this.onMessage(data));
  }

  static async open(params: UdpParams): Promise<UdpDeviceChannel> {
    const socket = createSocket('udp4');
    await new Promise<void>((resolve) => socket.bind(0, '127.0.0.1', resolve));
    return new UdpDeviceChannel(socket, params);
  }

  get ssrc(): number {
    return this.nonce.readUInt32BE(4);
  }

  /** The packet the firmware would send for this frame (the sequence is advanced). */
  packet(opus: Buffer, timestamp: number): Buffer {
    const header = Buffer.from(this.nonce);
    header.writeUInt16BE(opus.length, 2);
    header.writeUInt32BE(timestamp, 8);
    header.writeUInt32BE(++this.localSequence, 12);
    const c = createCipheriv('aes-128-ctr', this.key, header);
    return Buffer.concat([header, c.update(opus), c.final()]);
  }

  send(packet: Buffer): void {
    this.socket.send(packet, this.params.port, this.params.server);
  }

  sendAudio(opus: Buffer, timestamp: number): void {
    this.send(this.packet(opus, timestamp));
  }

  next(timeoutMs = 15_000): Promise<ReceivedAudio> {
    return this.queue.next(timeoutMs, 'UDP audio at the device');
  }

  close(): void {
    this.socket.close();
  }

  private onMessage(data: Buffer): void {
    // As the firmware (mqtt_protocol.cc OpenAudioChannel's OnMessage): type 1, the declared length exactly what came,
    // and a sequence above the last one taken (a repeat is dropped too); a gap is only logged.
    if (data.length < 16 || data[0] !== 0x01 || data.readUInt16BE(2) !== data.length - 16) {
      this.dropped++;
      return;
    }
    const timestamp = data.readUInt32BE(8);
    const sequence = data.readUInt32BE(12);
    if (sequence <= this.remoteSequence) {
      this.dropped++;
      return;
    }
    const d = createCipheriv('aes-128-ctr', this.key, data.subarray(0, 16));
    const opus = Buffer.concat([d.update(data.subarray(16)), d.final()]);
    this.remoteSequence = sequence;
    const r = { timestamp, sequence, opus };
    this.received.push(r);
    this.queue.push(r);
  }
}
