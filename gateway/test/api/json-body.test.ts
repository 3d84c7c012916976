/**
 * The API's JSON bodies are bounded in depth before they are parsed (api/json-body.ts): a body nested thousands of
 * levels deep within the size limit is a 400 for its caller, not a stack overflow in whatever serializes it next.
 */
import { describe, expect, it } from 'vitest';
import { startTestGateway, TEST_API_KEY } from '../../../test/support/gateway-harness.js';
import { ReferenceDevice } from '../../../test/support/reference-device.js';
import { MAX_BODY_DEPTH } from '../../src/api/json-body.js';

/** `{"a":{"a":…{"a":1}}}`, `levels` objects deep, as text (JSON.stringify of it could overflow this stack too). */
const nested = (levels: number): string => `${'{"a":'.repeat(levels)}1${'}'.repeat(levels)}`;

describe('JSON bodies: depth bounded at the API boundary', () => {
  it('refuses a deep body with 400 INVALID_REQUEST and keeps serving; a body within the bound reaches its route', async () => {
    const t = await startTestGateway();
    const device = new ReferenceDevice({ deviceId: '02:00:00:00:1b:01' });
    try {
      const ready = t.nextEvent('device.ready', device.deviceId);
      await device.connectWebSocket(t.wsUrl);
      await ready;
      const post = async (path: string, body: string) => {
        const res = await fetch(`${t.baseUrl}/v1/devices/${device.deviceId}${path}`, {
          method: 'POST',
          headers: { authorization: `Bearer ${TEST_API_KEY}`, 'content-type': 'application/json' },
          body,
        });
        return { status: res.status, body: (await res.json()) as { code?: string; detail?: string } };
      };
      const call = (args: string) => post('/tools/self.audio_speaker.set_volume/call', `{"arguments":${args}}`);

      // 5 000 levels: ~35 KB, far inside the body limit; it used to answer 500 and log an error with a stack.
      const deep = await call(nested(5000));
      expect(deep.status).toBe(400);
      expect(deep.body.code).toBe('INVALID_REQUEST');
      expect(deep.body.detail).toMatch(`nested deeper than ${MAX_BODY_DEPTH} levels`);
      const rpc = await post('/rpc', `{"method":"tools/list","params":${nested(5000)}}`);
      expect([rpc.status, rpc.body.code]).toEqual([400, 'INVALID_REQUEST']);
      expect(t.logs.filter((l) => l['msg'] === 'unhandled error')).toEqual([]);

      // Within the bound the body is parsed and the call made (the tool's schema allows more arguments).
      const within = await call(`{"volume":5,"extra":${nested(MAX_BODY_DEPTH - 3)}}`);
      expect(within.status).toBe(200);
      expect(device.volume).toBe(5);
      // fastify's own checks still run behind the bound: a prototype-poisoning key is refused.
      expect((await call('{"__proto__":{"volume":1}}')).status).toBe(400);
      const ok = await call('{"volume":7}');
      expect(ok.status).toBe(200);
      expect(device.volume).toBe(7);
    } finally {
      device.terminate();
      await t.close();
    }
  });
});
