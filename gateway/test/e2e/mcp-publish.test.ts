import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestGateway, type TestGateway } from '../../../test/support/gateway-harness.js';
import { untilHub } from '../../../test/support/hub.js';
import { ReferenceDevice } from '../../../test/support/reference-device.js';

/**
 * mcp.publish: gateway A dials gateway B's inbound MCP endpoint and serves its fleet there; a device on A
 * is called through B (and through A itself).
 */
type CallOut = { content: Array<{ text: string }>; isError: boolean };

describe('publishing the fleet to another gateway', { timeout: 60_000 }, () => {
  let a: TestGateway;
  let b: TestGateway;
  const lamp: boolean[] = [];
  const device = new ReferenceDevice({
    deviceId: '02:00:00:00:22:01',
    tools: [
      {
        name: 'self.lamp.set',
        description: 'Turn the hallway lamp on or off',
        properties: { on: { type: 'boolean' } },
        run: (args) => (lamp.push(Boolean(args['on'])), true),
      },
    ],
  });

  beforeAll(async () => {
    b = await startTestGateway();
    const ep = await b.api<{ url: string }>('POST', '/v1/mcp/endpoints', { name: 'fleet' });
    a = await startTestGateway({ mcp: { deviceTools: 'per_device', publish: [{ url: ep.body.url }] } });
  });
  afterAll(async () => {
    device.terminate();
    await a?.close();
    await b?.close();
  });

  it("serves a device of A through B, and B hears when A's tools change", async () => {
    await untilHub(b.gw.hub, () => b.gw.hub.upstreams.get('fleet')?.state === 'ready', 'A to dial in to B');
    const ready = a.nextEvent('device.ready', device.deviceId);
    await device.connectWebSocket(a.wsUrl);
    await ready;
    const onA = a.gw.hub.tools({}).find((t) => t.source.kind === 'device' && t.source.tool === 'self.lamp.set')!;
    expect(onA).toBeDefined();
    const viaB = `mcp__fleet__${onA.name}`;
    // The device came after A connected: A says tools/list_changed, B relists.
    await untilHub(b.gw.hub, () => b.gw.hub.tools({}).some((t) => t.name === viaB), 'the device tool on B');

    const direct = await a.api<CallOut>('POST', `/v1/tools/${onA.name}/call`, { arguments: { on: true } });
    expect(direct.body.isError).toBe(false);
    const through = await b.api<CallOut>('POST', `/v1/tools/${viaB}/call`, { arguments: { on: false } });
    expect(through.body.isError).toBe(false);
    expect(lamp).toEqual([true, false]);
    const endpoints = await b.api<{ endpoints: Array<{ name: string; state: string }> }>('GET', '/v1/mcp/endpoints');
    expect(endpoints.body.endpoints).toEqual([expect.objectContaining({ name: 'fleet', state: 'connected' })]);
  });
});
