import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { checkJsonBounds, normalizeRpcError, parseDeviceFrame, parseRpc } from '../src/index.js';

const nested = (depth: number) => `${'['.repeat(depth)}${']'.repeat(depth)}`;
const limits = { maxDepth: 64, maxBytes: 64 * 1024 };

/** The nesting depth of a parsed value, the reference the scanner must agree with. */
function depthOf(v: unknown): number {
  if (typeof v !== 'object' || v === null) return 0;
  const children: unknown[] = Array.isArray(v) ? v : Object.values(v);
  return 1 + Math.max(0, ...children.map(depthOf));
}

describe('checkJsonBounds: depth and size before parsing', () => {
  it('measures the same depth as the parsed value, brackets inside strings not counted', () => {
    fc.assert(
      fc.property(fc.jsonValue({ maxDepth: 12 }), fc.integer({ min: 1, max: 14 }), (v, max) => {
        const text = JSON.stringify(v);
        expect(checkJsonBounds(text, { maxDepth: max, maxBytes: 1e9 }).ok).toBe(depthOf(v) <= max);
      }),
      { numRuns: 3000, seed: 8 },
    );
  });

  it('measures the UTF-8 size of any text, short or long, with or without brackets', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'binary', maxLength: 40 }), fc.integer({ min: 1, max: 160 }), (text, maxBytes) => {
        expect(checkJsonBounds(text, { maxDepth: 1000, maxBytes }).ok).toBe(Buffer.byteLength(text) <= maxBytes);
      }),
      { numRuns: 3000, seed: 9 },
    );
  });

  it('counts UTF-8 bytes, not UTF-16 units', () => {
    expect(checkJsonBounds('"ééé"', { maxDepth: 4, maxBytes: 8 })).toEqual({ ok: true });
    expect(checkJsonBounds('"éééé"', { maxDepth: 4, maxBytes: 8 })).toMatchObject({ ok: false, reason: 'too_large' });
    expect(checkJsonBounds('"😀😀"', { maxDepth: 4, maxBytes: 10 })).toEqual({ ok: true });
    expect(checkJsonBounds('"😀😀"', { maxDepth: 4, maxBytes: 9 })).toMatchObject({ ok: false, reason: 'too_large' });
  });

  it('rejects the 5000-level frame of issue 8 before parsing, with its own reason', () => {
    const frame = `{"type":"mcp","payload":{"jsonrpc":"2.0","method":"n","params":{"a":${nested(5000)}}}}`;
    expect(parseDeviceFrame(frame, limits)).toMatchObject({ ok: false, reason: 'too_deep' });
    expect(parseDeviceFrame(`{"type":"mcp","payload":{"jsonrpc":"2.0","method":"n","params":{"a":${nested(60)}}}}`, limits).ok).toBe(true);
    expect(parseRpc(`{"jsonrpc":"2.0","method":"n","params":${nested(5000)}}`)).toMatchObject({ ok: false, code: -32700 });
  });

  it('a frame that is only repairable is bounded too', () => {
    // Unescaped quotes (the reference firmware's error messages) followed by deep nesting outside any string.
    const frame = `{"session_id":"s","type":"mcp","payload":{"jsonrpc":"2.0","id":1,"error":{"message":"x" ${nested(200)} "y"}}}`;
    expect(parseDeviceFrame(frame, limits)).toMatchObject({ ok: false, reason: 'too_deep' });
  });
});

describe('device data is never serialized unguarded', () => {
  it('an error message nested 5000 levels deep becomes text, without throwing', () => {
    let deep: unknown = 'x';
    for (let i = 0; i < 5000; i++) deep = [deep];
    // Even past the parse boundary (a value built in memory), messageText does not throw.
    let cyclic: Record<string, unknown> = {};
    cyclic = { self: cyclic };
    cyclic['self'] = cyclic;
    for (const message of [deep, cyclic, 10n]) {
      const n = normalizeRpcError({ message });
      expect(typeof n.message).toBe('string');
    }
  });
});
