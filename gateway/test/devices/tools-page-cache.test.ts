import { referenceResultTail, referenceResultText } from '@voxgate/protocol';
import { describe, expect, it } from 'vitest';
import { HELLO, metricValue, registryPart } from '../../../test/support/device-parts.js';
import type { InMemoryDevice } from '../../../test/support/in-memory-link.js';
import { referenceTools, toolJson, type RefTool } from '../../../test/support/reference-device.js';
import { ToolsPageCache } from '../../src/devices/tools-page-cache.js';

const after = referenceResultTail(7);

/** A firmware's tools/list pages, `perPage` tools each, as the exact text it sends. */
function firmwarePages(tools: RefTool[], perPage: number): string[] {
  const pages: string[] = [];
  for (let i = 0; i < tools.length; i += perPage) {
    const next = tools[i + perPage];
    pages.push(
      `{"tools":[${tools
        .slice(i, i + perPage)
        .map(toolJson)
        .join(',')}]${next ? `,"nextCursor":"${next.name}"` : ''}}`,
    );
  }
  return pages;
}

/** Answer setup in the firmware's exact reply layout, page after page. */
async function serveFirmware(device: InMemoryDevice, pages: string[], sessionId = ''): Promise<void> {
  const raw = (id: number, result: string) =>
    device.send(`{"session_id":"${sessionId}","type":"mcp","payload":{"jsonrpc":"2.0","id":${id},"result":${result}}}`);
  raw((await device.nextRequest('initialize')).id, '{"protocolVersion":"2024-11-05","capabilities":{"tools":{}},"serverInfo":{"name":"ref","version":"1"}}');
  for (const page of pages) raw((await device.nextRequest('tools/list')).id, page);
}

