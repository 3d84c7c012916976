import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestGateway, type TestGateway } from '../../../test/support/gateway-harness.js';
import { ReferenceDevice } from '../../../test/support/reference-device.js';

/**
 * A caller who asked for a 2000 ms timeout is told "2000 ms", even when part of that budget was spent
 * waiting in the device's queue (the request itself then gets only what is left).
 */
describe('a timed-out call reports the timeout the caller asked for (issue 9 item 20)', () => {
  let t: TestGateway;
  // A tool that never returns: the reference firmware's main task is stuck in it, so nothing else answers.
  const device = new ReferenceDevice({
    deviceId: '02:00:00:00:20:06',
    tools: [{ name: 'self.stuck', description: 'never returns', run: () => new Promise<never>(() => {}) }],
  });
  const call = (timeoutMs: number) =>
    t.api<{ code: string; detail: string }>('POST', `/v1/devices/${device.deviceId}/tools/self.stuck/call`, { arguments: {}, timeoutMs });

  beforeAll(async () => {
    t = await startTestGateway();
    const ready = t.nextEvent('device.ready', device.deviceId);
    await device.connectWebSocket(t.wsUrl);
    await ready;
  });
  afterAll(async () => {
    device.terminate();
    await t.close();
  });

  it('says "within 2000 ms" for a call that waited behind another before it was sent', async () => {
    const first = call(300);
    // Queued behind the first call: it is sent only once that one has timed out, with the rest of its budget.
    const second = call(2000);
    const [a, b] = await Promise.all([first, second]);
    expect([a.status, a.body.code]).toEqual([504, 'DEVICE_TIMEOUT']);
    expect(a.body.detail).toContain('within 300 ms');
    expect([b.status, b.body.code]).toEqual([504, 'DEVICE_TIMEOUT']);
    expect(b.body.detail).toContain('within 2000 ms');
  });
});
