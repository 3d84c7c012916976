import { normalizeDeviceContent, repairUnescapedErrorMessage, unparsableReplyId } from '@voxgate/protocol';
import { describe, expect, it } from 'vitest';
import { HELLO, metricValue, registryPart } from '../../../test/support/device-parts.js';
import type { GatewayError } from '../../src/errors.js';

type How = 'websocket' | 'mqtt';
const nested = (depth: number) => `${'['.repeat(depth)}${']'.repeat(depth)}`;
const deepObject = (depth: number) => `${'{"a":'.repeat(depth)}1${'}'.repeat(depth)}`;
const ping = { name: 'self.ping', description: 'ping', inputSchema: { type: 'object', properties: {} } };

/** Issue 8, defect 1: one frame from one device must not end the process (every device with it). Moved from e2e. */
describe('hostile frames: deep nesting', () => {
  const parts = () => {
    const p = registryPart({}, [ping]);
    const join = async (deviceId: string, how: How) => {
      const c = p.connect(deviceId, { transport: how });
      if (how === 'websocket') c.device.send(HELLO);
      const init = await c.device.nextRequest('initialize');
      c.device.reply(init.id, { protocolVersion: '2024-11-05', capabilities: {}, serverInfo: { name: 'b', version: '1' } });
      c.device.reply((await c.device.nextRequest('tools/list')).id, { tools: [ping] });
      await expect.poll(() => p.registry.get(deviceId)?.state).toBe('ready');
      return c;
    };
    /** Frames on one connection are handled in order: once this is answered, everything before it was handled. */
    const handled = async (c: Awaited<ReturnType<typeof join>>, id: number) => {
      c.device.sendMcp({ jsonrpc: '2.0', id, method: 'ping.sentinel' });
      await c.device.next((t) => t.includes(`"id":${id}`) && t.includes('-32601'));
    };
    const answers = async (c: Awaited<ReturnType<typeof join>>) => {
      const call = c.session!.call('self.ping', {});
      c.device.reply((await c.device.nextRequest('tools/call')).id, { content: [{ type: 'text', text: 'pong' }], isError: false });
      expect((await call).content).toEqual([{ type: 'text', text: 'pong' }]);
    };
    return { ...p, join, handled, answers };
  };

  it.each<How>(['websocket', 'mqtt'])('the 5000-level frame and a 5000-level error.message over %s are refused; every device keeps answering', async (how) => {
    const p = parts();
    const attacker = await p.join('02:00:00:00:0d:01', how);
    const healthy = await p.join('02:00:00:00:0d:02', how === 'websocket' ? 'mqtt' : 'websocket');

    attacker.device.send(`{"type":"mcp","payload":{"jsonrpc":"2.0","method":"n","params":{"a":${nested(5000)}}}}`);
    attacker.device.send(`{"session_id":"s","type":"mcp","payload":{"jsonrpc":"2.0","id":999,"error":{"message":${nested(5000)}}}}`);
    attacker.device.send(`{"session_id":"s","type":"mcp","payload":{"jsonrpc":"2.0","id":999,"error":{"message":${deepObject(5000)}}}}`);
    attacker.device.send(`{"type":"listen","state":${deepObject(5000)}}`);
    await p.handled(attacker, 1);

    expect(await metricValue(p.metrics, 'voxgate_frames_rejected_total', { reason: 'too_deep' })).toBe(4);
    expect(p.lines.some((l) => l['msg'] === 'frame rejected' && l['reason'] === 'too_deep' && l['deviceId'] === '02:00:00:00:0d:01')).toBe(true);
    // Both devices, the attacker included, still answer calls.
    await p.answers(healthy);
    await p.answers(attacker);
    // Nesting under the limit is still accepted (a notification reaches the bus).
    attacker.device.sendMcp({ jsonrpc: '2.0', method: 'notifications/deep', params: { a: JSON.parse(nested(50)) as unknown } });
    await expect.poll(() => p.events.find((e) => e.type === 'device.notification')?.data['method']).toBe('notifications/deep');
  });

  it('a reply refused at the parse boundary (too deep) fails the call it answers at once, not at its timeout', async () => {
    const p = parts();
    const c = await p.join('02:00:00:00:0d:03', 'websocket');
    const call = c.session!.call('self.ping', {}, { timeoutMs: 300_000 }).catch((e: unknown) => e);
    const r = await c.device.nextRequest('tools/call');
    c.device.send(`{"session_id":"s","type":"mcp","payload":{"jsonrpc":"2.0","id":${r.id},"result":${nested(5000)}}}`);
    const err = (await call) as GatewayError;
    expect(err.code).toBe('DEVICE_ERROR');
    expect(err.message).toContain('too_deep');
  });
});

