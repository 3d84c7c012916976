import { randomBytes } from 'node:crypto';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { UdpCrypter, newUdpSessionKeys, openUdpPacket, sealUdpPacket } from '../src/index.js';

/** UdpCrypter (one ECB context per session) must give the same bytes as a CTR cipher per packet. */
describe('UdpCrypter', () => {
  it('seals and opens exactly like sealUdpPacket / openUdpPacket, for any length, timestamp and sequence', () => {
    fc.assert(
      fc.property(
        fc.uint8Array({ minLength: 16, maxLength: 16 }),
        fc.integer({ min: 0, max: 0xffffffff }),
        fc.integer({ min: 0, max: 0xffffffff }),
        fc.integer({ min: 0, max: 0xffffffff }),
        fc.uint8Array({ minLength: 0, maxLength: 1500 }),
        (key, ssrc, timestamp, sequence, payload) => {
          const k = Buffer.from(key);
          const { nonce } = newUdpSessionKeys(ssrc);
          const c = new UdpCrypter(k);
          const sealed = c.seal(nonce, { timestamp, sequence }, payload);
          expect(sealed.equals(sealUdpPacket(k, nonce, { timestamp, sequence }, payload))).toBe(true);
          const out = Buffer.alloc(payload.length + 3);
          c.openInto(sealed, out, 3);
          expect(out.subarray(3).equals(openUdpPacket(k, sealed))).toBe(true);
          expect(out.subarray(3).equals(Buffer.from(payload))).toBe(true);
        },
      ),
      { numRuns: 300 },
    );
  });

  it('carries the counter across bytes like CTR does (sequence and timestamp at their maximum)', () => {
    const key = randomBytes(16);
    const nonce = Buffer.alloc(16, 0xff);
    nonce[0] = 0x01;
    const c = new UdpCrypter(key);
    for (const len of [1, 15, 16, 17, 160, 4096]) {
      const payload = randomBytes(len);
      const fields = { timestamp: 0xffffffff, sequence: 0xffffffff };
      expect(c.seal(nonce, fields, payload).equals(sealUdpPacket(key, nonce, fields, payload))).toBe(true);
    }
  });

  it('keeps sessions apart: each crypter uses its own key', () => {
    const [k1, k2] = [randomBytes(16), randomBytes(16)];
    const { nonce } = newUdpSessionKeys(7);
    const payload = randomBytes(160);
    const a = new UdpCrypter(k1).seal(nonce, { timestamp: 1, sequence: 1 }, payload);
    const b = new UdpCrypter(k2).seal(nonce, { timestamp: 1, sequence: 1 }, payload);
    expect(a.equals(b)).toBe(false);
    expect(openUdpPacket(k1, a).equals(payload)).toBe(true);
    expect(openUdpPacket(k2, b).equals(payload)).toBe(true);
  });
});
