import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { normalizeDeviceContent, repairUnescapedErrorMessage, unparsableReplyId } from '@voxgate/protocol';
import { deviceToolRaw } from '../../src/hub/names.js';
import { startTestGateway, TEST_API_KEY, type TestGateway } from '../../../test/support/gateway-harness.js';
import { ReferenceDevice, referenceTools, type RefTool } from '../../../test/support/reference-device.js';
import { ScriptedWsDevice } from '../../../test/support/scripted-device.js';

/** Issue 9, items 4 and 7: device replies the gateway must still turn into a clear answer. */
describe('device replies: unrepairable errors and content items', () => {
  let t: TestGateway;
  beforeAll(async () => {
    t = await startTestGateway();
  });
  afterAll(() => t.close());

  it('repairs an unescaped error message holding a \\u that is not an escape', () => {
    const frame = '{"session_id":"","type":"mcp","payload":{"jsonrpc":"2.0","id":7,"error":{"message":"Bad value \\uZZ "x""}}}';
    const fixed = repairUnescapedErrorMessage(frame);
    expect((JSON.parse(fixed!) as { payload: { error: { message: string } } }).payload.error.message).toBe('Bad value \\uZZ "x"');
    expect(unparsableReplyId('{"session_id":"a"b","type":"mcp","payload":{"jsonrpc":"2.0","id":42,"error":{"message":"x')).toBe(42);
    expect(unparsableReplyId('{"jsonrpc":"2.0","method":"x","id":3}')).toBeUndefined();
  });

  it('a \\u in a device error message no longer loses the reply: the caller gets the message', async () => {
    const tools: RefTool[] = [
      ...referenceTools(),
      {
        name: 'self.fail_with_u',
        description: 'Throws an error whose text has a backslash-u that is no escape',
        run: () => {
          throw new Error('Bad path C:\\users\\x "quoted"');
        },
      },
    ];
    const d = new ReferenceDevice({ deviceId: '02:00:00:00:09:01', tools });
    try {
      const ready = t.nextEvent('device.ready', d.deviceId);
      await d.connectWebSocket(t.wsUrl);
      await ready;
      const r = await t.api<{ code: string; detail: string }>('POST', `/v1/devices/${d.deviceId}/tools/self.fail_with_u/call`, {
        arguments: {},
        timeoutMs: 15_000,
      });
      expect(r.status).toBe(502);
      expect(r.body.code).toBe('DEVICE_ERROR');
      expect(r.body.detail).toContain('Bad path C:\\users\\x "quoted"');
    } finally {
      d.terminate();
    }
  });

  it('a reply that stays unparsable after repair settles its call at once, with the raw text', async () => {
    const d = new ReferenceDevice({ deviceId: '02:00:00:00:09:02' });
    try {
      const ready = t.nextEvent('device.ready', d.deviceId);
      await d.connectWebSocket(t.wsUrl);
      await ready;
      d.holdReplies();
      const call = t.api<{ code: string; detail: string }>('POST', `/v1/devices/${d.deviceId}/tools/self.get_device_status/call`, {
        arguments: {},
        timeoutMs: 15_000,
      });
      const req = await d.waitForMcp((p) => p['method'] === 'tools/call');
      const raw = `{"session_id":"","type":"mcp","payload":{"jsonrpc":"2.0","id":${String(req['id'])},"error":{"message":"cut "short`;
      d.sendRaw(raw);
      const r = await call;
      expect(r.status).toBe(502);
      expect(r.body.code).toBe('DEVICE_ERROR');
      expect(r.body.detail).toBe(`device sent a reply that is not JSON: ${raw}`);
      // The held (real) reply arrives later: a late reply, counted and dropped.
      const late = await t.metric('voxgate_late_replies_total');
      d.releaseReplies();
      const status = await t.api('POST', `/v1/devices/${d.deviceId}/tools/self.audio_speaker.set_volume/call`, { arguments: { volume: 9 } });
      expect(status.status).toBe(200);
      expect(await t.metric('voxgate_late_replies_total')).toBe(late + 1);
    } finally {
      d.terminate();
    }
  });

  it('normalizes device content to valid MCP content, counts what was malformed, and /mcp clients accept it', async () => {
    const data = Buffer.from('jpeg bytes').toString('base64');
    const firmwareImage = JSON.stringify({ type: 'image', image: JSON.stringify({ type: 'image', mimeType: 'image/jpeg', data }) });
    const id = '02:00:00:00:09:03';
    const ready = t.nextEvent('device.ready', id);
    const device = await ScriptedWsDevice.connect(t.wsUrl, id, [
      { name: 'photo', inputSchema: { type: 'object' }, result: `{"content":[${firmwareImage}],"isError":false}` },
      {
        name: 'odd',
        inputSchema: { type: 'object' },
        result: '{"content":[{"type":"text","text":42},{"type":"image"},{"type":"video","url":"x"},{"type":"text","text":"fine"}]}',
      },
    ]);
    const client = new Client({ name: 'test-host', version: '1.0.0' });
    try {
      await ready;
      const photo = await t.api<{ content: unknown[] }>('POST', `/v1/devices/${id}/tools/photo/call`, { arguments: {} });
      expect(photo.body.content).toEqual([{ type: 'image', mimeType: 'image/jpeg', data }]);
      const odd = await t.api<{ content: unknown[] }>('POST', `/v1/devices/${id}/tools/odd/call`, { arguments: {} });
      expect(odd.body.content).toEqual([
        { type: 'text', text: '42' },
        { type: 'text', text: '{"type":"image"}' },
        { type: 'text', text: '{"type":"video","url":"x"}' },
        { type: 'text', text: 'fine' },
      ]);
      expect(await t.metric('voxgate_device_content_normalized_total', { kind: 'firmware_image' })).toBe(1);
      expect(await t.metric('voxgate_device_content_normalized_total', { kind: 'malformed' })).toBe(3);
      expect(await t.metric('voxgate_calls_total', { outcome: 'ok_malformed_content' })).toBe(1);

      await client.connect(
        new StreamableHTTPClientTransport(new URL(`${t.baseUrl}/mcp`), { requestInit: { headers: { authorization: `Bearer ${TEST_API_KEY}` } } }),
      );
      const viaMcp = await client.callTool({ name: deviceToolRaw(id, 'photo'), arguments: {} });
      expect(viaMcp.content).toEqual([{ type: 'image', mimeType: 'image/jpeg', data }]);
    } finally {
      await client.close();
      device.close();
    }
  });
});

describe('normalizeDeviceContent', () => {
  it('keeps valid items, rewrites the firmware image shape, never throws', () => {
    const ok = [
      { type: 'text', text: 'a' },
      { type: 'image', data: 'AA==', mimeType: 'image/png' },
      { type: 'resource_link', uri: 'file:///x', name: 'x' },
    ];
    expect(normalizeDeviceContent(ok)).toEqual({ content: ok, firmwareImages: 0, malformed: 0 });
    const deepInner = { type: 'image', image: `${'['.repeat(10_000)}${']'.repeat(10_000)}` };
    expect(normalizeDeviceContent([deepInner, null, 'x', { type: 'image', image: '{"mimeType":"image/png"}' }]).malformed).toBe(4);
  });
});
