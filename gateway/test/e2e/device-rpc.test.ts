import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestGateway, type TestGateway } from '../../../test/support/gateway-harness.js';
import { ReferenceDevice } from '../../../test/support/reference-device.js';

describe('POST /v1/devices/{id}/rpc', () => {
  let t: TestGateway;
  let d: ReferenceDevice;
  beforeAll(async () => {
    t = await startTestGateway();
    d = new ReferenceDevice({ deviceId: '02:00:00:00:09:60' });
    const ready = t.nextEvent('device.ready', d.deviceId);
    await d.connectWebSocket(t.wsUrl);
    await ready;
  });
  afterAll(async () => {
    d.terminate();
    await t.close();
  });

  it('sends notifications/* as a notification (no id) and answers 202 at once', async () => {
    // The firmware ignores notifications: sent as a request, this would wait out its timeout.
    const r = await t.api<{ sent: boolean; notification: string }>('POST', `/v1/devices/${d.deviceId}/rpc`, {
      method: 'notifications/initialized',
      timeoutMs: 60_000,
    });
    expect(r.status).toBe(202);
    expect(r.body).toEqual({ sent: true, notification: 'notifications/initialized' });
    const sent = await d.waitForMcp((p) => p['method'] === 'notifications/initialized');
    expect('id' in sent).toBe(false);
    // Nothing was queued behind it: a request goes straight through.
    const list = await t.api<{ result: { tools: unknown[] } }>('POST', `/v1/devices/${d.deviceId}/rpc`, { method: 'tools/list' });
    expect(list.status).toBe(200);
  });

  it("refuses a caller's own id with a clear 400 instead of dropping it silently", async () => {
    const r = await t.api<{ code: string; detail: string }>('POST', `/v1/devices/${d.deviceId}/rpc`, { method: 'tools/list', id: 'mine' });
    expect([r.status, r.body.code]).toEqual([400, 'INVALID_REQUEST']);
    expect(r.body.detail).toContain('"id"');
    expect(d.mcpReceived.some((p) => p['id'] === 'mine')).toBe(false);
  });
});
