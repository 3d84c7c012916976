import { describe, expect, it } from 'vitest';
import { metricValue } from '../../../test/support/device-parts.js';
import { CatalogBudget } from '../../src/devices/catalog-budget.js';
import { ToolCatalog } from '../../src/devices/catalog.js';
import { createMetrics } from '../../src/metrics.js';

/** A catalog of `n` tools named after `prefix`, ~110 bytes each. */
const catalog = (prefix: string, n: number) =>
  ToolCatalog.from(Array.from({ length: n }, (_, i) => ({ name: `${prefix}.${i}`, description: 'd'.repeat(40), inputSchema: { type: 'object' } })));

describe('CatalogBudget', () => {
  it('counts a catalog once however many hold it, and only once the last holder lets go does it give its bytes back', () => {
    const fw = catalog('fw', 10);
    const budget = new CatalogBudget(fw.bytes * 1.5);
    const [a, b] = [{}, {}];
    expect(budget.take(a, fw)).toBe(true);
    expect(budget.take(b, fw)).toBe(true);
    expect(budget.bytes).toBe(fw.bytes);
    budget.release(a);
    budget.release(a); // twice: nothing more
    expect(budget.bytes).toBe(fw.bytes);
    budget.release(b);
    expect(budget.bytes).toBe(0);
  });

  it('refuses a catalog that does not fit and changes nothing: holders keep theirs', () => {
    const first = catalog('first', 10);
    const other = catalog('other', 10);
    const budget = new CatalogBudget(first.bytes + other.bytes - 1);
    const [a, b] = [{}, {}];
    expect(budget.take(a, first)).toBe(true);
    expect(budget.take(b, other)).toBe(false);
    expect(budget.bytes).toBe(first.bytes);
    // The one refused holds nothing: releasing it gives back nothing of another's.
    budget.release(b);
    expect(budget.bytes).toBe(first.bytes);
    // A holder of a catalog already held is never refused: it costs nothing.
    expect(budget.take(b, first)).toBe(true);
    expect(budget.bytes).toBe(first.bytes);
  });

  it('a holder replacing its catalog gives the old bytes back, and may use them for the new one when it alone held them', () => {
    const big = catalog('big', 20);
    const bigger = catalog('bigger', 22);
    const small = catalog('small', 2);
    const budget = new CatalogBudget(bigger.bytes + small.bytes);
    const [a, b] = [{}, {}];
    expect(budget.take(a, big)).toBe(true);
    expect(budget.take(b, small)).toBe(true);
    // big + bigger is over the budget, but big goes as bigger comes.
    expect(budget.take(a, bigger)).toBe(true);
    expect(budget.bytes).toBe(bigger.bytes + small.bytes);
    expect(budget.take(a, small)).toBe(true);
    expect(budget.bytes).toBe(small.bytes);
    // When another holds the old catalog too, it stays: no room is freed for the new one.
    expect(budget.take(a, bigger)).toBe(true);
    expect(budget.take(b, bigger)).toBe(true);
    expect(budget.bytes).toBe(bigger.bytes);
    expect(budget.take(a, catalog('huge', 30))).toBe(false);
    expect(budget.bytes).toBe(bigger.bytes);
  });

  it('shows what it holds in a gauge, counts every refusal, and logs them throttled per reason', async () => {
    const metrics = createMetrics();
    const lines: Array<Record<string, unknown>> = [];
    const log = { debug: () => undefined, info: () => undefined, error: () => undefined, warn: (o: Record<string, unknown>) => void lines.push(o) };
    const c = catalog('g', 3);
    const budget = new CatalogBudget(c.bytes, { log, metrics });
    const holder = {};
    budget.take(holder, c);
    expect(await metricValue(metrics, 'voxgate_device_catalog_bytes')).toBe(c.bytes);
    budget.release(holder);
    expect(await metricValue(metrics, 'voxgate_device_catalog_bytes')).toBe(0);
    for (let i = 0; i < 50; i++) budget.refused('gateway_budget', { deviceId: `d${i}` }, 'refused');
    budget.refused('device_bytes', { deviceId: 'x' }, 'cut');
    expect(await metricValue(metrics, 'voxgate_device_catalogs_cut_total', { reason: 'gateway_budget' })).toBe(50);
    expect(await metricValue(metrics, 'voxgate_device_catalogs_cut_total', { reason: 'device_bytes' })).toBe(1);
    expect(lines.filter((l) => l['reason'] === 'gateway_budget')).toHaveLength(10);
    expect(lines.filter((l) => l['reason'] === 'device_bytes')).toEqual([{ reason: 'device_bytes', deviceId: 'x' }]);
  });
});
