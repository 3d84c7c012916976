import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestGateway, type TestGateway } from '../../test/support/gateway-harness.js';
import { ReferenceDevice } from '../../test/support/reference-device.js';

/** Arbitrary device frames: garbage, JSON of any shape, and near-miss envelopes and JSON-RPC. */
const frame = fc.oneof(
  fc.string({ maxLength: 200 }),
  fc.json({ maxDepth: 4 }),
  fc.record({ session_id: fc.oneof(fc.string(), fc.constant(null), fc.integer()), type: fc.constantFrom('mcp', 'hello', 'listen', 'abort', 'goodbye', ''), payload: fc.jsonValue({ maxDepth: 3 }) }).map((o) => JSON.stringify(o)),
  fc
    .record({
      jsonrpc: fc.constantFrom('2.0', '1.0', 2),
      id: fc.oneof(fc.integer({ min: -5, max: 1_000_000 }), fc.string(), fc.constant(null)),
      method: fc.oneof(fc.constantFrom('notifications/tools/list_changed', 'notifications/x', 'tools/call'), fc.string()),
      result: fc.jsonValue({ maxDepth: 3 }),
      error: fc.record({ code: fc.option(fc.integer()), message: fc.option(fc.string()) }),
    }, { requiredKeys: [] })
    .map((payload) => JSON.stringify({ session_id: 's', type: 'mcp', payload })),
);

describe('the gateway under arbitrary device input', () => {
  let t: TestGateway;
  beforeAll(async () => {
    t = await startTestGateway();
  });
  afterAll(() => t.close());

  it('never crashes and keeps serving the device that sent it', async () => {
    const d = new ReferenceDevice({ deviceId: '02:00:00:00:04:01' });
    const ready = t.nextEvent('device.ready', d.deviceId);
    await d.connectWebSocket(t.wsUrl);
    await ready;
    const frames = fc.sample(frame, { numRuns: 400, seed: 20261121 });
    for (const f of frames) d.sendRaw(f);
    const r = await t.api<{ content: Array<{ text: string }> }>('POST', `/v1/devices/${d.deviceId}/tools/self.audio_speaker.set_volume/call`, { arguments: { volume: 70 } });
    expect(r.status).toBe(200);
    expect(d.volume).toBe(70);
    expect(await t.metric('voxgate_frames_rejected_total')).toBeGreaterThan(0);
    d.terminate();
  });
});
