import type { Socket } from 'node:net';
import { Duplex } from 'node:stream';
import { MqttFramingError, type MqttPacketGuard } from './mqtt-packet-guard.js';

type Chunk = { chunk: Buffer | string; encoding: BufferEncoding };

/** The unread bound of a connection (links/unread-bound.ts): past `exceeded`, the connection is destroyed. */
export interface UnreadCheck {
  readonly maxBytes: number;
  exceeded(unread: number, who: Record<string, unknown>): boolean;
}

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
  /** Closed for what its peer left unread. */
  private cut = false;

  constructor(
    private readonly socket: Socket,
    private readonly guard: MqttPacketGuard,
    private readonly onRefused: (err: MqttFramingError) => void = () => undefined,
    private readonly unread?: UnreadCheck,
    replay?: Buffer,
  ) {
    super({ decodeStrings: false });
    // What was read before this stream took the socket (links/mqtt-device-connection.ts reads the CONNECT first).
    if (replay && replay.length > 0) this.push(replay);
    socket.on('data', (chunk: Buffer) => this.fromSocket(chunk));
    // 'end' and 'close' come once each: `on`, not `once` (a wrapper and its state per listener, per connection).
    socket.on('end', () => this.push(null));
    socket.on('error', (err) => this.destroy(err));
    socket.on('close', () => this.destroy());
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

  /** Bytes written to the peer and not yet taken by it: the broker's writes held here, and the socket's own. */
  get unreadBytes(): number {
    return this.writableLength + this.socket.writableLength;
  }

  /** Past the unread bound the socket is destroyed (the bound counts and logs it; this stream follows its close); true once cut. */
  stalled(): boolean {
    if (this.cut || this.destroyed) return true;
    const unread = this.unreadBytes;
    if (!this.unread || unread <= this.unread.maxBytes) return false;
    this.unread.exceeded(unread, { remote: this.socket.remoteAddress });
    this.cut = true;
    this.refused = true;
    this.socket.destroy();
    return true;
  }

  override _read(): void {
    this.socket.resume();
  }

  override _write(chunk: Buffer | string, encoding: BufferEncoding, cb: (err?: Error | null) => void): void {
    this.socket.write(chunk, encoding);
    this.written(cb);
  }

  override _writev(chunks: Chunk[], cb: (err?: Error | null) => void): void {
    this.socket.cork();
    for (const { chunk, encoding } of chunks) this.socket.write(chunk, encoding);
    this.socket.uncork();
    this.written(cb);
  }

  override _final(cb: (err?: Error | null) => void): void {
    this.socket.end(() => cb());
  }

  override _destroy(err: Error | null, cb: (err?: Error | null) => void): void {
    this.socket.destroy();
    cb(err);
  }

  /**
   * A write is done once the socket holds it, drained or not; what the peer leaves unread is bounded instead. The
   * broker waits for a write's callback with each message it delivers, at most 100 at once for all clients (aedes'
   * `concurrency`): when the callback waited for the socket to drain, one backend that subscribed to the events and
   * stopped reading held every slot, so every device's publishes waited behind it until aedes' drainTimeout (60 s)
   * cut it, and the queue built meanwhile, released at once, overflowed the stack (red team 2026-11-28).
   */
  private written(cb: (err?: Error | null) => void): void {
    cb();
    this.stalled();
  }
}
