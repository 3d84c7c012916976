import { classifyRpc, type InitializeResult } from '@voxgate/protocol';
import { describe, expect, it } from 'vitest';
import { channelPair, metricValue, silentLog, testSettings } from '../../../test/support/device-parts.js';
import type { InMemoryDevice } from '../../../test/support/in-memory-link.js';
import { CallQueue } from '../../src/devices/call-queue.js';
import type { SessionSettings, SessionState } from '../../src/devices/settings.js';
import { DeviceSetup } from '../../src/devices/setup.js';
import { ToolsPageCache } from '../../src/devices/tools-page-cache.js';
import { GatewayError } from '../../src/errors.js';

const tool = (name: string) => ({ name, description: `the ${name} tool`, inputSchema: { type: 'object', properties: {} } });

/** A setup over an in-memory link; replies take the raw reader first, then the ordinary parse, as in a session. */
function setupPair(overrides: Partial<SessionSettings> = {}, pages = new ToolsPageCache()) {
  const { channel, link, device, metrics, close } = channelPair('mqtt');
  const settings = testSettings(overrides);
  let state: SessionState = 'initializing';
  const session: { readonly state: SessionState; initialize?: InitializeResult | undefined } = {
    get state() {
      return state;
    },
  };
  link.receiver = {
    onText: (text) => {
      if (channel.takeRaw(text)) return;
      const c = classifyRpc((JSON.parse(text) as { payload: unknown }).payload);
      if (!c.ok) return;
      if (c.message.kind === 'response') channel.onResult(c.message.msg.id, c.message.msg.result);
      if (c.message.kind === 'error') channel.onError(c.message.msg.id, c.message.msg.error);
    },
  };
  const isClosed = () => state === 'closed';
  const queue = new CallQueue({ deviceId: 'd1', concurrency: 1, queueLimit: 4, metrics, isClosed, offline: () => channel.offline() });
  // The session makes its logger on first use: a healthy setup never reads it (counted here).
  let logReads = 0;
  const setup = new DeviceSetup({
    deviceId: 'd1',
    get log() {
      logReads++;
      return silentLog;
    },
    metrics,
    settings,
    channel,
    queue,
    pages,
    transport: 'mqtt',
    vision: () => undefined,
    session,
    badInput: { note: () => undefined },
  });
  return { setup, device, metrics, session, close, logReads: () => logReads, setState: (s: SessionState) => (state = s) };
}

/** Answer tools/list pages: each entry a page's tools, a cursor to the next page after all but the last. */
async function servePages(device: InMemoryDevice, pages: string[][]): Promise<void> {
  for (let i = 0; i < pages.length; i++) {
    const r = await device.nextRequest('tools/list');
    expect(r.params?.['cursor']).toBe(i === 0 ? undefined : pages[i]![0]);
    device.reply(r.id, i + 1 < pages.length ? { tools: pages[i]!.map(tool), nextCursor: pages[i + 1]![0] } : { tools: pages[i]!.map(tool) });
  }
}

