import { CallToolResultSchema, normalizeDeviceContent } from '@voxgate/protocol';
import { describe, expect, it } from 'vitest';
import { plainTextResult } from '../../src/devices/tool-call.js';

/** What the schema path makes of a result (CallToolResultSchema, then normalizeDeviceContent). */
function viaSchema(result: unknown): unknown {
  const parsed = CallToolResultSchema.safeParse(result);
  if (!parsed.success) return 'malformed';
  const content = normalizeDeviceContent(parsed.data.content);
  return { ...parsed.data, content: content.content, malformed: content.malformed };
}

describe('plainTextResult (the fast path of readCallResult)', () => {
  it('reads the usual text replies exactly as the schema path does', () => {
    for (const result of [
      { content: [{ type: 'text', text: 'true' }], isError: false },
      { content: [{ type: 'text', text: 'true' }] },
      {
        content: [
          { type: 'text', text: '' },
          { type: 'text', text: 'two' },
        ],
        isError: true,
      },
      { content: [] },
    ]) {
      const fast = plainTextResult(JSON.parse(JSON.stringify(result)));
      expect(fast).toBeDefined();
      expect({ ...fast, malformed: 0 }).toEqual(viaSchema(result));
      expect(Object.keys(fast!)).toEqual(Object.keys(viaSchema(result) as object).filter((k) => k !== 'malformed'));
    }
  });

  it('leaves every other shape to the schema path', () => {
    for (const result of [
      null,
      'true',
      [],
      {},
      { content: 'text' },
      { content: [{ type: 'text', text: 1 }] },
      { content: [{ type: 'text', text: 'a', annotations: { priority: 1 } }] },
      { content: [{ type: 'image', data: 'AA==', mimeType: 'image/png' }] },
      { content: [{ type: 'text', text: 'a' }], isError: 'no' },
      { content: [{ type: 'text', text: 'a' }], structuredContent: { a: 1 } },
      { content: [{ type: 'text', text: 'a' }], extra: true },
      { content: [null] },
      { content: Array.from({ length: 257 }, () => ({ type: 'text', text: 'a' })) },
      JSON.parse('{"content":[],"__proto__":{"x":1}}'),
    ])
      expect(plainTextResult(result), JSON.stringify(result)).toBeUndefined();
  });

  it("uses the reply's own objects when their keys are in the schema's order, and copies them in any other order", () => {
    const ordered = JSON.parse('{"content":[{"type":"text","text":"true"}],"isError":false}') as unknown;
    expect(plainTextResult(ordered)).toBe(ordered);
    for (const text of ['{"isError":false,"content":[{"type":"text","text":"true"}]}', '{"content":[{"text":"true","type":"text"}]}']) {
      const result = JSON.parse(text) as unknown;
      const fast = plainTextResult(result);
      expect(fast).not.toBe(result);
      expect({ ...fast, malformed: 0 }).toEqual(viaSchema(result));
      expect(Object.keys(fast!)).toEqual(Object.keys(viaSchema(result) as object).filter((k) => k !== 'malformed'));
      expect(Object.keys(fast!.content[0]!)).toEqual(['type', 'text']);
    }
  });
});
