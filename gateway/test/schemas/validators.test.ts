import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
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
