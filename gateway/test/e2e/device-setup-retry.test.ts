import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startTestGateway, type TestGateway } from '../../../test/support/gateway-harness.js';
import { connectMqttViaOta } from '../../../test/support/ota-mqtt.js';
import { ReferenceDevice } from '../../../test/support/reference-device.js';

let mac = 0x10;
const nextMac = () => `02:00:00:00:09:${(mac++).toString(16).padStart(2, '0')}`;

/**
 * The firmware answers only from its main task: a long tool or a voice-session wait delays the replies to
 * initialize and tools/list past any fixed timeout. Setup must retry while the link is up, keep the pages
 * it already has, and say honestly what it is doing.
 */
describe('device setup against a busy device (MQTT, reference firmware)', () => {
  let t: TestGateway;
  const cleanup: Array<() => void> = [];

  const connect = async (d: ReferenceDevice) => {
    cleanup.push(() => d.terminate());
    await connectMqttViaOta(t, d);
  };

  beforeAll(async () => {
    // Short request timeout and backoff: a stalled main task outlasts the timeout many times over.
    t = await startTestGateway({ ota: { transport: 'mqtt' }, session: { requestTimeoutMs: 200, setupRetryMinMs: 20, setupRetryMaxMs: 100 } });
  });
  afterEach(() => {
    for (const f of cleanup.splice(0)) f();
  });
  afterAll(() => t.close());

  it('retries initialize while the device is busy, reports "retrying" (not offline), and becomes ready', async () => {
    const d = new ReferenceDevice({ deviceId: nextMac() });
    const release = d.stallMainTask();
    const ready = t.nextEvent('device.ready', d.deviceId, 15_000);
    await connect(d);
    const first = await d.waitForMcp((p) => p['method'] === 'initialize');
    await d.waitForMcp((p) => p['method'] === 'initialize' && p['id'] !== first['id']);

    const tools = await t.api<{ code: string; state: string; step: string }>('GET', `/v1/devices/${d.deviceId}/tools`);
    expect(tools.status).toBe(503);
    expect(tools.body.code).toBe('DEVICE_NOT_READY');
    expect(tools.body).toMatchObject({ state: 'retrying', step: 'initialize' });
    const info = await t.api<{ online: boolean; state: string }>('GET', `/v1/devices/${d.deviceId}`);
    expect(info.body).toMatchObject({ online: true, state: 'initializing' });

    release();
    await ready;
    const after = await t.api<{ tools: unknown[] }>('GET', `/v1/devices/${d.deviceId}/tools`);
    expect(after.status).toBe(200);
    expect(after.body.tools.length).toBe(d.tools.length);
    expect(await t.metric('voxgate_device_setup_retries_total', { step: 'initialize' })).toBeGreaterThanOrEqual(1);
  });

  it('retries a tools/list page that timed out, keeping the pages already fetched', async () => {
    const d = new ReferenceDevice({ deviceId: nextMac(), extraTools: 60 });
    const ready = t.nextEvent('device.ready', d.deviceId, 15_000);
    await connect(d);
    // Page 1's reply is already scheduled when the request is seen; the stall delays page 2 onwards.
    await d.waitForMcp((p) => p['method'] === 'tools/list');
    const release = d.stallMainTask();
    const page2 = await d.waitForMcp((p) => p['method'] === 'tools/list' && typeof (p['params'] as { cursor?: unknown })['cursor'] === 'string');
    const cursor = (page2['params'] as { cursor: string }).cursor;
    await d.waitForMcp((p) => p['method'] === 'tools/list' && p['id'] !== page2['id'] && (p['params'] as { cursor?: unknown })['cursor'] === cursor);

    release();
    await ready;
    const lists = d.mcpReceived.filter((p) => p['method'] === 'tools/list');
    expect(lists.filter((p) => (p['params'] as { cursor?: unknown })['cursor'] === undefined)).toHaveLength(1);
    const after = await t.api<{ tools: Array<{ name: string }> }>('GET', `/v1/devices/${d.deviceId}/tools`);
    expect(after.body.tools.map((x) => x.name)).toEqual(d.tools.map((x) => x.name));
  });
});
