import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestGateway, type TestGateway } from '../../../test/support/gateway-harness.js';
import { ReferenceDevice, referenceTools, type RefTool } from '../../../test/support/reference-device.js';

/**
 * The real McpServer pages tools/list at 8000 bytes and refuses a page holding a tool larger than that;
 * its cursor never moves past that tool. The gateway keeps the pages before it, marks the device ready
 * with a warning, and does not ask again for an answer that cannot change.
 */
describe('a device whose catalog holds a tool larger than its tools/list page', () => {
  let t: TestGateway;
  beforeAll(async () => {
    t = await startTestGateway({ session: { setupRetryMinMs: 10, setupRetryMaxMs: 20 } });
  });
  afterAll(() => t.close());

  it('is ready with the tools before it, a warning in its summary, an event and a metric', async () => {
    const huge: RefTool = { name: 'self.huge.describe', description: 'x'.repeat(9000), run: () => true };
    const ref = referenceTools().filter((x) => !x.userOnly);
    const tools = [...ref.slice(0, 3), huge, ...ref.slice(3)];
    const d = new ReferenceDevice({ deviceId: '02:00:00:00:0c:01', tools });
    const ready = t.nextEvent('device.ready', d.deviceId);
    const incomplete = t.nextEvent('device.catalog_incomplete', d.deviceId);
    try {
      await d.connectWebSocket(t.wsUrl);
      const warning = `catalog incomplete: tool after ${ref[2]!.name} refused by the device`;
      expect((await ready).data['toolCount']).toBe(3);
      expect((await incomplete).data).toMatchObject({ warning, page: 2, after: ref[2]!.name, toolCount: 3 });
      expect((await incomplete).data['error']).toMatch(/Failed to add tool self\.huge\.describe because of payload size limit/);

      const summary = await t.api<{ state: string; toolCount: number; catalogWarning?: string }>('GET', `/v1/devices/${d.deviceId}`);
      expect(summary.body).toMatchObject({ state: 'ready', toolCount: 3, catalogWarning: warning });
      const listed = await t.api<{ tools: Array<{ name: string }> }>('GET', `/v1/devices/${d.deviceId}/tools`);
      expect(listed.body.tools.map((x) => x.name)).toEqual(ref.slice(0, 3).map((x) => x.name));
      // The tools it has answer as usual.
      const call = await t.api('POST', `/v1/devices/${d.deviceId}/tools/self.get_device_status/call`, { arguments: {} });
      expect(call.status).toBe(200);

      // Refused once, not retried: the same cursor gets the same answer.
      const refusedAsks = d.mcpReceived.filter((p) => p['method'] === 'tools/list' && (p['params'] as { cursor?: unknown })['cursor'] === huge.name);
      expect(refusedAsks).toHaveLength(1);
      expect(await t.metric('voxgate_device_setup_retries_total', { step: 'tools_list' })).toBe(0);
      expect(await t.metric('voxgate_device_catalogs_incomplete_total')).toBe(1);
    } finally {
      d.terminate();
    }
  });
});
