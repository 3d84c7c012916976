import { referenceResultTail, referenceResultText } from '@voxgate/protocol';
import { describe, expect, it } from 'vitest';
import { startTestGateway } from '../../../test/support/gateway-harness.js';
import { ReferenceDevice, referenceTools, toolJson } from '../../../test/support/reference-device.js';
import { ScriptedWsDevice } from '../../../test/support/scripted-device.js';

const after = referenceResultTail(7);

describe('tools/list page cache', () => {
  it('recognises only the reference layout, whatever the (unescaped) session id', () => {
    const page = '{"tools":[{"name":"a","inputSchema":{"type":"object"}}],"nextCursor":"b"}';
    expect(referenceResultText(`{"session_id":"s-1","type":"mcp","payload":{"jsonrpc":"2.0","id":7,"result":${page}}}`, after)).toBe(page);
    expect(referenceResultText(`{"session_id":"","type":"mcp","payload":{"jsonrpc":"2.0","id":7,"result":${page}}}`, after)).toBe(page);
    // Another id, an escaped session id, other key order or spacing: not recognised (the ordinary path runs).
    expect(referenceResultText(`{"session_id":"s","type":"mcp","payload":{"jsonrpc":"2.0","id":8,"result":${page}}}`, after)).toBeUndefined();
    expect(referenceResultText(`{"session_id":"a\\"","type":"mcp","payload":{"jsonrpc":"2.0","id":7,"result":${page}}}`, after)).toBeUndefined();
    expect(referenceResultText(`{"type":"mcp","session_id":"s","payload":{"jsonrpc":"2.0","id":7,"result":${page}}}`, after)).toBeUndefined();
    expect(referenceResultText(`{"session_id": "s","type":"mcp","payload":{"jsonrpc":"2.0","id":7,"result":${page}}}`, after)).toBeUndefined();
    expect(referenceResultText(`{"session_id":"s","type":"mcp","payload":{"jsonrpc":"2.0","id":7,"result":${page}}} `, after)).toBeUndefined();
  });

  it('parses a firmware’s pages once; later devices with the same pages share them, others do not', async () => {
    const t = await startTestGateway();
    const devices: ReferenceDevice[] = [];
    try {
      const join = async (d: ReferenceDevice, how: 'ws' | 'mqtt' = 'ws') => {
        devices.push(d);
        const ready = t.nextEvent('device.ready', d.deviceId);
        if (how === 'ws') await d.connectWebSocket(t.wsUrl);
        else await d.connectMqtt(t.mqttUrl, { clientId: `GID_test@@@${d.deviceId.replace(/:/g, '_')}@@@${d.clientId}` });
        return (await ready).data['hash'] as string;
      };
      const pages = async () => ({
        parsed: await t.metric('voxgate_tools_pages_total', { source: 'parsed' }),
        cache: await t.metric('voxgate_tools_pages_total', { source: 'cache' }),
      });

      const h1 = await join(new ReferenceDevice({ deviceId: '02:00:00:00:07:01', extraTools: 40 }));
      const first = await pages();
      expect(first.parsed).toBeGreaterThanOrEqual(3);
      expect(first.cache).toBe(0);

      const h2 = await join(new ReferenceDevice({ deviceId: '02:00:00:00:07:02', extraTools: 40 }));
      const h3 = await join(new ReferenceDevice({ deviceId: '02:00:00:00:07:03', extraTools: 40 }), 'mqtt');
      const second = await pages();
      expect(second.parsed).toBe(first.parsed);
      expect(second.cache).toBe(2 * first.parsed);
      expect([h2, h3]).toEqual([h1, h1]);
      const a = await t.api<{ tools: unknown[] }>('GET', '/v1/devices/02:00:00:00:07:01/tools');
      const c = await t.api<{ tools: unknown[] }>('GET', '/v1/devices/02:00:00:00:07:03/tools');
      expect(c.body).toEqual(a.body);

      // One changed description: a page of its own, and a catalog of its own.
      const tools = referenceTools().map((x) => (x.name === 'self.audio_speaker.set_volume' ? { ...x, description: `${x.description}!` } : x));
      const h4 = await join(new ReferenceDevice({ deviceId: '02:00:00:00:07:04', extraTools: 40, tools }));
      expect(h4).not.toBe(h1);
      expect((await pages()).parsed).toBeGreaterThan(second.parsed);
      const call = await t.api<{ content: Array<{ text: string }> }>('POST', '/v1/devices/02:00:00:00:07:03/tools/self.audio_speaker.set_volume/call', {
        arguments: { volume: 21 },
      });
      expect(call.status).toBe(200);
    } finally {
      for (const d of devices) d.terminate();
      await t.close();
    }
  });

  it('one device cannot poison the catalog another device gets (issue 8, defect 2)', async () => {
    const t = await startTestGateway();
    let attacker: ScriptedWsDevice | undefined;
    const victim = new ReferenceDevice({
      deviceId: '02:00:00:00:08:02',
      // A catalog of its own (one changed description), so no other test has cached this page text.
      tools: referenceTools().map((x) => (x.name === 'self.get_device_status' ? { ...x, description: `${x.description} (poison test)` } : x)),
    });
    try {
      // The victim firmware's first page, byte for byte (the attacker knows the firmware).
      const victimPage = `{"tools":[${victim.tools.map(toolJson).join(',')}]}`;
      const evilPage = JSON.stringify({ tools: victim.tools.map((x) => JSON.parse(toolJson({ ...x, userOnly: false })) as unknown) });

      attacker = await ScriptedWsDevice.connect(t.wsUrl, '02:00:00:00:08:01');
      const attackerReady = t.nextEvent('device.ready', '02:00:00:00:08:01');
      const init = await attacker.next('initialize');
      attacker.reply(init.id, '{"protocolVersion":"2024-11-05","capabilities":{},"serverInfo":{"name":"x","version":"1"}}');
      const list = await attacker.next('tools/list');
      // Frame A: the victim's exact page text, in an envelope the gateway refuses (300-char session id).
      attacker.send(`{"session_id":"${'x'.repeat(300)}","type":"mcp","payload":{"jsonrpc":"2.0","id":${list.id},"result":${victimPage}}}`);
      // Frame B: settles the same request with the evil page, in another key order (off the fast path).
      attacker.send(`{"type":"mcp","session_id":"s","payload":{"jsonrpc":"2.0","id":${list.id},"result":${evilPage}}}`);
      await attackerReady;
      const own = await t.api<{ tools: Array<{ name: string; userOnly: boolean }> }>('GET', '/v1/devices/02:00:00:00:08:01/tools');
      expect(own.body.tools.find((x) => x.name === 'self.reboot')?.userOnly).toBe(false); // the attacker got its own forgery

      const victimReady = t.nextEvent('device.ready', victim.deviceId);
      await victim.connectWebSocket(t.wsUrl);
      await victimReady;
      expect(victim.sent.some((f) => f.endsWith(`"result":${victimPage}}}`))).toBe(true); // the attack targeted this exact text
      const tools = await t.api<{ tools: Array<{ name: string; userOnly: boolean }> }>('GET', `/v1/devices/${victim.deviceId}/tools`);
      expect(tools.body.tools.map((x) => x.name)).toEqual(victim.tools.map((x) => x.name));
      expect(tools.body.tools.find((x) => x.name === 'self.reboot')?.userOnly).toBe(true);
      const forLlm = await t.api<{ code: string }>('POST', '/v1/tools/device_call/call', { arguments: { device_id: victim.deviceId, tool: 'self.reboot' } });
      expect(forLlm.body.code).toBe('TOOL_NOT_FOUND');
    } finally {
      attacker?.close();
      victim.terminate();
      await t.close();
    }
  });
});
