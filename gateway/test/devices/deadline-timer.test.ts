import { describe, expect, it } from 'vitest';
import { DeadlineTimer } from '../../src/devices/deadline-timer.js';
import type { GatewayError } from '../../src/errors.js';
import { channelPair } from '../../../test/support/device-parts.js';
import { deferred } from '../../../test/support/wait.js';

describe('DeadlineTimer: one timer for many deadlines', () => {
  it('fires once for the earliest deadline and is re-armed for the next one its owner names', async () => {
    const deadlines = [Date.now() + 30, Date.now() + 60];
    const last = deadlines[1]!;
    const fired: number[] = [];
    const done = deferred();
    const timer = new DeadlineTimer({
      expireDue(now) {
        fired.push(now);
        while (deadlines.length > 0 && deadlines[0]! <= now) deadlines.shift();
        if (deadlines.length === 0) done.resolve();
        return deadlines[0] ?? Infinity;
      },
    });
    timer.arm(deadlines[1]!);
    timer.arm(deadlines[0]!); // earlier: re-armed for it
    timer.arm(deadlines[1]!); // later than the armed one: nothing to do
    await done.promise;
    // Every deadline was reached (a firing before one re-arms for it), and nothing was left pending.
    expect(fired.length).toBeGreaterThanOrEqual(1);
    expect(fired.at(-1)).toBeGreaterThanOrEqual(last);
    expect(deadlines).toEqual([]);
  });

  it('does not fire once stopped, and can be armed again', async () => {
    let calls = 0;
    const done = deferred();
    const timer = new DeadlineTimer({
      expireDue() {
        calls++;
        done.resolve();
        return Infinity;
      },
    });
    timer.arm(Date.now() + 10);
    timer.stop();
    timer.arm(Date.now() + 20);
    await done.promise;
    expect(calls).toBe(1);
  });
});

describe('RpcChannel and CallQueue with one timer each', () => {
  it('times out requests with different timeouts each at its own deadline, and a settled one not at all', async () => {
    const { channel, device } = channelPair();
    const settled = channel.request('ping', undefined, 10_000);
    // Sent in deadline order: under load both may fall due in one sweep, which goes in the order they were sent.
    const short = channel.request('tools/list', undefined, 30);
    const long = channel.request('tools/call', {}, 80, { reportedMs: 80 });
    channel.onResult((await device.nextRequest('ping')).id, {});
    await expect(settled).resolves.toEqual({});
    const order: string[] = [];
    const failure = (p: Promise<unknown>, name: string) =>
      p.then(
        () => undefined,
        (e: unknown) => (order.push(name), e as GatewayError),
      );
    const errs = await Promise.all([failure(short, 'short'), failure(long, 'long')]);
    expect(order).toEqual(['short', 'long']);
    expect(errs.map((e) => e?.message)).toEqual([
      'device 02:00:00:00:00:01 did not answer tools/list within 30 ms',
      'device 02:00:00:00:00:01 did not answer tools/call within 80 ms',
    ]);
    expect(channel.pendingCount).toBe(0);
  });
});