describe('DeviceSetup: initialize and the tools/list walk', () => {
  it('retries initialize that timed out while the link is up, and says what it is doing meanwhile', async () => {
    const { setup, device, metrics } = setupPair({ requestTimeoutMs: 30, setupRetryMinMs: 5, setupRetryMaxMs: 10 });
    const done = setup.initialize();
    await device.nextRequest('initialize'); // left unanswered: times out
    const second = await device.nextRequest('initialize');
    expect(setup.progress).toMatchObject({ step: 'initialize', attempt: 1 });
    expect(setup.progress?.lastError).toMatch(/did not answer initialize within 30 ms/);
    device.reply(second.id, { protocolVersion: '2024-11-05', capabilities: {}, serverInfo: { name: 'b', version: '1' } });
    await expect(done).resolves.toMatchObject({ serverInfo: { name: 'b' } });
    expect(await metricValue(metrics, 'voxgate_device_setup_retries_total', { step: 'initialize' })).toBe(1);
  });

  it('reads a second device’s initialize reply with the same text as the result already read, without parsing it', async () => {
    const answer = { protocolVersion: '2024-11-05', capabilities: { tools: {} }, serverInfo: { name: 'same-fw', version: '1.2.3' } };
    const mcpFrames = (m: Awaited<ReturnType<typeof setupPair>>['metrics']) => metricValue(m, 'voxgate_frames_received_total', { kind: 'mcp' });
    const first = setupPair();
    const a = first.setup.initialize();
    first.device.reply((await first.device.nextRequest('initialize')).id, answer);
    const second = setupPair();
    const b = second.setup.initialize();
    second.device.reply((await second.device.nextRequest('initialize')).id, answer);
    expect(await b).toBe(await a);
    expect(await a).toEqual(answer);
    // The first reply took the ordinary path (this rig's parser counts nothing); the second was taken from its text.
    expect(await mcpFrames(first.metrics)).toBe(0);
    expect(await mcpFrames(second.metrics)).toBe(1);
    // Another answer, or the same one in another layout, is read (and checked) as usual.
    const third = setupPair();
    const c = third.setup.initialize();
    const id = (await third.device.nextRequest('initialize')).id;
    third.device.send(JSON.stringify({ type: 'mcp', session_id: '', payload: { jsonrpc: '2.0', id, result: { ...answer, protocolVersion: 'x'.repeat(65) } } }));
    expect(await c).toMatchObject({ protocolVersion: 'unknown', serverInfo: { name: 'same-fw' } });
    expect(await mcpFrames(third.metrics)).toBe(0);
  });

  it('walks every page by its cursor; a second device with the same pages reads them from the cache', async () => {
    const pages = new ToolsPageCache();
    const first = setupPair({}, pages);
    const walk1 = first.setup.listTools();
    await servePages(first.device, [['a', 'b'], ['c']]);
    const listed1 = await walk1;
    expect(listed1.catalog.tools.map((t) => t.name)).toEqual(['a', 'b', 'c']);
    expect(listed1.gap).toBeUndefined();
    expect(await metricValue(first.metrics, 'voxgate_tools_pages_total', { source: 'parsed' })).toBe(2);

    const second = setupPair({}, pages);
    const walk2 = second.setup.listTools();
    await servePages(second.device, [['a', 'b'], ['c']]);
    const listed2 = await walk2;
    expect(await metricValue(second.metrics, 'voxgate_tools_pages_total', { source: 'cache' })).toBe(2);
    // Same pages, same (interned) catalog.
    expect(listed2.catalog).toBe(listed1.catalog);
  });

  it('keeps the pages fetched when the device refuses a page for good, and does not ask again', async () => {
    const { setup, device } = setupPair();
    const walk = setup.listTools();
    const p1 = await device.nextRequest('tools/list');
    device.reply(p1.id, { tools: [tool('a'), tool('b')], nextCursor: 'huge' });
    const p2 = await device.nextRequest('tools/list');
    // The firmware's answer to a page holding a tool larger than its page: no code, the same every time.
    device.replyError(p2.id, 'Failed to add tool huge because of payload size limit');
    const listed = await walk;
    expect(listed.catalog.tools.map((t) => t.name)).toEqual(['a', 'b']);
    expect(listed.gap).toEqual({
      page: 2,
      after: 'b',
      error: 'Failed to add tool huge because of payload size limit',
      warning: 'catalog incomplete: tool after b refused by the device',
    });
    expect(device.frames.filter((f) => f.includes('tools/list'))).toHaveLength(2);
    expect(setup.progress).toBeUndefined();
  });

  it('retries a malformed page up to setupMaxErrors times, then fails with what was wrong', async () => {
    const { setup, device, metrics } = setupPair({ setupMaxErrors: 2 });
    const walk = setup.listTools().catch((e: unknown) => e);
    for (let i = 0; i < 2; i++) {
      const r = await device.nextRequest('tools/list');
      device.reply(r.id, { tools: 'not a list' });
    }
    const err = (await walk) as GatewayError;
    expect(err).toBeInstanceOf(GatewayError);
    expect(err.code).toBe('DEVICE_ERROR');
    expect(err.message).toMatch(/^malformed tools\/list page 1: /);
    expect(await metricValue(metrics, 'voxgate_device_setup_retries_total', { step: 'tools_list' })).toBe(1);
  });

  it('setup(): initialize then every page, one reply after another; the initialize result is the session’s before the walk', async () => {
    const { setup, device, session, logReads } = setupPair();
    const done = setup.setup();
    const init = await device.nextRequest('initialize');
    device.reply(init.id, { protocolVersion: '2024-11-05', capabilities: {}, serverInfo: { name: 'fw', version: '2' } });
    const p1 = await device.nextRequest('tools/list');
    expect(session.initialize).toMatchObject({ serverInfo: { name: 'fw', version: '2' } });
    expect(p1.params).toEqual({ withUserTools: true });
    device.reply(p1.id, { tools: [tool('a')], nextCursor: 'b' });
    const p2 = await device.nextRequest('tools/list');
    expect(p2.params).toEqual({ withUserTools: true, cursor: 'b' });
    device.reply(p2.id, { tools: [tool('b')], nextCursor: 'c' });
    const p3 = await device.nextRequest('tools/list');
    device.reply(p3.id, { tools: [tool('c')] });
    const listed = await done;
    expect(listed.catalog.tools.map((t) => t.name)).toEqual(['a', 'b', 'c']);
    expect(listed.gap).toBeUndefined();
    expect(setup.progress).toBeUndefined();
    // Nothing was logged, so the session's logger was never asked for (it would be a child logger per device).
    expect(logReads()).toBe(0);
  });

  it('setup(): a step that fails goes on in the retrying path from that step, its failure counted as the first attempt', async () => {
    const { setup, device, metrics, session } = setupPair({ requestTimeoutMs: 30, setupRetryMinMs: 5, setupRetryMaxMs: 10, setupMaxErrors: 2 });
    const done = setup.setup();
    await device.nextRequest('initialize'); // left unanswered: times out
    const second = await device.nextRequest('initialize');
    expect(setup.progress).toMatchObject({ step: 'initialize', attempt: 1 });
    device.reply(second.id, { protocolVersion: '2024-11-05', capabilities: {}, serverInfo: { name: 'fw', version: '3' } });
    const p1 = await device.nextRequest('tools/list');
    expect(session.initialize).toMatchObject({ serverInfo: { version: '3' } });
    device.reply(p1.id, { tools: [tool('a')], nextCursor: 'b' });
    const p2 = await device.nextRequest('tools/list');
    device.reply(p2.id, { tools: 'not a list' }); // malformed: asked again, with the same cursor
    const again = await device.nextRequest('tools/list');
    expect(again.params).toEqual({ withUserTools: true, cursor: 'b' });
    expect(setup.progress).toMatchObject({ step: 'tools/list page 2', attempt: 1 });
    device.reply(again.id, { tools: [tool('b')] });
    expect((await done).catalog.tools.map((t) => t.name)).toEqual(['a', 'b']);
    expect(await metricValue(metrics, 'voxgate_device_setup_retries_total', { step: 'initialize' })).toBe(1);
    expect(await metricValue(metrics, 'voxgate_device_setup_retries_total', { step: 'tools_list' })).toBe(1);
    // Page 1 was asked once: the retry went on from page 2.
    expect(device.frames.filter((f) => f.includes('tools/list'))).toHaveLength(3);
  });

  it('setup(): setupMaxErrors counts the first, reply-driven attempt; a page refused for good ends the walk there', async () => {
    const failing = setupPair({ setupMaxErrors: 2, setupRetryMinMs: 1, setupRetryMaxMs: 2 });
    const failed = failing.setup.setup().catch((e: unknown) => e);
    failing.device.reply((await failing.device.nextRequest('initialize')).id, {
      protocolVersion: '2024-11-05',
      capabilities: {},
      serverInfo: { name: 'x', version: '1' },
    });
    for (let i = 0; i < 2; i++) failing.device.reply((await failing.device.nextRequest('tools/list')).id, { tools: 'not a list' });
    expect(await failed).toMatchObject({ code: 'DEVICE_ERROR', message: expect.stringMatching(/^malformed tools\/list page 1: /) });
    expect(await metricValue(failing.metrics, 'voxgate_device_setup_retries_total', { step: 'tools_list' })).toBe(1);

    const refusing = setupPair();
    const done = refusing.setup.setup();
    refusing.device.reply((await refusing.device.nextRequest('initialize')).id, {
      protocolVersion: '2024-11-05',
      capabilities: {},
      serverInfo: { name: 'x', version: '1' },
    });
    refusing.device.reply((await refusing.device.nextRequest('tools/list')).id, { tools: [tool('a')], nextCursor: 'huge' });
    refusing.device.replyError((await refusing.device.nextRequest('tools/list')).id, 'Failed to add tool huge because of payload size limit');
    const listed = await done;
    expect(listed.catalog.tools.map((t) => t.name)).toEqual(['a']);
    expect(listed.gap).toMatchObject({ page: 2, after: 'a' });
    expect(refusing.device.frames.filter((f) => f.includes('tools/list'))).toHaveLength(2);
  });

  it('setup(): a closed session fails at once with DEVICE_OFFLINE, nothing sent', async () => {
    const { setup, device, setState, close } = setupPair();
    setState('closed');
    close();
    await expect(setup.setup()).rejects.toMatchObject({ code: 'DEVICE_OFFLINE' });
    expect(device.frames).toHaveLength(0);
  });

  it('stops retrying when the session closes during the backoff', async () => {
    const { setup, device, setState } = setupPair({ requestTimeoutMs: 20, setupRetryMinMs: 10_000, setupRetryMaxMs: 10_000 });
    const done = setup.initialize().catch((e: unknown) => e);
    await device.nextRequest('initialize');
    await expect.poll(() => setup.progress).toBeDefined();
    setState('closed');
    setup.close();
    expect(await done).toMatchObject({ code: 'DEVICE_OFFLINE' });
  });
});
