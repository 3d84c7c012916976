import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { describe, expect, it, vi } from 'vitest';
import { SchemaValidators } from '../../src/schemas/validators.js';

const SCRIPT = fileURLToPath(new URL('../fixtures/validator-heap.ts', import.meta.url));
const limits = { maxBytes: 64 * 1024, maxDepth: 32 };

describe('compiled validators: memory bound (issue 20 item 7)', () => {
  it('compiling 15× the cache in distinct schemas keeps the heap (after GC) near what one full cache costs', async () => {
    // A child process with --expose-gc: the heap is measured after collection, in the same process as its baseline.
    const { stdout } = await promisify(execFile)(process.execPath, ['--expose-gc', '--import', 'tsx', SCRIPT], {
      env: { ...process.env, MAX_CACHED: '256', TOTAL: '4000' },
      timeout: 240_000,
    });
    const m = JSON.parse(stdout) as { start: number; baseline: number; end: number; size: number };
    expect(m.size).toBe(256);
    const fullCache = m.baseline - m.start;
    // Before the fix the heap grew with every compile (~70 MiB here, over 10× one full cache); now at most
    // three ajv instances' worth is held. Generous: a memory bound, not a timing one.
    expect(m.end - m.start).toBeLessThan(4 * fullCache);
  }, 300_000);

  it('a schema used all along keeps validating while instances come and go', () => {
    const v = new SchemaValidators({ limits, maxCached: 4, compilesPerInstance: 8 });
    const hot = { type: 'object', properties: { x: { type: 'integer', maximum: 5 } } };
    for (let i = 0; i < 40; i++) {
      expect(v.check(hot, { x: 9 })?.[0]?.argument).toBe('x');
      expect(v.check({ type: 'object', properties: { y: { type: 'integer', minimum: i } } }, { y: i - 1 })?.[0]?.argument).toBe('y');
      const held = (v as unknown as { generations: unknown[] }).generations.length;
      expect(held).toBeLessThanOrEqual(3);
    }
    expect(v.size).toBe(4);
  });
});

describe('a validator kept with its schema’s holder (checkKept, a catalog tool’s)', () => {
  it('answers as check does, found once while nothing is evicted, and again after an eviction; invisible on the holder', () => {
    const v = new SchemaValidators({ limits, maxCached: 2, compilesPerInstance: 8 });
    const tool = { name: 't', inputSchema: { type: 'object', properties: { x: { type: 'integer', maximum: 5 } }, required: ['x'] } };
    const json = JSON.stringify(tool);
    const lookups = () => (v as unknown as { keys: WeakMap<object, string> }).keys;
    const spy = vi.spyOn(v, 'validatorFor');
    for (let i = 0; i < 3; i++) {
      expect(v.checkKept(tool, { x: 9 })).toEqual(v.check(tool.inputSchema, { x: 9 }));
      expect(v.checkKept(tool, { x: 1 })).toBeUndefined();
    }
    // One lookup of its own, and one per `check` above.
    expect(spy.mock.calls.filter(([s]) => s === tool.inputSchema).length).toBe(1 + 3);
    // Two other schemas push it out of the cache: the next call finds it (compiled again) and still judges the same.
    v.check({ type: 'object', properties: { a: { type: 'string' } } }, {});
    v.check({ type: 'object', properties: { b: { type: 'string' } } }, {});
    spy.mockClear();
    expect(v.checkKept(tool, {})?.[0]).toEqual({ argument: 'x', message: 'is required' });
    expect(spy).toHaveBeenCalledTimes(1);
    expect(lookups().has(tool.inputSchema)).toBe(true);
    // What the holder keeps is not among its keys: its JSON, copies and comparisons are unchanged.
    expect(JSON.stringify(tool)).toBe(json);
    expect(Object.keys({ ...tool })).toEqual(['name', 'inputSchema']);
    // A second set of validators does not take the first one's kept validator.
    const other = new SchemaValidators({ limits, maxCached: 2 });
    expect(other.checkKept(tool, { x: 9 })?.[0]?.argument).toBe('x');
  });
});
