import fastJsonStringify from 'fast-json-stringify';
import { describe, expect, it } from 'vitest';
import { plainCallResultJson } from '../../src/api/call-result-json.js';
import { CallResult, jsonSchema } from '../../src/api/schemas.js';
import type { CallOutcome } from '../../src/devices/device-handle.js';

/** What the route's response schema makes of a result (the route sends `{...out, isError: out.isError ?? false}`). */
const bySchema = fastJsonStringify(jsonSchema(CallResult, 'output') as never);
const viaSchema = (out: CallOutcome) => bySchema({ ...out, isError: out.isError ?? false });

describe('plainCallResultJson', () => {
  const text = (t: string) => ({ type: 'text' as const, text: t });
  it.each<[string, CallOutcome]>([
    ['one text item', { content: [text('true')], durationMs: 1.25 }],
    ['isError true', { content: [text('no such volume')], isError: true, durationMs: 0 }],
    ['isError false', { content: [text('ok')], isError: false, durationMs: 12.5 }],
    ['no content', { content: [], durationMs: 3 }],
    ['several items', { content: [text('a'), text('b'), text('')], durationMs: 1e-7 }],
    ['quotes, controls, U+2028, lone surrogates, emoji', { content: [text('"\\\n\t\u0001\u2028\ud800 \udc00 😀 中文')], durationMs: 1234567.89 }],
  ])('writes the bytes the response schema writes: %s', (_name, out) => {
    const json = plainCallResultJson(out);
    expect(json).toBe(viaSchema(out));
    expect(JSON.parse(json!)).toEqual(JSON.parse(viaSchema(out)));
  });

  it.each<[string, unknown]>([
    ['structuredContent', { content: [text('x')], structuredContent: { a: 1 }, durationMs: 1 }],
    ['another key', { content: [text('x')], _meta: {}, durationMs: 1 }],
    ['an image item', { content: [{ type: 'image', data: 'AA==', mimeType: 'image/png' }], durationMs: 1 }],
    ['a text item with more keys', { content: [{ type: 'text', text: 'x', annotations: {} }], durationMs: 1 }],
    ['a text item without text', { content: [{ type: 'text' }], durationMs: 1 }],
    ['a non-finite duration', { content: [text('x')], durationMs: Number.NaN }],
  ])('leaves any other shape to the schema: %s', (_name, out) => {
    expect(plainCallResultJson(out as CallOutcome)).toBeUndefined();
  });
});
