import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { deeperThan, MAX_JSON_DEPTH } from '../../src/facade/jsonrpc-message.js';

/** The depth check /mcp runs on every request body, against a plain reference (recursion depth of the data). */
const depth = (v: unknown): number =>
  typeof v !== 'object' || v === null ? 0 : 1 + Math.max(0, ...(Array.isArray(v) ? v : Object.values(v as object)).map(depth));
const nested = (n: number, inner: unknown = 1): unknown => {
  let v = inner;
  for (let i = 0; i < n; i++) v = i % 2 ? [v] : { k: v };
  return v;
};

describe('deeperThan', () => {
  it('agrees with the nesting depth of any JSON value', () => {
    fc.assert(
      fc.property(fc.jsonValue({ maxDepth: 8 }), fc.integer({ min: 0, max: 9 }), (v, max) => {
        expect(deeperThan(v, max)).toBe(depth(v) > max);
      }),
      { numRuns: 1000 },
    );
  });

  it('refuses one level past the bound, and a hostile depth without overflowing the stack', () => {
    expect(deeperThan(nested(MAX_JSON_DEPTH), MAX_JSON_DEPTH)).toBe(false);
    expect(deeperThan(nested(MAX_JSON_DEPTH + 1), MAX_JSON_DEPTH)).toBe(true);
    expect(deeperThan({ a: 1, b: [2, { c: nested(MAX_JSON_DEPTH - 3) }] }, MAX_JSON_DEPTH)).toBe(false);
    expect(deeperThan(JSON.parse('['.repeat(100_000) + ']'.repeat(100_000)), MAX_JSON_DEPTH)).toBe(true);
    expect(deeperThan(nested(200_000), MAX_JSON_DEPTH)).toBe(true);
  });
});
