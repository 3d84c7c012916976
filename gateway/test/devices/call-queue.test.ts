import { describe, expect, it } from 'vitest';
import { CallQueue, clampTimeout } from '../../src/devices/call-queue.js';
import { GatewayError } from '../../src/errors.js';
import { createMetrics } from '../../src/metrics.js';
import { deferred } from '../../../test/support/wait.js';
import { metricValue } from '../../../test/support/device-parts.js';

function queue(opts: { concurrency?: number; queueLimit?: number } = {}) {
  const metrics = createMetrics();
  let closed = false;
  const q = new CallQueue({
    deviceId: 'd1',
    concurrency: opts.concurrency ?? 1,
    queueLimit: opts.queueLimit ?? 4,
    metrics,
    isClosed: () => closed,
    offline: () => new GatewayError('DEVICE_OFFLINE', 'device d1 is offline'),
  });
  return { q, metrics, close: () => (closed = true) };
}

describe('CallQueue: one device’s calls', () => {
  it('clamps a timeout: its own, else the default, never over the maximum', () => {
    const limits = { defaultTimeoutMs: 5000, maxTimeoutMs: 60_000 };
    expect(clampTimeout(undefined, limits)).toBe(5000);
    expect(clampTimeout(1234, limits)).toBe(1234);
    expect(clampTimeout(999_999, limits)).toBe(60_000);
  });

  it('runs calls one at a time in the order they came', async () => {
    const { q } = queue();
    const order: string[] = [];
    const gate = deferred();
    const far = Date.now() + 10_000;
    const first = q.enqueue(far, async () => {
      order.push('first');
      await gate.promise;
      return 1;
    });
    const second = q.enqueue(far, async () => (order.push('second'), 2));
    const third = q.enqueue(far, async () => (order.push('third'), 3));
    expect(order).toEqual(['first']);
    expect(q.waitingCount).toBe(2);
    gate.resolve();
    expect(await Promise.all([first, second, third])).toEqual([1, 2, 3]);
    expect(order).toEqual(['first', 'second', 'third']);
  });

  it('answers DEVICE_BUSY past the queue limit, and counts it', async () => {
    const { q, metrics } = queue({ queueLimit: 1 });
    const gate = deferred();
    const far = Date.now() + 10_000;
    const running = q.enqueue(far, () => gate.promise);
    const queued = q.enqueue(far, async () => 'ok');
    const err = (await q.enqueue(far, async () => 'never').catch((e: unknown) => e)) as GatewayError;
    expect(err.code).toBe('DEVICE_BUSY');
    expect(err.message).toBe('device d1 has 1 calls waiting; try again later');
    expect(await metricValue(metrics, 'voxgate_calls_total', { outcome: 'busy' })).toBe(1);
    gate.resolve();
    await running;
    await expect(queued).resolves.toBe('ok');
  });

  it('times a call out in the queue when its deadline passes before a slot frees', async () => {
    const { q, metrics } = queue();
    const gate = deferred();
    const running = q.enqueue(Date.now() + 10_000, () => gate.promise);
    const err = (await q.enqueue(Date.now() + 20, async () => 'late').catch((e: unknown) => e)) as GatewayError;
    expect(err.code).toBe('DEVICE_TIMEOUT');
    expect(err.message).toBe('call waited in the device queue until its deadline');
    expect(await metricValue(metrics, 'voxgate_calls_total', { outcome: 'timeout' })).toBe(1);
    expect(q.waitingCount).toBe(0);
    gate.resolve();
    await running;
  });

  it('times out queued calls with different deadlines each at its own, and runs the one whose deadline is far', async () => {
    const { q, metrics } = queue();
    const gate = deferred();
    const running = q.enqueue(Date.now() + 10_000, () => gate.promise);
    const order: string[] = [];
    // In deadline order around the far one: under load both may fall due in one sweep, which goes oldest first.
    const early = q.enqueue(Date.now() + 20, async () => 'early').catch((e: unknown) => (order.push('20'), e));
    const far = q.enqueue(Date.now() + 10_000, async () => 'far');
    const late = q.enqueue(Date.now() + 60, async () => 'late').catch((e: unknown) => (order.push('60'), e));
    expect(await early).toMatchObject({ code: 'DEVICE_TIMEOUT' });
    expect(await late).toMatchObject({ code: 'DEVICE_TIMEOUT' });
    expect(order).toEqual(['20', '60']);
    expect(q.waitingCount).toBe(1);
    expect(await metricValue(metrics, 'voxgate_calls_total', { outcome: 'timeout' })).toBe(2);
    gate.resolve();
    await running;
    await expect(far).resolves.toBe('far');
  });

  it('gives a job the time left until its deadline', async () => {
    const { q } = queue();
    const remaining = await q.enqueue(Date.now() + 5000, async (ms) => ms);
    expect(remaining).toBeGreaterThan(0);
    expect(remaining).toBeLessThanOrEqual(5000);
  });

  it('fails queued jobs at failAll, and refuses new ones once closed', async () => {
    const { q, close } = queue();
    const gate = deferred();
    const running = q.enqueue(Date.now() + 10_000, () => gate.promise);
    const queued = q.enqueue(Date.now() + 10_000, async () => 'x');
    q.failAll(new GatewayError('DEVICE_OFFLINE', 'gone'));
    await expect(queued).rejects.toMatchObject({ code: 'DEVICE_OFFLINE', message: 'gone' });
    close();
    await expect(q.enqueue(Date.now() + 1000, async () => 'y')).rejects.toMatchObject({ message: 'device d1 is offline' });
    gate.resolve();
    await running;
  });
});
