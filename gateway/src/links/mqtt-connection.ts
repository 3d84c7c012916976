import type { Socket } from 'node:net';
import { Duplex } from 'node:stream';
import { MqttFramingError, type MqttPacketGuard } from './mqtt-packet-guard.js';

type Chunk = { chunk: Buffer | string; encoding: BufferEncoding };

/**
 * One MQTT socket as the broker sees it: it reads what passed the packet guard, and writes to the socket,
 * each packet in one `writev`. aedes writes a packet as 4-5 chunks inside a cork; `Duplex.from` passed them
 * to the socket one `write` (one syscall) each, ~16 % of the gateway's busy time on the MQTT call path
 * (profile in docs/performance.md). Here the corked chunks reach `_writev` and cross to the socket corked.
 * Reads go through the guard's `pass` on each socket chunk, not through a piped Transform: the same bytes
 * pass or are refused, without a Writable and a Readable more per read and per connection. A verdict goes to
 * `onRefused` (its owner counts and logs it), then the connection fails with it; nothing after it is read.
 */
export class GuardedMqttConnection extends Duplex {
  private refused = false;

  constructor(
    private readonly socket: Socket,
    private readonly guard: MqttPacketGuard,
    private readonly onRefused: (err: MqttFramingError) => void = () => undefined,
  ) {
    super({ decodeStrings: false });
    socket.on('data', (chunk: Buffer) => this.fromSocket(chunk));
    socket.once('end', () => this.push(null));
    socket.on('error', (err) => this.destroy(err));
    socket.once('close', () => this.destroy());
  }

  /** One socket chunk through the guard. */
  private fromSocket(chunk: Buffer): void {
    if (this.refused) return;
    const passed = this.guard.pass(chunk);
    if (passed instanceof MqttFramingError) {
      this.refused = true;
      this.socket.pause();
      this.onRefused(passed);
      this.destroy(passed);
    } else if (passed !== undefined && !this.push(passed)) this.socket.pause();
  }

  override _read(): void {
    this.socket.resume();
  }

  override _write(chunk: Buffer | string, encoding: BufferEncoding, cb: (err?: Error | null) => void): void {
    this.afterWrite(this.socket.write(chunk, encoding), cb);
  }

  override _writev(chunks: Chunk[], cb: (err?: Error | null) => void): void {
    this.socket.cork();
    let flowing = true;
    for (const { chunk, encoding } of chunks) flowing = this.socket.write(chunk, encoding);
    this.socket.uncork();
    this.afterWrite(flowing, cb);
  }

  override _final(cb: (err?: Error | null) => void): void {
    this.socket.end(() => cb());
  }

  override _destroy(err: Error | null, cb: (err?: Error | null) => void): void {
    this.socket.destroy();
    cb(err);
  }

  /** The write is done when the socket took it; above its high-water mark, when it drains. */
  private afterWrite(flowing: boolean, cb: (err?: Error | null) => void): void {
    if (flowing) cb();
    else this.socket.once('drain', () => cb());
  }
}
