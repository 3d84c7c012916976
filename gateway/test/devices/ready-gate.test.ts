import { describe, expect, it } from 'vitest';
import { ReadyGate } from '../../src/devices/ready-gate.js';
import { GatewayError } from '../../src/errors.js';

const notReady = () => new GatewayError('DEVICE_TIMEOUT', 'still initializing');

describe('ReadyGate', () => {
  it('resolves every waiter when it opens', async () => {
    const gate = new ReadyGate();
    const waits = [gate.wait(10_000, notReady), gate.wait(10_000, notReady)];
    gate.open();
    await expect(Promise.all(waits)).resolves.toEqual([undefined, undefined]);
  });

  it('rejects every waiter with the setup error when it fails', async () => {
    const gate = new ReadyGate();
    const err = new GatewayError('DEVICE_ERROR', 'initialize failed');
    const waits = [gate.wait(10_000, notReady), gate.wait(10_000, notReady)];
    gate.fail(err);
    for (const w of waits) await expect(w).rejects.toBe(err);
  });

  it("rejects a waiter with its own timeout's error, and a later open does not touch it", async () => {
    const gate = new ReadyGate();
    const short = gate.wait(10, notReady);
    const long = gate.wait(10_000, notReady);
    await expect(short).rejects.toMatchObject({ code: 'DEVICE_TIMEOUT', message: 'still initializing' });
    gate.open();
    await expect(long).resolves.toBeUndefined();
  });

  it('serves only the waiters present: one that arrives after open waits for the next open', async () => {
    const gate = new ReadyGate();
    gate.open();
    const late = gate.wait(20, notReady);
    await expect(late).rejects.toMatchObject({ code: 'DEVICE_TIMEOUT' });
  });
});
