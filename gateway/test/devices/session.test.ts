import { describe, expect, it } from 'vitest';
import { answerSetup, metricValue, sessionPair } from '../../../test/support/device-parts.js';
import { RELIST_GAP_MS } from '../../src/devices/setup.js';
import type { VoiceHook } from '../../src/devices/voice-hook.js';
import { GatewayError } from '../../src/errors.js';

const tool = (name: string) => ({ name, description: `the ${name} tool`, inputSchema: { type: 'object', properties: {} } });

/** A WebSocket session past its hello and setup, with `tools`. */
async function readySession(opts: Parameters<typeof sessionPair>[0] = {}, tools = [tool('self.ping')]) {
  const t = sessionPair(opts);
  t.session.start();
  t.device.send(JSON.stringify({ type: 'hello', version: 1, transport: 'websocket', features: { mcp: true } }));
  await answerSetup(t.device, tools);
  await expect.poll(() => t.session.state).toBe('ready');
  return t;
}

describe('DeviceSession: frame dispatch', () => {
  it('answers the hello, then initializes and lists tools, and says the device is ready', async () => {
    const { session, device, events } = await readySession();
    const hello = JSON.parse(device.frames[0]!) as Record<string, unknown>;
    expect(hello).toMatchObject({ type: 'hello', session_id: session.sessionId });
    expect(session.catalog?.tools.map((t) => t.name)).toEqual(['self.ping']);
    expect(events.map((e) => e.type)).toEqual(['device.ready']);
    expect(events[0]!.data).toMatchObject({ toolCount: 1, server: { name: 'sim-board' } });
    expect(session.catalogWarning).toBeUndefined();
  });

  it('says which call timed out and after how long, with the timeout the caller asked for', async () => {
    const { session, device } = await readySession();
    const first = session.call('self.ping', {}, { timeoutMs: 300 }).catch((e: unknown) => e);
    const second = session.call('self.ping', {}, { timeoutMs: 600 }).catch((e: unknown) => e);
    await device.nextRequest('tools/call');
    const e1 = (await first) as GatewayError;
    expect(e1).toBeInstanceOf(GatewayError);
    expect(e1.code).toBe('DEVICE_TIMEOUT');
    expect(e1.message).toBe('device 02:00:00:00:00:01 did not answer tools/call within 300 ms');
    // The second waited behind the first: its error names its own timeout, not what was left of it.
    await device.nextRequest('tools/call');
    expect(((await second) as GatewayError).message).toBe('device 02:00:00:00:00:01 did not answer tools/call within 600 ms');
  });

  it('passes a tool result on, with its duration', async () => {
    const { session, device } = await readySession();
    const call = session.call('self.ping', {});
    const r = await device.nextRequest('tools/call');
    expect(r.params).toEqual({ name: 'self.ping', arguments: {} });
    device.reply(r.id, { content: [{ type: 'text', text: 'pong' }], isError: false });
    const out = await call;
    expect(out.content).toEqual([{ type: 'text', text: 'pong' }]);
    expect(out.durationMs).toBeGreaterThanOrEqual(0);
  });

  it('refuses an unknown tool before anything is sent', async () => {
    const { session } = await readySession();
    await expect(session.call('self.nope', {})).rejects.toMatchObject({ code: 'TOOL_NOT_FOUND' });
  });

  it('fails the pending call at once when its reply is not JSON', async () => {
    const { session, device, metrics } = await readySession();
    const call = session.call('self.ping', {}).catch((e: unknown) => e);
    const r = await device.nextRequest('tools/call');
    device.send(`{"session_id":"","type":"mcp","payload":{"jsonrpc":"2.0","id":${r.id},"result":{broken`);
    const err = (await call) as GatewayError;
    expect(err.code).toBe('DEVICE_ERROR');
    expect(err.message).toMatch(/^device sent a reply that is not JSON/);
    expect(await metricValue(metrics, 'voxgate_frames_rejected_total', { reason: 'not_json' })).toBe(1);
  });

  it('publishes notifications, relists on list_changed, and answers a device request with -32601', async () => {
    const { session, device, events } = await readySession();
    device.sendMcp({ jsonrpc: '2.0', method: 'notifications/tools/list_changed' });
    const list = await device.nextRequest('tools/list');
    device.reply(list.id, { tools: [tool('self.ping'), tool('self.pong')] });
    await expect.poll(() => session.catalog?.size).toBe(2);
    expect(events.map((e) => e.type)).toEqual(['device.ready', 'device.notification', 'device.tools_changed']);
    expect(events[2]!.data).toMatchObject({ toolCount: 2, reason: 'notification' });

    device.sendMcp({ jsonrpc: '2.0', id: 7, method: 'sampling/createMessage' });
    const answer = JSON.parse(await device.next((t) => t.includes('"id":7'))) as { payload: unknown };
    expect(answer.payload).toEqual({ jsonrpc: '2.0', id: 7, error: { code: -32601, message: 'Method not found: sampling/createMessage' } });
  });

  it('reads the list once more for a list_changed that came mid-walk, no sooner than RELIST_GAP_MS after', async () => {
    const { session, device, events } = await readySession();
    const changed = () => device.sendMcp({ jsonrpc: '2.0', method: 'notifications/tools/list_changed' });
    const before = Date.now(); // before the first walk began: the second begins RELIST_GAP_MS after it at least
    changed();
    const first = await device.nextRequest('tools/list');
    changed(); // the device changed again while the gateway was reading
    device.reply(first.id, { tools: [tool('self.a'), tool('self.b')] });
    const second = await device.nextRequest('tools/list');
    expect(Date.now() - before).toBeGreaterThanOrEqual(RELIST_GAP_MS);
    device.reply(second.id, { tools: [tool('self.a'), tool('self.b'), tool('self.c')] });
    await expect.poll(() => session.catalog?.size).toBe(3);
    // One walk, one event: the first reading was superseded before it was published.
    expect(events.filter((e) => e.type === 'device.tools_changed').map((e) => e.data['toolCount'])).toEqual([3]);
  });

  it('walks at most once per RELIST_GAP_MS for a device that says list_changed after every reply', async () => {
    const { device } = await readySession();
    const before = Date.now();
    device.sendMcp({ jsonrpc: '2.0', method: 'notifications/tools/list_changed' });
    for (let i = 0; i < 3; i++) {
      const list = await device.nextRequest('tools/list');
      device.reply(list.id, { tools: [tool('self.ping')] });
      device.sendMcp({ jsonrpc: '2.0', method: 'notifications/tools/list_changed' });
    }
    // The third walk began two gaps after the first at least. Before, each walk followed the last reply by one round
    // trip (a red team's device: ~20 walks a second).
    expect(Date.now() - before).toBeGreaterThanOrEqual(2 * RELIST_GAP_MS);
  });

  it('gives other JSON to the voice hook first, and publishes what it does not take', async () => {
    const taken: string[] = [];
    const voice: VoiceHook = {
      onHello: () => true,
      onJson: (_d, frame) => (frame.type === 'listen' ? (taken.push(frame.type), true) : false),
      onAudio: () => false,
      onClosed: () => undefined,
    };
    const { device, events } = await readySession({ deps: { voice } });
    device.send('{"type":"listen","state":"start"}');
    device.send('{"type":"abort"}');
    await expect.poll(() => events.length).toBe(2);
    expect(taken).toEqual(['listen']);
    expect(events[1]).toMatchObject({ type: 'device.message', data: { message: { type: 'abort' } } });
  });

  it('keeps the catalog it has when the device refuses a page for good: ready, with a warning', async () => {
    const { session, device, events, metrics } = sessionPair({ transport: 'mqtt' });
    session.start();
    const init = await device.nextRequest('initialize');
    device.reply(init.id, { protocolVersion: '2024-11-05', capabilities: {}, serverInfo: { name: 'b', version: '1' } });
    const p1 = await device.nextRequest('tools/list');
    device.reply(p1.id, { tools: [tool('a')], nextCursor: 'big' });
    const p2 = await device.nextRequest('tools/list');
    device.replyError(p2.id, 'Failed to add tool big because of payload size limit');
    await expect.poll(() => session.state).toBe('ready');
    expect(session.catalog?.tools.map((t) => t.name)).toEqual(['a']);
    expect(session.catalogWarning).toBe('catalog incomplete: tool after a refused by the device');
    expect(events.map((e) => e.type)).toEqual(['device.ready', 'device.catalog_incomplete']);
    expect(events[1]!.data).toEqual({
      warning: 'catalog incomplete: tool after a refused by the device',
      page: 2,
      after: 'a',
      error: 'Failed to add tool big because of payload size limit',
      toolCount: 1,
    });
    expect(await metricValue(metrics, 'voxgate_device_catalogs_incomplete_total')).toBe(1);
  });

  it('fails what waits when the link closes, and is offline after', async () => {
    const { session, device } = await readySession();
    const call = session.call('self.ping', {}).catch((e: unknown) => e);
    await device.nextRequest('tools/call');
    device.disconnect('websocket closed (1006)');
    expect(await call).toMatchObject({ code: 'DEVICE_OFFLINE', message: 'device 02:00:00:00:00:01 disconnected (websocket closed (1006))' });
    expect(session.state).toBe('closed');
    await expect(session.rpc('ping', undefined)).rejects.toMatchObject({ code: 'DEVICE_OFFLINE' });
  });

  it('closes a WebSocket device that never says hello', async () => {
    const { session, link } = sessionPair({ settings: { requestTimeoutMs: 20 } });
    session.start();
    await expect.poll(() => link.closed).toEqual({ code: 4002, reason: 'expected a hello' });
  });
});
