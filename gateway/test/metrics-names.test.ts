import { describe, expect, it } from 'vitest';
import { createMetrics } from '../src/metrics.js';

describe('metric names (issue 9 item 20)', () => {
  it('carry the voxgate_ prefix once, with no repeated word (voxgate_process_process_…)', async () => {
    const names = (await createMetrics().registry.getMetricsAsJSON()).map((m) => m.name);
    expect(names).toContain('voxgate_process_cpu_user_seconds_total');
    expect(names).toContain('voxgate_nodejs_eventloop_lag_seconds');
    expect(names.filter((n) => !n.startsWith('voxgate_'))).toEqual([]);
    expect(names.filter((n) => /(?:^|_)([a-z]+)_\1(?:_|$)/.test(n))).toEqual([]);
  });
});
