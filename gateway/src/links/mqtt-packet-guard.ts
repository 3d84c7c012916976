/** The guard's verdict on the bytes: the connection they came on ends. */
export class MqttFramingError extends Error {}

export class PacketTooLargeError extends MqttFramingError {
  constructor(
    readonly bytes: number,
    readonly limit: number,
    what = 'MQTT packet',
  ) {
    super(`${what} of ${bytes} bytes exceeds the ${limit}-byte limit`);
  }
}

/**
 * The first packet of a connection, its CONNECT [MQTT-3.1.0-1], comes before anyone is authenticated: a device's is a
 * few hundred bytes (a client id of at most 256 characters, the OTA's user name, a 44-character password), a backend's
 * carries an API key (which HTTP's 16 KiB of headers bounds too); wills are dropped unread. Held to the packet limit
 * (256 KiB), every socket on the MQTT port could hold a quarter of a megabyte of a CONNECT it never finishes, with no
 * credentials, until the connect deadline (red team 11).
 */
export const MAX_CONNECT_BYTES = 16 * 1024;

/** A QoS 0 PUBLISH over the limit that was skipped (never buffered, never seen by the broker). */
export interface OversizedPublish {
  bytes: number;
  limit: number;
  topic: string;
  /** The first bytes of its payload: enough to tell which request a device reply answers. */
  payloadHead: string;
}

/** Bytes of an oversized publish's body kept to read its topic and the start of its payload. */
const HEAD_BYTES = 512;
const PUBLISH = 3;

/**
 * Reads only MQTT fixed headers (type byte + variable-length "remaining length") as bytes pass. A QoS 0
 * PUBLISH that announces more than `limit` bytes is skipped as it streams by (reported to `onOversized`,
 * so the one message is refused and the connection stays); any other oversized packet is a verdict that
 * ends the connection before the broker buffers it (QoS 1/2 would expect an acknowledgement for a packet
 * the broker never saw). A plain object, not a stream: GuardedMqttConnection calls `pass` on each socket
 * chunk, and a Transform's two stream states cost ~0.6 KB per MQTT device (docs/performance.md, "mqttkb").
 */
export class MqttPacketGuard {
  private state: 'type' | 'length' | 'body' | 'skip' = 'type';
  /** The fixed header being read, held back until its length says whether the packet passes. */
  private header: number[] = [];
  private length = 0;
  private multiplier = 1;
  private remaining = 0;
  private skipped: { bytes: number; head: Buffer[]; headBytes: number } | undefined;
  /** The connection's first packet is still to come: it is held to `firstLimit` (when given), and never skipped. */
  private first: boolean;

  constructor(
    private readonly limit: number,
    private readonly onOversized: (info: OversizedPublish) => void = () => undefined,
    /** What a connection's first packet (its CONNECT) may be, whatever `limit` allows after it (MAX_CONNECT_BYTES). */
    private readonly firstLimit?: number,
  ) {
    this.first = firstLimit !== undefined;
  }

