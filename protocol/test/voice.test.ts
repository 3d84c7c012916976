import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  buildUdpServerHello,
  decodeBinaryFrame,
  decodeUpstreamAudioFrame,
  encodeBinaryFrame,
  newUdpSessionKeys,
  openUdpPacket,
  parseUdpHeader,
  sealUdpPacket,
  udpSsrc,
  upstreamAuthorization,
  verifyDeviceToken,
  type BinaryFrameType,
  type BinaryProtocolVersion,
} from '../src/index.js';

const dir = fileURLToPath(new URL('../vectors/', import.meta.url));
const hex = (s: string) => Buffer.from(s, 'hex');

interface UdpVectors {
  key: string;
  nonce: string;
  cases: Array<{
    name: string;
    kind: 'valid' | 'quirky' | 'invalid';
    input: { timestamp?: number; sequence?: number; payload?: string; packet?: string };
    expect: { packet?: string; ssrc?: number; reason?: string };
  }>;
}
const udp = JSON.parse(readFileSync(dir + 'voice-udp.json', 'utf8')) as UdpVectors;

describe('voice-udp vectors (AES-128-CTR checked against openssl)', () => {
  it.each(udp.cases.map((c) => [`${c.kind}: ${c.name}`, c] as const))('%s', (_, c) => {
    const key = hex(udp.key);
    if (c.kind === 'invalid') {
      expect(parseUdpHeader(hex(c.input.packet!))).toMatchObject({ ok: false, reason: c.expect.reason });
      return;
    }
    const { timestamp, sequence, payload } = c.input as Required<typeof c.input>;
    const packet = sealUdpPacket(key, hex(udp.nonce), { timestamp, sequence }, hex(payload));
    expect(packet.toString('hex')).toBe(c.expect.packet);
    const h = parseUdpHeader(packet);
    expect(h).toEqual({ ok: true, value: { flags: 0, payloadLength: payload.length / 2, ssrc: c.expect.ssrc, timestamp, sequence } });
    expect(udpSsrc(packet)).toBe(c.expect.ssrc);
    expect(openUdpPacket(key, packet).toString('hex')).toBe(payload);
  });
});

interface BinaryVectors {
  cases: Array<{
    name: string;
    kind: 'valid' | 'invalid';
    input: { version: BinaryProtocolVersion; type?: BinaryFrameType; timestampMs?: number; payload?: string; frame?: string; maxPayload?: number };
    expect: { frame?: string; reason?: string };
  }>;
}
const bin = JSON.parse(readFileSync(dir + 'voice-binary.json', 'utf8')) as BinaryVectors;

describe('voice-binary vectors', () => {
  it.each(bin.cases.map((c) => [`${c.kind}: ${c.name}`, c] as const))('%s', (_, c) => {
    const i = c.input;
    if (c.kind === 'invalid') {
      expect(decodeBinaryFrame(i.version, hex(i.frame!), i.maxPayload!)).toMatchObject({ ok: false, reason: c.expect.reason });
      return;
    }
    const frame = encodeBinaryFrame(i.version, { type: i.type!, payload: hex(i.payload!), timestampMs: i.timestampMs! });
    expect(frame.toString('hex')).toBe(c.expect.frame);
    const d = decodeBinaryFrame(i.version, frame, 4096);
    expect(d.ok).toBe(true);
    if (!d.ok) return;
    expect({ type: d.value.type, ts: d.value.timestampMs, payload: d.value.payload.toString('hex') }).toEqual({
      type: i.type,
      ts: i.timestampMs,
      payload: i.payload,
    });
  });
});

