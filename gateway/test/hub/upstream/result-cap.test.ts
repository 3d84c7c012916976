import { describe, expect, it } from 'vitest';
import { messageBound, overCap, resultSize } from '../../../src/hub/upstream/result-cap.js';

const text = (n: number) => ({ type: 'text' as const, text: 'x'.repeat(n) });

describe('the result cap', () => {
  it('counts the larger of content and structuredContent, not their sum', () => {
    const content = [text(900)];
    const r = { content, structuredContent: { file: 'x'.repeat(950) } };
    const size = resultSize(r);
    expect(size.part).toBe('structuredContent');
    expect(size.bytes).toBe(Buffer.byteLength(JSON.stringify(r.structuredContent)));
    expect(resultSize({ content }).part).toBe('content');
    expect(resultSize({ content }).bytes).toBe(Buffer.byteLength(JSON.stringify(content)));
  });

  it('counts _meta too, and utf-8 bytes, not characters', () => {
    const base = resultSize({ content: [text(10)] }).bytes;
    expect(resultSize({ content: [text(10)], _meta: { a: 1 } }).bytes).toBe(base + Buffer.byteLength('{"a":1}'));
    expect(resultSize({ content: [{ type: 'text', text: 'é' }] }).bytes).toBe(Buffer.byteLength('[{"type":"text","text":"é"}]'));
  });

  it('passes a result at the cap and refuses one over it, naming the part and the setting', () => {
    const r = { content: [text(100)] };
    const bytes = resultSize(r).bytes;
    expect(overCap(r, bytes)).toBeUndefined();
    expect(overCap(r, bytes - 1)).toBe(`its content was ${bytes} bytes, over the limit of ${bytes - 1} bytes (mcp.maxResultBytes)`);
    expect(overCap({ content: [], structuredContent: { v: 'x'.repeat(100) } }, 10)).toMatch(/^its structuredContent was \d+ bytes/);
  });

  it('bounds a stdio message at twice the cap plus room for the envelope', () => {
    expect(messageBound(1024 * 1024)).toBe(2 * 1024 * 1024 + 64 * 1024);
  });
});
