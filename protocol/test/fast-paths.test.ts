import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { DeviceFrameSchema, RpcResultSchema, classifyRpc, envelopeFits, normalizeDeviceId, type JsonObject } from '../src/index.js';

/** The hot path's hand-written checks stand in for zod schemas and regexes: each must agree with what it replaces. */
const runs = { numRuns: 3000 };

const typeValue = fc.oneof(fc.string({ maxLength: 70 }), fc.constantFrom('', 'mcp', 'hello', 'x'.repeat(64), 'x'.repeat(65)), fc.integer(), fc.constant(null));
const sessionValue = fc.oneof(
  fc.string({ maxLength: 300 }),
  fc.constantFrom('', 'y'.repeat(256), 'y'.repeat(257)),
  fc.constant(null),
  fc.integer(),
  fc.boolean(),
  fc.dictionary(fc.string(), fc.integer()),
);
const envelope = fc.record({ type: typeValue, session_id: sessionValue, payload: fc.jsonValue() }, { requiredKeys: [] });

describe('envelopeFits', () => {
  it('accepts exactly what DeviceFrameSchema accepts', () => {
    fc.assert(
      fc.property(envelope, (v) => {
        expect(envelopeFits(v as JsonObject)).toBe(DeviceFrameSchema.safeParse(v).success);
      }),
      runs,
    );
  });
});

describe('classifyRpc on a result', () => {
  const id = fc.oneof(fc.integer(), fc.double(), fc.string({ maxLength: 300 }), fc.constant('z'.repeat(257)), fc.constant(null), fc.boolean());
  it('classifies and outputs as RpcResultSchema does', () => {
    fc.assert(
      fc.property(fc.record({ jsonrpc: fc.constant('2.0'), id, result: fc.jsonValue(), extra: fc.integer() }, { requiredKeys: ['jsonrpc', 'result'] }), (v) => {
        const zod = RpcResultSchema.safeParse(v);
        const c = classifyRpc(v);
        expect(c.ok).toBe(zod.success);
        if (c.ok && zod.success) expect(c.message).toStrictEqual({ kind: 'response', msg: zod.data });
      }),
      runs,
    );
  });
});

describe('normalizeDeviceId', () => {
  const MAC_LOOSE = /^[0-9a-f]{2}([:_-]?)[0-9a-f]{2}(?:\1[0-9a-f]{2}){4}$/i;
  const byRegex = (input: string) => {
    const s = input.trim();
    if (s.length > 17 || !MAC_LOOSE.test(s)) return undefined;
    return s.replace(/[:_-]/g, '').toLowerCase().match(/../g)!.join(':');
  };
  const hex = fc.constantFrom(...'0123456789abcdefABCDEFgz'.split(''));
  const sep = fc.constantFrom(':', '-', '_', '', ';', ' ');
  const mac = fc
    .tuple(fc.array(fc.tuple(hex, hex), { minLength: 5, maxLength: 7 }), sep, fc.constantFrom('', ' '))
    .map(([pairs, s, pad]) => pad + pairs.map(([a, b]) => a + b).join(s) + pad);
  const canonical = fc
    .array(fc.constantFrom(...'0123456789abcdef'.split('')), { minLength: 12, maxLength: 12 })
    .map((h) => h.join('').replace(/(..)(?!$)/g, '$1:'));
  it('gives what the regular expressions give, canonical or not', () => {
    fc.assert(
      fc.property(fc.oneof(canonical, mac, fc.string({ maxLength: 20 })), (s) => {
        expect(normalizeDeviceId(s)).toBe(byRegex(s));
      }),
      runs,
    );
  });
});
