import { Transform, type TransformCallback } from 'node:stream';

/**
 * The guard's own verdict on the bytes. Anything else the guard emits as 'error' is the connection
 * being torn down around it (e.g. the AbortError of a destroyed `Duplex.from`), not a rejection.
 */
export class MqttFramingError extends Error {}

export class PacketTooLargeError extends MqttFramingError {
  constructor(readonly bytes: number, readonly limit: number) {
    super(`MQTT packet of ${bytes} bytes exceeds the ${limit}-byte limit`);
  }
}

/**
 * Reads only MQTT fixed headers (type byte + variable-length "remaining length") as bytes pass, and
 * fails the stream as soon as a packet announces more than `limit` bytes — before the broker buffers it.
 */
export class MqttPacketGuard extends Transform {
  private state: 'type' | 'length' | 'body' = 'type';
  private length = 0;
  private multiplier = 1;
  private lengthBytes = 0;
  private remaining = 0;

  constructor(private readonly limit: number) {
    super();
  }

  override _transform(chunk: Buffer, _enc: BufferEncoding, cb: TransformCallback): void {
    let i = 0;
    while (i < chunk.length) {
      if (this.state === 'body') {
        const take = Math.min(this.remaining, chunk.length - i);
        i += take;
        this.remaining -= take;
        if (this.remaining === 0) this.state = 'type';
      } else if (this.state === 'type') {
        i++;
        this.state = 'length';
        this.length = 0;
        this.multiplier = 1;
        this.lengthBytes = 0;
      } else {
        const b = chunk[i++]!;
        this.length += (b & 0x7f) * this.multiplier;
        this.multiplier *= 128;
        this.lengthBytes++;
        if (b & 0x80) {
          if (this.lengthBytes >= 4) return cb(new MqttFramingError('malformed MQTT remaining length'));
          continue;
        }
        const total = 1 + this.lengthBytes + this.length;
        if (total > this.limit) return cb(new PacketTooLargeError(total, this.limit));
        this.remaining = this.length;
        this.state = this.remaining === 0 ? 'type' : 'body';
      }
    }
    cb(null, chunk);
  }
}