describe('voice framing properties', () => {
  it('binary frames round-trip for every version, type and payload', () => {
    fc.assert(
      fc.property(
        fc.constantFrom<BinaryProtocolVersion>(1, 2, 3),
        fc.constantFrom<BinaryFrameType>('opus', 'json'),
        fc.uint8Array({ maxLength: 600 }),
        fc.nat({ max: 0xffffffff }),
        (version, type, payload, ts) => {
          const d = decodeBinaryFrame(version, encodeBinaryFrame(version, { type, payload, timestampMs: ts }), 600);
          expect(d.ok).toBe(true);
          if (!d.ok) return;
          expect(Buffer.from(d.value.payload).equals(Buffer.from(payload))).toBe(true);
          if (version !== 1) expect(d.value.type).toBe(type);
          if (version === 2) expect(d.value.timestampMs).toBe(ts);
        },
      ),
      { numRuns: 500, seed: 12 },
    );
  });

  it('decodeBinaryFrame never throws on arbitrary bytes', () => {
    fc.assert(
      fc.property(fc.constantFrom<BinaryProtocolVersion>(1, 2, 3), fc.uint8Array({ maxLength: 64 }), (v, bytes) => {
        decodeBinaryFrame(v, Buffer.from(bytes), 32);
      }),
      { numRuns: 1000, seed: 3 },
    );
  });

  it("an MQTT gateway's downlink frame: protocol 2, or xiaozhi-esp32-server's UDP-like header; only timestamp and size are read", () => {
    const opus = Buffer.from([0x58, 1, 2, 3, 4]);
    const v2 = encodeBinaryFrame(2, { payload: opus, timestampMs: 77 });
    expect(decodeUpstreamAudioFrame(v2, 64)).toMatchObject({ ok: true, value: { type: 'opus', timestampMs: 77, payload: opus } });
    // type 1, flags 0, u16 size, u32 sequence, u32 timestamp, u32 size (core/handle/sendAudioHandle.py)
    const x = Buffer.concat([hex('01000005' + '00000009' + '0000004d' + '00000005'), opus]);
    expect(decodeBinaryFrame(2, x, 64).ok).toBe(false); // read as protocol 2, bytes 2-3 are a type it does not know
    expect(decodeUpstreamAudioFrame(x, 64)).toMatchObject({ ok: true, value: { type: 'opus', timestampMs: 77, payload: opus } });
    expect(decodeUpstreamAudioFrame(encodeBinaryFrame(2, { type: 'json', payload: opus }), 64)).toMatchObject({ ok: true, value: { type: 'json' } });
    expect(decodeUpstreamAudioFrame(x.subarray(0, 20), 64)).toMatchObject({ ok: false, reason: 'bad_length' });
    expect(decodeUpstreamAudioFrame(x, 4)).toMatchObject({ ok: false, reason: 'too_large' });
    expect(decodeUpstreamAudioFrame(x.subarray(0, 15), 64)).toMatchObject({ ok: false, reason: 'too_short' });
  });

  it('UDP packets round-trip with a fresh session key, and parseUdpHeader never throws', () => {
    fc.assert(
      fc.property(
        fc.uint8Array({ maxLength: 400 }),
        fc.nat({ max: 0xffffffff }),
        fc.nat({ max: 0xffffffff }),
        fc.nat({ max: 0xffffffff }),
        (opus, ssrc, ts, seq) => {
          const { key, nonce } = newUdpSessionKeys(ssrc);
          const p = sealUdpPacket(key, nonce, { timestamp: ts, sequence: seq }, opus);
          expect(parseUdpHeader(p)).toMatchObject({ ok: true, value: { ssrc, timestamp: ts, sequence: seq, payloadLength: opus.length } });
          expect(openUdpPacket(key, p).equals(Buffer.from(opus))).toBe(true);
        },
      ),
      { numRuns: 300, seed: 5 },
    );
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 40 }), (b) => void parseUdpHeader(Buffer.from(b))),
      { numRuns: 1000, seed: 6 },
    );
  });

  it('session keys are fresh per session; the nonce names the ssrc with type 1', () => {
    const a = newUdpSessionKeys(0x01020304);
    const b = newUdpSessionKeys(0x01020304);
    expect(a.key.equals(b.key)).toBe(false);
    expect(a.nonce.toString('hex')).toBe('01000000010203040000000000000000');
  });
});

describe('voice hellos and upstream auth', () => {
  it('the UDP server hello carries every field the firmware requires, key and nonce as 32 hex digits', () => {
    const keys = newUdpSessionKeys(7);
    const h = buildUdpServerHello('s-1', { format: 'opus', sample_rate: 24000, channels: 1, frame_duration: 60 }, { server: '10.0.0.2', port: 8884, ...keys });
    expect(h).toMatchObject({ type: 'hello', transport: 'udp', session_id: 's-1', audio_params: { sample_rate: 24000 } });
    expect(h.udp).toEqual({ server: '10.0.0.2', port: 8884, encryption: 'aes-128-ctr', key: keys.key.toString('hex'), nonce: keys.nonce.toString('hex') });
    expect(h.udp.key).toMatch(/^[0-9a-f]{32}$/);
  });

  it('Authorization is Bearer + static token, or an HMAC device token the xiaozhi server verifies', () => {
    expect(upstreamAuthorization({ token: 'abc' }, 'c', 'aa:bb:cc:dd:ee:ff', 1)).toBe('Bearer abc');
    expect(upstreamAuthorization({}, 'c', 'aa:bb:cc:dd:ee:ff', 1)).toBeUndefined();
    const h = upstreamAuthorization({ hmacSecret: 'k' }, 'uuid-1', 'aa:bb:cc:dd:ee:ff', 1_763_700_000)!;
    expect(h.startsWith('Bearer ')).toBe(true);
    expect(verifyDeviceToken('k', h.slice(7), 'uuid-1', 'aa:bb:cc:dd:ee:ff', { nowSeconds: 1_763_700_001, maxAgeSeconds: 60 })).toEqual({
      ok: true,
      issuedAt: 1_763_700_000,
    });
  });
});
