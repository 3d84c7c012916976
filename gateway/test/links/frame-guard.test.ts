import { describe, expect, it } from 'vitest';
import pino from 'pino';
import { guardFrame } from '../../src/links/frame-guard.js';
import { createMetrics } from '../../src/metrics.js';
import { metricValue } from '../../../test/support/device-parts.js';

function capture() {
  const lines: Array<Record<string, unknown>> = [];
  const log = pino({ level: 'info' }, { write: (s: string) => void lines.push(JSON.parse(s) as Record<string, unknown>) });
  return { log, lines };
}

describe('guardFrame', () => {
  it('runs the handler and does nothing else when it returns', async () => {
    const { log, lines } = capture();
    const metrics = createMetrics();
    let closed = 0;
    let ran = 0;
    guardFrame(() => void ran++, { transport: 'websocket', log, who: () => ({ deviceId: 'd' }), metrics, close: () => void closed++ });
    expect([ran, closed, lines.length]).toEqual([1, 0, 0]);
    expect(await metricValue(metrics, 'voxgate_frame_handler_errors_total', { transport: 'websocket' })).toBe(0);
  });

  it('logs, counts and closes only this connection when the handler throws', async () => {
    const { log, lines } = capture();
    const metrics = createMetrics();
    let closed = 0;
    const who = { deviceId: '02:00:00:00:00:01', clientId: 'c' };
    expect(() =>
      guardFrame(
        () => {
          throw new Error('boom');
        },
        { transport: 'mqtt', log, who: () => who, metrics, close: () => void closed++ },
      ),
    ).not.toThrow();
    expect(closed).toBe(1);
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatchObject({ level: 50, msg: 'unexpected error handling a device frame; closing this connection', ...who, err: { message: 'boom' } });
    expect(await metricValue(metrics, 'voxgate_frame_handler_errors_total', { transport: 'mqtt' })).toBe(1);
  });

  it('does not throw when closing the connection throws too', () => {
    const { log } = capture();
    const o = {
      transport: 'websocket' as const,
      log,
      who: () => ({}),
      metrics: createMetrics(),
      close: () => {
        throw new Error('already gone');
      },
    };
    expect(() =>
      guardFrame(() => {
        throw new Error('boom');
      }, o),
    ).not.toThrow();
  });
});
