import { referenceResultTail } from '@voxgate/protocol';
import { describe, expect, it } from 'vitest';
import { PageReader, resultTail } from '../../src/devices/page-reader.js';
import { toolBytes, ToolsPageCache } from '../../src/devices/tools-page-cache.js';
import { createMetrics } from '../../src/metrics.js';
import { silentLog, testSettings } from '../../../test/support/device-parts.js';

describe('resultTail', () => {
  it('is the reference layout tail of the id, the same string for every walk of a small id', () => {
    for (const id of [0, 1, 2, 3, 17, 255, 256, 1000, 2 ** 31 - 1, -1]) expect(resultTail(id)).toBe(referenceResultTail(id));
    // Kept once per small id: every device's walk reads the same string (no text made per page).
    expect(Object.is(resultTail(2), resultTail(2))).toBe(true);
  });
});

describe('PageReader', () => {
  const reader = () =>
    new PageReader({
      pages: new ToolsPageCache(),
      settings: testSettings(),
      transport: 'websocket',
      metrics: createMetrics(),
      log: silentLog,
      badInput: { note: () => undefined },
    });
  let deep: Record<string, unknown> = { type: 'object' };
  for (let i = 0; i < 20; i++) deep = { type: 'object', properties: { a: deep } };
  const kept = { name: 'kept', inputSchema: { type: 'object' } };
  const leftOut = { name: 'deep', inputSchema: deep };
  const page = { tools: [kept, leftOut], nextCursor: 'kept', pad: 'x'.repeat(1000) };

  it('counts what a page listed (tools left out, other members) apart from what it keeps: its tools and cursor only', () => {
    const p = reader().page(page, 1);
    expect(p.result).toEqual({ tools: [kept], nextCursor: 'kept' });
    expect(p.bytes).toBe(toolBytes(kept));
    expect(p.listed).toBe(toolBytes(kept) + toolBytes(leftOut) + Buffer.byteLength(JSON.stringify({ pad: page.pad })));
    // A page with nothing but its tools listed what it keeps.
    const plain = reader().page({ tools: [kept] }, 1);
    expect(plain.listed).toBe(plain.bytes);
  });

  it('reads a reference-layout reply the same way, and its cached page says what it listed', () => {
    const r = reader();
    const text = `{"session_id":"s","type":"mcp","payload":{"jsonrpc":"2.0","id":3,"result":${JSON.stringify(page)}}}`;
    const p = r.read(text, 3);
    expect(p).toMatchObject({ result: { tools: [kept], nextCursor: 'kept' }, bytes: toolBytes(kept) });
    expect(p!.listed).toBe(reader().page(page, 1).listed);
    expect(p!.result).not.toHaveProperty('pad');
  });
});
