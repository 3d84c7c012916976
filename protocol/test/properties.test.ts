import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  normalizeDeviceId,
  normalizeRpcError,
  parseDeviceFrame,
  parseMqttClientId,
  parseRpc,
  repairUnescapedErrorMessage,
  verifyDeviceToken,
  encodeMcpFrame,
} from '../src/index.js';

const runs = { numRuns: 2000 };

describe('parsers never throw on arbitrary input', () => {
  it('parseDeviceFrame on any string and any JSON text', () => {
    fc.assert(
      fc.property(fc.oneof(fc.string(), fc.json(), fc.string({ unit: 'grapheme' })), (s) => {
        const r = parseDeviceFrame(s);
        expect(typeof r.ok).toBe('boolean');
      }),
      runs,
    );
  });
  it('parseRpc on any string and any JSON text', () => {
    fc.assert(
      fc.property(fc.oneof(fc.string(), fc.json()), (s) => {
        const r = parseRpc(s);
        if (!r.ok) expect([-32700, -32600]).toContain(r.code);
      }),
      runs,
    );
  });
  it('normalizeRpcError on any error object', () => {
    fc.assert(
      fc.property(fc.record({ code: fc.option(fc.integer(), { nil: undefined }), message: fc.anything() }, { requiredKeys: [] }), (e) => {
        const n = normalizeRpcError(e);
        expect(Number.isInteger(n.code)).toBe(true);
        expect(typeof n.message).toBe('string');
      }),
      runs,
    );
  });
  it('identity, id and token parsers on any string', () => {
    fc.assert(
      fc.property(fc.string(), fc.string(), (a, b) => {
        parseMqttClientId(a);
        normalizeDeviceId(a);
        repairUnescapedErrorMessage(a);
        expect(verifyDeviceToken('k', a, b, b, { nowSeconds: 0, maxAgeSeconds: 1 }).ok).toBe(false);
      }),
      runs,
    );
  });
});

describe('round trips', () => {
  it('any JSON payload survives encodeMcpFrame -> parseDeviceFrame', () => {
    fc.assert(
      fc.property(fc.string({ maxLength: 40 }), fc.dictionary(fc.string(), fc.jsonValue()), (sid, payload) => {
        const r = parseDeviceFrame(encodeMcpFrame(sid, payload));
        expect(r.ok).toBe(true);
        if (r.ok) expect(r.value.frame['payload']).toEqual(JSON.parse(JSON.stringify(payload)));
      }),
      runs,
    );
  });
  it('an unescaped device error message is recovered exactly', () => {
    // The firmware pastes the message raw; whatever text it holds (quotes, braces), the repair gets it back.
    fc.assert(
      fc.property(
        fc.string({ maxLength: 80 }).filter((s) => !s.includes('\\')),
        fc.nat(1000),
        (msg, id) => {
          const raw = `{"session_id":"s","type":"mcp","payload":{"jsonrpc":"2.0","id":${id},"error":{"message":"${msg}"}}}`;
          const r = parseDeviceFrame(raw);
          expect(r.ok).toBe(true);
          if (r.ok) expect((r.value.frame['payload'] as { error: { message: string } }).error.message).toBe(msg);
        },
      ),
      runs,
    );
  });
  it('every MAC spelling normalises to the same id', () => {
    fc.assert(
      fc.property(fc.uint8Array({ minLength: 6, maxLength: 6 }), fc.constantFrom(':', '_', '-', ''), fc.boolean(), (bytes, sep, upper) => {
        const hex = [...bytes].map((b) => b.toString(16).padStart(2, '0'));
        const spelled = hex.join(sep);
        expect(normalizeDeviceId(upper ? spelled.toUpperCase() : spelled)).toBe(hex.join(':'));
      }),
      runs,
    );
  });
});