  /**
   * The bytes of `chunk` that pass (the chunk itself when it holds whole packets under the limit), undefined
   * when none do yet, or the verdict that ends the connection (nothing after it may be read).
   */
  pass(chunk: Buffer): Buffer | MqttFramingError | undefined {
    // The usual chunk holds whole packets under the limit: it then passes as it came. While it does, nothing is
    // collected (`out` stays undefined: every byte before `packetStart` passes); the parts are listed only from the
    // first packet that does not pass whole (a header begun in an earlier chunk, an oversized publish skipped).
    let out: Buffer[] | undefined = this.state === 'type' || this.state === 'body' ? undefined : [];
    let packetStart = 0;
    let i = 0;
    while (i < chunk.length) {
      if (this.state === 'body') {
        const take = Math.min(this.remaining, chunk.length - i);
        if (out) out.push(chunk.subarray(i, i + take));
        i += take;
        this.remaining -= take;
        if (this.remaining === 0) this.state = 'type';
      } else if (this.state === 'skip') {
        const take = Math.min(this.remaining, chunk.length - i);
        const s = this.skipped!;
        if (s.headBytes < HEAD_BYTES) {
          const part = chunk.subarray(i, i + Math.min(take, HEAD_BYTES - s.headBytes));
          s.head.push(Buffer.from(part));
          s.headBytes += part.length;
        }
        i += take;
        this.remaining -= take;
        if (this.remaining === 0) this.finishSkip();
      } else if (this.state === 'type') {
        packetStart = i;
        this.header.length = 0;
        this.header.push(chunk[i++]!);
        this.state = 'length';
        this.length = 0;
        this.multiplier = 1;
      } else {
        const b = chunk[i++]!;
        this.header.push(b);
        this.length += (b & 0x7f) * this.multiplier;
        this.multiplier *= 128;
        if (b & 0x80) {
          if (this.header.length > 4) return new MqttFramingError('malformed MQTT remaining length');
          continue;
        }
        const total = this.header.length + this.length;
        this.remaining = this.length;
        const firstLimit = this.first ? this.firstLimit : undefined;
        this.first = false;
        // Refused before a byte of it is held, and never skipped: a first packet is a CONNECT, or a violation.
        if (firstLimit !== undefined && total > firstLimit) return new PacketTooLargeError(total, firstLimit, 'first MQTT packet (CONNECT)');
        if (total > this.limit) {
          const first = this.header[0]!;
          const qos0Publish = first >> 4 === PUBLISH && (first & 0x06) === 0;
          if (!qos0Publish) return new PacketTooLargeError(total, this.limit);
          // What passed before this packet, as one part; from here on the parts are listed.
          out ??= packetStart > 0 ? [chunk.subarray(0, packetStart)] : [];
          this.skipped = { bytes: total, head: [], headBytes: 0 };
          this.state = 'skip';
          continue;
        }
        if (out) out.push(Buffer.from(this.header));
        this.state = this.remaining === 0 ? 'type' : 'body';
      }
    }
    if (out === undefined) {
      // A header still being read at the end is held back until its length is known (the next chunk).
      if (this.state !== 'length') return chunk;
      return packetStart > 0 ? chunk.subarray(0, packetStart) : undefined;
    }
    if (out.length === 0) return undefined;
    return out.length === 1 ? out[0] : Buffer.concat(out);
  }

  private finishSkip(): void {
    const s = this.skipped!;
    this.skipped = undefined;
    this.state = 'type';
    const head = Buffer.concat(s.head);
    const topicLength = head.length >= 2 ? head.readUInt16BE(0) : 0;
    const topic = head.subarray(2, 2 + topicLength).toString('utf8');
    const payloadHead = head.subarray(2 + topicLength).toString('utf8');
    this.onOversized({ bytes: s.bytes, limit: this.limit, topic, payloadHead });
  }
}

/**
 * The protocol level byte of a CONNECT (MQTT 3.1.1, 3.1.2.2), read from the bytes of the packet when they hold the
 * fixed header, a protocol name the link knows (`MQTT`, or MQTT 3.1's `MQIsdp`) and the level; else undefined. For a
 * CONNECT the parser refused: a level it does not read (0, 6 and up) must still be answered with CONNACK 1 [MQTT-3.1.2-2]
 * (an MQTT 5 CONNECT with properties it refuses, with the v5 CONNACK 0x84).
 */
export function connectProtocolLevel(bytes: Buffer): number | undefined {
  if (bytes.length < 2 || bytes[0] !== 0x10) return undefined;
  let i = 1;
  while (i < bytes.length && i <= 4 && bytes[i]! & 0x80) i++;
  i++; // past the last byte of the remaining length
  if (i + 2 > bytes.length) return undefined;
  const nameLength = bytes.readUInt16BE(i);
  if (nameLength !== 4 && nameLength !== 6) return undefined;
  const name = bytes.toString('latin1', i + 2, i + 2 + nameLength);
  if (name !== 'MQTT' && name !== 'MQIsdp') return undefined;
  return bytes[i + 2 + nameLength];
}
