import { describe, expect, it } from 'vitest';
import { startTestGateway } from '../../../test/support/gateway-harness.js';
import { ReferenceDevice, referenceTools, type RefTool } from '../../../test/support/reference-device.js';

describe('integer arguments of device tools', () => {
  it('refuses integers outside int32 (the firmware would saturate them) with 422, and passes the int32 edges', async () => {
    const t = await startTestGateway();
    const echo: RefTool = {
      name: 'self.counter.set',
      description: 'Sets the counter',
      properties: { value: { type: 'integer' } },
      run: (args) => args['value'] as number,
    };
    const d = new ReferenceDevice({ deviceId: '02:00:00:00:09:70', tools: [echo, ...referenceTools()] });
    try {
      const ready = t.nextEvent('device.ready', d.deviceId);
      await d.connectWebSocket(t.wsUrl);
      await ready;
      const call = (value: number) =>
        t.api<{ code?: string; detail?: string; content?: Array<{ text: string }> }>('POST', `/v1/devices/${d.deviceId}/tools/self.counter.set/call`, {
          arguments: { value },
        });

      for (const v of [2 ** 31, -(2 ** 31) - 1, 2 ** 40]) {
        const r = await call(v);
        expect([r.status, r.body.code]).toEqual([422, 'INVALID_ARGUMENTS']);
        expect(r.body.detail).toContain('32-bit');
      }
      expect(d.mcpReceived.some((p) => p['method'] === 'tools/call')).toBe(false);
      expect((await call(2 ** 31 - 1)).body.content?.[0]?.text).toBe('2147483647');
      expect((await call(-(2 ** 31))).body.content?.[0]?.text).toBe('-2147483648');
    } finally {
      d.terminate();
      await t.close();
    }
  });
});