const extra = (n: number): RefTool[] =>
  Array.from({ length: n }, (_, i) => ({
    name: `self.extra_${i}`,
    description: `Extra tool ${i}`,
    properties: { value: { type: 'integer' } },
    run: () => true,
  }));

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

  it('keeps one entry per text, each with its own serial, and drops the oldest past its bound', () => {
    const cache = new ToolsPageCache(2);
    const a = cache.store('a', { tools: [] });
    expect(cache.store('a', { tools: [{ name: 'other', inputSchema: { type: 'object' } }] })).toBe(a);
    const b = cache.store('b', { tools: [] });
    expect(b.serial).not.toBe(a.serial);
    cache.store('c', { tools: [] });
    expect(cache.get('a')).toBeUndefined();
    expect(cache.get('b')).toBe(b);
  });

  it('holds at most 4 Mi characters of page text: pages as large as a frame push out the oldest (red team 11)', () => {
    // 256 pages of 200 000 characters each, as one device listing made-up pages would send: before, all 256 were kept.
    const cache = new ToolsPageCache();
    const texts = Array.from({ length: 256 }, (_, i) => `{"tools":[],"pad":"${String(i).padStart(200_000, 'x')}"}`);
    for (const t of texts) cache.store(t, { tools: [] });
    const kept = texts.filter((t) => cache.get(t) !== undefined);
    expect(kept.length * 200_000).toBeLessThanOrEqual(4 * 1024 * 1024);
    expect(kept).toEqual(texts.slice(texts.length - kept.length));
    // A firmware's pages (under 8 KB) still fill all 256 places.
    const small = Array.from({ length: 256 }, (_, i) => `{"tools":[],"pad":"${String(i).padStart(7900, 'y')}"}`);
    for (const t of small) cache.store(t, { tools: [] });
    expect(small.every((t) => cache.get(t) !== undefined)).toBe(true);
  });

  it('finds a page by equal text from any string, and never one it dropped, however recently it was found', () => {
    const cache = new ToolsPageCache(2);
    const a = cache.store('{"tools":[],"x":1}', { tools: [] });
    const b = cache.store('{"tools":[],"x":2}', { tools: [] });
    // Equal texts that are other strings (a slice of a frame, as the page reader passes them).
    const frame = 'xx{"tools":[],"x":1}{"tools":[],"x":2}';
    expect(cache.get(frame.slice(2, 20))).toBe(a);
    expect(cache.get(frame.slice(20))).toBe(b);
    expect(cache.get('{"tools":[],"x":3}')).toBeUndefined();
    cache.store('{"tools":[],"x":3}', { tools: [] });
    expect(cache.get(frame.slice(2, 20))).toBeUndefined();
    expect(cache.get(frame.slice(20))).toBe(b);
    // More distinct pages than are compared first: each is still found (by the Map), and stays the same entry.
    const many = new ToolsPageCache();
    const texts = Array.from({ length: 20 }, (_, i) => `{"tools":[],"n":${i}}`);
    const pages = texts.map((t) => many.store(t, { tools: [] }));
    for (let round = 0; round < 2; round++) texts.forEach((t, i) => expect(many.get(` ${t}`.slice(1))).toBe(pages[i]));
  });

  it('parses a firmware’s pages once; later devices with the same pages share them, others do not', async () => {
    const { registry, metrics, connect } = registryPart({ pages: new ToolsPageCache() });
    const join = async (deviceId: string, pages: string[], transport: 'websocket' | 'mqtt' = 'websocket') => {
      const { device } = connect(deviceId, { transport });
      if (transport === 'websocket') device.send(HELLO);
      await serveFirmware(device, pages, transport === 'websocket' ? 's-1' : '');
      await expect.poll(() => registry.get(deviceId)?.state).toBe('ready');
      return registry.get(deviceId)!.toolsHash;
    };
    const count = async () => ({
      parsed: await metricValue(metrics, 'voxgate_tools_pages_total', { source: 'parsed' }),
      cache: await metricValue(metrics, 'voxgate_tools_pages_total', { source: 'cache' }),
    });
    const tools = [...referenceTools(), ...extra(40)];
    const pages = firmwarePages(tools, 16);
    expect(pages.length).toBeGreaterThanOrEqual(3);

    const h1 = await join('02:00:00:00:07:01', pages);
    const first = await count();
    expect(first).toEqual({ parsed: pages.length, cache: 0 });
    const h2 = await join('02:00:00:00:07:02', pages);
    const h3 = await join('02:00:00:00:07:03', pages, 'mqtt');
    const second = await count();
    expect(second.parsed).toBe(first.parsed);
    expect(second.cache).toBe(2 * first.parsed);
    expect([h2, h3]).toEqual([h1, h1]);
    expect(registry.find('02:00:00:00:07:03')!.catalog).toBe(registry.find('02:00:00:00:07:01')!.catalog);

    // One changed description: a page of its own, and a catalog of its own.
    const changed = tools.map((x) => (x.name === 'self.audio_speaker.set_volume' ? { ...x, description: `${x.description}!` } : x));
    const h4 = await join('02:00:00:00:07:04', firmwarePages(changed, 16));
    expect(h4).not.toBe(h1);
    expect((await count()).parsed).toBe(second.parsed + 1);
  });

  it('one device cannot poison the catalog another device gets (issue 8, defect 2)', async () => {
    const { registry, connect } = registryPart({ pages: new ToolsPageCache() });
    // A catalog of its own (one changed description), so no other test has cached this page text.
    const victimTools = referenceTools().map((x) => (x.name === 'self.get_device_status' ? { ...x, description: `${x.description} (poison test)` } : x));
    // The victim firmware's first page, byte for byte (the attacker knows the firmware).
    const victimPage = `{"tools":[${victimTools.map(toolJson).join(',')}]}`;
    const evilPage = JSON.stringify({ tools: victimTools.map((x) => JSON.parse(toolJson({ ...x, userOnly: false })) as unknown) });

    const attacker = connect('02:00:00:00:08:01').device;
    attacker.send(HELLO);
    const init = await attacker.nextRequest('initialize');
    attacker.reply(init.id, { protocolVersion: '2024-11-05', capabilities: {}, serverInfo: { name: 'x', version: '1' } });
    const list = await attacker.nextRequest('tools/list');
    // Frame A: the victim's exact page text, in an envelope the gateway refuses (300-char session id).
    attacker.send(`{"session_id":"${'x'.repeat(300)}","type":"mcp","payload":{"jsonrpc":"2.0","id":${list.id},"result":${victimPage}}}`);
    // Frame B: settles the same request with the evil page, in another key order (off the fast path).
    attacker.send(`{"type":"mcp","session_id":"s","payload":{"jsonrpc":"2.0","id":${list.id},"result":${evilPage}}}`);
    await expect.poll(() => registry.get('02:00:00:00:08:01')?.state).toBe('ready');
    expect(registry.find('02:00:00:00:08:01')!.catalog!.get('self.reboot')?.userOnly).toBe(false); // the attacker got its own forgery

    const victim = connect('02:00:00:00:08:02').device;
    victim.send(HELLO);
    await serveFirmware(victim, [victimPage], 's-2');
    await expect.poll(() => registry.get('02:00:00:00:08:02')?.state).toBe('ready');
    const catalog = registry.find('02:00:00:00:08:02')!.catalog!;
    expect(catalog.tools.map((x) => x.name)).toEqual(victimTools.map((x) => x.name));
    expect(catalog.get('self.reboot')?.userOnly).toBe(true);
  });
});
