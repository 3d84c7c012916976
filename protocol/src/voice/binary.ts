import { fail, ok, type Parsed } from '../result.js';

/**
 * The device's WebSocket binary framing, chosen by its `Protocol-Version` header (firmware
 * main/protocols/protocol.h): 1 = a bare Opus frame per message; 2 = a 16-byte big-endian header
 * `u16 version, u16 type, u32 reserved, u32 timestamp_ms, u32 payload_size`; 3 = a 4-byte header
 * `u8 type, u8 reserved, u16 payload_size (BE)`.
 */
export type BinaryProtocolVersion = 1 | 2 | 3;

export const BINARY_V2_HEADER_BYTES = 16;
export const BINARY_V3_HEADER_BYTES = 4;
/** v3 carries the size in 16 bits. */
const V3_MAX_PAYLOAD = 0xffff;

export type BinaryFrameType = 'opus' | 'json';
const TYPE_CODE: Record<BinaryFrameType, number> = { opus: 0, json: 1 };

export interface BinaryFrame {
  type: BinaryFrameType;
  payload: Buffer;
  /** v2 only; 0 for v1 and v3. */
  timestampMs: number;
}

export type BinaryFrameProblem = 'too_short' | 'bad_length' | 'too_large' | 'bad_type';

export function isBinaryProtocolVersion(v: unknown): v is BinaryProtocolVersion {
  return v === 1 || v === 2 || v === 3;
}

/** A protocol 2 header at the start of `out`, for a payload of `size` bytes the caller writes after it. */
export function writeBinaryV2Header(out: Buffer, type: BinaryFrameType, timestampMs: number, size: number): void {
  out.writeUInt16BE(2, 0);
  out.writeUInt16BE(TYPE_CODE[type], 2);
  out.writeUInt32BE(0, 4);
  out.writeUInt32BE(timestampMs >>> 0, 8);
  out.writeUInt32BE(size, 12);
}

export function encodeBinaryFrame(version: BinaryProtocolVersion, frame: { type?: BinaryFrameType; payload: Uint8Array; timestampMs?: number }): Buffer {
  const payload = frame.payload;
  const type = TYPE_CODE[frame.type ?? 'opus'];
  if (version === 1) return Buffer.from(payload);
  if (version === 2) {
    const out = Buffer.allocUnsafe(BINARY_V2_HEADER_BYTES + payload.length);
    writeBinaryV2Header(out, frame.type ?? 'opus', frame.timestampMs ?? 0, payload.length);
    out.set(payload, BINARY_V2_HEADER_BYTES);
    return out;
  }
  if (payload.length > V3_MAX_PAYLOAD) throw new RangeError(`a protocol 3 frame carries at most ${V3_MAX_PAYLOAD} bytes`);
  const out = Buffer.allocUnsafe(BINARY_V3_HEADER_BYTES + payload.length);
  out.writeUInt8(type, 0);
  out.writeUInt8(0, 1);
  out.writeUInt16BE(payload.length, 2);
  out.set(payload, BINARY_V3_HEADER_BYTES);
  return out;
}

/**
 * Read one binary message. The declared size must equal what arrived (no trailing bytes, no short
 * frame), and the payload may not exceed `maxPayloadBytes`. The payload is a view, not a copy.
 */
export function decodeBinaryFrame(version: BinaryProtocolVersion, data: Buffer, maxPayloadBytes: number): Parsed<BinaryFrame, BinaryFrameProblem> {
  if (version === 1) {
    if (data.length > maxPayloadBytes) return fail('too_large', `${data.length} bytes > ${maxPayloadBytes}`);
    return ok({ type: 'opus', payload: data, timestampMs: 0 });
  }
  const headerBytes = version === 2 ? BINARY_V2_HEADER_BYTES : BINARY_V3_HEADER_BYTES;
  if (data.length < headerBytes) return fail('too_short', `${data.length} bytes, header is ${headerBytes}`);
  const typeCode = version === 2 ? data.readUInt16BE(2) : data.readUInt8(0);
  const size = version === 2 ? data.readUInt32BE(12) : data.readUInt16BE(2);
  if (size !== data.length - headerBytes) return fail('bad_length', `declared ${size}, carried ${data.length - headerBytes}`);
  if (size > maxPayloadBytes) return fail('too_large', `${size} bytes > ${maxPayloadBytes}`);
  const type = typeCode === 0 ? 'opus' : typeCode === 1 ? 'json' : undefined;
  if (!type) return fail('bad_type', `type ${typeCode}`);
  return ok({ type, payload: data.subarray(headerBytes), timestampMs: version === 2 ? data.readUInt32BE(8) : 0 });
}

/**
 * One binary message from a voice server to an MQTT gateway (a connection opened with `?from=mqtt_gateway`):
 * 16 bytes of header, the timestamp at 8 (u32 BE) and the payload size at 12 (u32 BE), then the Opus payload.
 * Bytes 0-7 differ by server: protocol 2 (`u16 version=2, u16 type, u32 reserved`), or the UDP packet's layout
 * that xiaozhi-esp32-server writes (`u8 type=1, u8 0, u16 size, u32 sequence`, core/handle/sendAudioHandle.py).
 * The MQTT gateway these servers were built for (78/xiaozhi-mqtt-gateway) reads only the timestamp and the
 * size, so they are all this reads; a frame that says it is protocol 2 with type 1 (JSON) is not audio.
 */
export function decodeUpstreamAudioFrame(data: Buffer, maxPayloadBytes: number): Parsed<BinaryFrame, BinaryFrameProblem> {
  if (data.length < BINARY_V2_HEADER_BYTES) return fail('too_short', `${data.length} bytes, header is ${BINARY_V2_HEADER_BYTES}`);
  const size = data.readUInt32BE(12);
  if (size !== data.length - BINARY_V2_HEADER_BYTES) return fail('bad_length', `declared ${size}, carried ${data.length - BINARY_V2_HEADER_BYTES}`);
  if (size > maxPayloadBytes) return fail('too_large', `${size} bytes > ${maxPayloadBytes}`);
  const type: BinaryFrameType = data.readUInt16BE(0) === 2 && data.readUInt16BE(2) === TYPE_CODE.json ? 'json' : 'opus';
  return ok({ type, payload: data.subarray(BINARY_V2_HEADER_BYTES), timestampMs: data.readUInt32BE(8) });
}
