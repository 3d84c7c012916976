import { createCipheriv, randomBytes, type Cipher } from 'node:crypto';
import { fail, ok, type Parsed } from '../result.js';

/**
 * The MQTT+UDP audio packet (firmware mqtt_protocol.cc):
 * `|type u8=1|flags u8|payload_len u16 BE|ssrc u32|timestamp u32 BE|sequence u32 BE|` + AES-128-CTR(Opus),
 * the 16-byte header doubling as the CTR counter block. The sender copies the session nonce from the
 * server hello and overwrites the length, timestamp and sequence, so type, flags and ssrc are the
 * server's: the ssrc is how a packet is routed to its session.
 */
export const UDP_HEADER_BYTES = 16;
export const UDP_AUDIO_TYPE = 0x01;
export const AES_128_KEY_BYTES = 16;

export interface UdpHeader {
  flags: number;
  payloadLength: number;
  ssrc: number;
  timestamp: number;
  sequence: number;
}

export type UdpPacketProblem = 'too_short' | 'bad_type' | 'bad_length';

/** Read a packet's header; the declared length must match the bytes that arrived. */
export function parseUdpHeader(packet: Buffer): Parsed<UdpHeader, UdpPacketProblem> {
  if (packet.length < UDP_HEADER_BYTES) return fail('too_short', `${packet.length} bytes`);
  if (packet[0] !== UDP_AUDIO_TYPE) return fail('bad_type', `type ${packet[0]}`);
  const payloadLength = packet.readUInt16BE(2);
  if (payloadLength !== packet.length - UDP_HEADER_BYTES) return fail('bad_length', `declared ${payloadLength}, carried ${packet.length - UDP_HEADER_BYTES}`);
  return ok({
    flags: packet[1]!,
    payloadLength,
    ssrc: packet.readUInt32BE(4),
    timestamp: packet.readUInt32BE(8),
    sequence: packet.readUInt32BE(12),
  });
}

/** The ssrc of a packet at least a header long (routing happens before the session's key is known). */
export function udpSsrc(packet: Buffer): number | undefined {
  return packet.length >= UDP_HEADER_BYTES ? packet.readUInt32BE(4) : undefined;
}

function ctr(key: Buffer, iv: Buffer, data: Uint8Array): Buffer {
  const c = createCipheriv('aes-128-ctr', key, iv);
  return Buffer.concat([c.update(data), c.final()]);
}

/** Decrypt a packet's payload (CTR is symmetric; the header is the IV). */
export function openUdpPacket(key: Buffer, packet: Buffer): Buffer {
  return ctr(key, packet.subarray(0, UDP_HEADER_BYTES), packet.subarray(UDP_HEADER_BYTES));
}

/** Build a packet as the device does: the session nonce with length, timestamp and sequence written in. */
export function sealUdpPacket(key: Buffer, nonce: Buffer, fields: { timestamp: number; sequence: number }, opus: Uint8Array): Buffer {
  if (opus.length > 0xffff) throw new RangeError('a UDP audio payload carries at most 65535 bytes');
  const header = Buffer.from(nonce.subarray(0, UDP_HEADER_BYTES));
  header.writeUInt16BE(opus.length, 2);
  header.writeUInt32BE(fields.timestamp >>> 0, 8);
  header.writeUInt32BE(fields.sequence >>> 0, 12);
  return Buffer.concat([header, ctr(key, header, opus)]);
}

/** Counter blocks for one packet, reused: the relay is single-threaded and each packet is done before the next. */
let counters = Buffer.alloc(0);

/** The 16-byte big-endian counter at `at`, plus one (CTR's 128-bit increment, carries included). */
function incrementBlock(buf: Buffer, at: number): void {
  for (let i = at + 15; i >= at; i--) {
    buf[i] = (buf[i]! + 1) & 0xff;
    if (buf[i] !== 0) return;
  }
}

/**
 * AES-128-CTR for one session's key without a cipher object per packet: one AES-128-ECB context (the key
 * schedule done once) turns the packet's counter blocks — its header, header + 1, … — into the keystream, which
 * is XORed straight into the output. Same bytes as openUdpPacket/sealUdpPacket; a `createCipheriv` per packet was
 * the relay's largest cost after the sockets, and most of its garbage (profile in docs/performance.md).
 */
export class UdpCrypter {
  private readonly ecb: Cipher;

  constructor(key: Buffer) {
    this.ecb = createCipheriv('aes-128-ecb', key, null);
    this.ecb.setAutoPadding(false);
  }

  /** `data` XOR the keystream from counter block `iv`, written to `out` at `at`. */
  private xorInto(iv: Uint8Array, data: Uint8Array, out: Uint8Array, at: number): void {
    const n = data.length;
    if (n === 0) return;
    const blocks = Math.ceil(n / UDP_HEADER_BYTES);
    const bytes = blocks * UDP_HEADER_BYTES;
    if (counters.length < bytes) counters = Buffer.alloc(Math.max(bytes, 2 * counters.length, 1024));
    counters.set(iv.subarray(0, UDP_HEADER_BYTES), 0);
    for (let b = 1; b < blocks; b++) {
      const off = b * UDP_HEADER_BYTES;
      counters.copy(counters, off, off - UDP_HEADER_BYTES, off);
      incrementBlock(counters, off);
    }
    const stream = this.ecb.update(counters.subarray(0, bytes));
    for (let i = 0; i < n; i++) out[at + i] = data[i]! ^ stream[i]!;
  }

  /** Decrypt a packet's payload into `out` at `at` (room for packet.length - 16 bytes). */
  openInto(packet: Buffer, out: Uint8Array, at: number): void {
    this.xorInto(packet, packet.subarray(UDP_HEADER_BYTES), out, at);
  }

  /** Like sealUdpPacket: the session nonce with length, timestamp and sequence written in, then the ciphertext. */
  seal(nonce: Buffer, fields: { timestamp: number; sequence: number }, opus: Uint8Array): Buffer {
    if (opus.length > 0xffff) throw new RangeError('a UDP audio payload carries at most 65535 bytes');
    const packet = Buffer.allocUnsafe(UDP_HEADER_BYTES + opus.length);
    nonce.copy(packet, 0, 0, UDP_HEADER_BYTES);
    packet.writeUInt16BE(opus.length, 2);
    packet.writeUInt32BE(fields.timestamp >>> 0, 8);
    packet.writeUInt32BE(fields.sequence >>> 0, 12);
    this.xorInto(packet, opus, packet, UDP_HEADER_BYTES);
    return packet;
  }
}

export interface UdpSessionKeys {
  key: Buffer;
  /** The header template the device copies: type 1, flags 0, the session's ssrc, zeros elsewhere. */
  nonce: Buffer;
}

/** A fresh AES-128 key and the nonce naming `ssrc`, for one voice session. */
export function newUdpSessionKeys(ssrc: number): UdpSessionKeys {
  const nonce = Buffer.alloc(UDP_HEADER_BYTES);
  nonce[0] = UDP_AUDIO_TYPE;
  nonce.writeUInt32BE(ssrc >>> 0, 4);
  return { key: randomBytes(AES_128_KEY_BYTES), nonce };
}
