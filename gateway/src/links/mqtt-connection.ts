import type { Socket } from 'node:net';
import { Duplex, type Readable } from 'node:stream';

type Chunk = { chunk: Buffer | string; encoding: BufferEncoding };

/**
 * One MQTT socket as the broker sees it: it reads what passed the packet guard, and writes to the socket,
 * each packet in one `writev`. aedes writes a packet as 4-5 chunks inside a cork; `Duplex.from` passed them
 * to the socket one `write` (one syscall) each, ~16 % of the gateway's busy time on the MQTT call path
 * (profile in docs/performance.md). Here the corked chunks reach `_writev` and cross to the socket corked.
 */
export class GuardedMqttConnection extends Duplex {
  constructor(
    private readonly socket: Socket,
    private readonly guarded: Readable,
  ) {
    super({ decodeStrings: false });
    guarded.on('data', (chunk: Buffer) => {
      if (!this.push(chunk)) guarded.pause();
    });
    guarded.once('end', () => this.push(null));
    // The guard's own verdicts are counted and logged by its owner; either way the connection ends here.
    guarded.on('error', (err) => this.destroy(err));
    socket.on('error', (err) => this.destroy(err));
    socket.once('close', () => this.destroy());
  }

  override _read(): void {
    this.guarded.resume();
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
    this.guarded.destroy();
    cb(err);
  }

  /** The write is done when the socket took it; above its high-water mark, when it drains. */
  private afterWrite(flowing: boolean, cb: (err?: Error | null) => void): void {
    if (flowing) cb();
    else this.socket.once('drain', () => cb());
  }
}
