import { classifyRpc } from '@voxgate/protocol';
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
  const { channel, link, device, metrics } = channelPair('mqtt');
  const settings = testSettings(overrides);
  let state: SessionState = 'initializing';
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
  const setup = new DeviceSetup({
    deviceId: 'd1',
    log: silentLog,
    metrics,
    settings,
    channel,
    queue,
    pages,
    transport: 'mqtt',
    vision: () => undefined,
    session: {
      get state() {
        return state;
      },
    },
  });
  return { setup, device, metrics, setState: (s: SessionState) => (state = s) };
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