/** Issue 9, items 4 and 7: device replies the gateway must still turn into a clear answer. Moved from e2e. */
describe('device replies: unrepairable errors and content items', () => {
  it('repairs an unescaped error message holding a \\u that is not an escape', () => {
    const frame = '{"session_id":"","type":"mcp","payload":{"jsonrpc":"2.0","id":7,"error":{"message":"Bad value \\uZZ "x""}}}';
    const fixed = repairUnescapedErrorMessage(frame);
    expect((JSON.parse(fixed!) as { payload: { error: { message: string } } }).payload.error.message).toBe('Bad value \\uZZ "x"');
    expect(unparsableReplyId('{"session_id":"a"b","type":"mcp","payload":{"jsonrpc":"2.0","id":42,"error":{"message":"x')).toBe(42);
    expect(unparsableReplyId('{"jsonrpc":"2.0","method":"x","id":3}')).toBeUndefined();
  });

  it('a \\u in a device error message no longer loses the reply: the caller gets the message', async () => {
    const { ready } = registryPart();
    const { device, session } = await ready('02:00:00:00:09:01', [ping]);
    const call = session!.call('self.ping', {}, { timeoutMs: 15_000 }).catch((e: unknown) => e);
    const r = await device.nextRequest('tools/call');
    // The firmware writes the exception text into the frame unescaped.
    device.send(`{"session_id":"","type":"mcp","payload":{"jsonrpc":"2.0","id":${r.id},"error":{"message":"Bad path C:\\users\\x "quoted""}}}`);
    const err = (await call) as GatewayError;
    expect(err.code).toBe('DEVICE_ERROR');
    expect(err.message).toContain('Bad path C:\\users\\x "quoted"');
  });

  it('a reply that stays unparsable after repair settles its call at once, with the raw text; the real one is a late reply', async () => {
    const { ready, metrics } = registryPart();
    const { device, session } = await ready('02:00:00:00:09:02', [ping]);
    const call = session!.call('self.ping', {}, { timeoutMs: 15_000 }).catch((e: unknown) => e);
    const req = await device.nextRequest('tools/call');
    const raw = `{"session_id":"","type":"mcp","payload":{"jsonrpc":"2.0","id":${req.id},"error":{"message":"cut "short`;
    device.send(raw);
    const err = (await call) as GatewayError;
    expect(err.code).toBe('DEVICE_ERROR');
    expect(err.message).toBe(`device sent a reply that is not JSON: ${raw}`);
    // The held (real) reply arrives later: a late reply, counted and dropped.
    device.reply(req.id, { content: [{ type: 'text', text: 'late' }], isError: false });
    await expect.poll(() => metricValue(metrics, 'voxgate_late_replies_total')).toBe(1);
    const next = session!.call('self.ping', {});
    device.reply((await device.nextRequest('tools/call')).id, { content: [{ type: 'text', text: 'ok' }], isError: false });
    expect((await next).content).toEqual([{ type: 'text', text: 'ok' }]);
  });

  it('normalizes device content to valid MCP content and counts what was malformed', async () => {
    const data = Buffer.from('jpeg bytes').toString('base64');
    const firmwareImage = JSON.stringify({ type: 'image', image: JSON.stringify({ type: 'image', mimeType: 'image/jpeg', data }) });
    const { ready, metrics } = registryPart();
    const tools = [
      { name: 'photo', description: 'p', inputSchema: { type: 'object' } },
      { name: 'odd', description: 'o', inputSchema: { type: 'object' } },
    ];
    const { device, session } = await ready('02:00:00:00:09:03', tools);
    const callWith = async (name: string, result: string) => {
      const call = session!.call(name, {});
      const r = await device.nextRequest('tools/call');
      device.send(`{"session_id":"","type":"mcp","payload":{"jsonrpc":"2.0","id":${r.id},"result":${result}}}`);
      return (await call).content;
    };
    expect(await callWith('photo', `{"content":[${firmwareImage}],"isError":false}`)).toEqual([{ type: 'image', mimeType: 'image/jpeg', data }]);
    expect(await callWith('odd', '{"content":[{"type":"text","text":42},{"type":"image"},{"type":"video","url":"x"},{"type":"text","text":"fine"}]}')).toEqual([
      { type: 'text', text: '42' },
      { type: 'text', text: '{"type":"image"}' },
      { type: 'text', text: '{"type":"video","url":"x"}' },
      { type: 'text', text: 'fine' },
    ]);
    expect(await metricValue(metrics, 'voxgate_device_content_normalized_total', { kind: 'firmware_image' })).toBe(1);
    expect(await metricValue(metrics, 'voxgate_device_content_normalized_total', { kind: 'malformed' })).toBe(3);
    expect(await metricValue(metrics, 'voxgate_calls_total', { outcome: 'ok_malformed_content' })).toBe(1);
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
