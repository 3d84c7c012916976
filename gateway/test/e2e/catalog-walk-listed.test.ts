import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { WebSocket, type RawData } from 'ws';
import { startTestGateway, type TestGateway } from '../../../test/support/gateway-harness.js';
import { once } from '../../../test/support/wait.js';

/** session.maxCatalogBytes and session.maxToolPages at their defaults. */
const MAX_CATALOG = 256 * 1024;
const MAX_PAGES = 64;

/** A page's worth of something the catalog does not keep: ~48 KiB, under the WebSocket frame bound. */
const PAGE_PAD = 48 * 1024;

/** A schema nested deeper than schemas.maxDepth (32), within the frame's depth (64): the tool is left out. */
const tooDeep = (): Record<string, unknown> => {
  let s: Record<string, unknown> = { type: 'object' };
  for (let i = 0; i < 20; i++) s = { type: 'object', properties: { a: s } };
  return s;
};

/**
 * A device whose every tools/list page goes on (a new cursor each time) and carries what `page` makes of its number:
 * the pages it was asked for are counted.
 */
async function walker(t: TestGateway, deviceId: string, page: (n: number) => Record<string, unknown>) {
  const ws = new WebSocket(t.wsUrl, { headers: { 'Device-Id': deviceId, 'Client-Id': 'c' }, perMessageDeflate: false });
  await once(ws, 'open');
  const asked = { pages: 0 };
  const reply = (id: number, result: unknown) => ws.send(JSON.stringify({ session_id: 's', type: 'mcp', payload: { jsonrpc: '2.0', id, result } }));
  ws.on('message', (data: RawData, binary: boolean) => {
    if (binary) return;
    const p = (JSON.parse(String(data)) as { payload?: { id: number; method: string; params?: { cursor?: string } } }).payload;
    if (p?.method === 'initialize') reply(p.id, { protocolVersion: '2024-11-05', capabilities: { tools: {} }, serverInfo: { name: 'walker', version: '1' } });
    if (p?.method !== 'tools/list') return;
    asked.pages++;
    const n = p.params?.cursor === undefined ? 1 : Number(p.params.cursor.slice(1)) + 1;
    reply(p.id, { ...page(n), nextCursor: `c${n}` });
  });
  const incomplete = t.nextEvent('device.catalog_incomplete', deviceId);
  ws.send(JSON.stringify({ type: 'hello', version: 1, transport: 'websocket' }));
  return { ws, asked, incomplete: await incomplete };
}

/**
 * A walk stops asking once its pages hold session.maxCatalogBytes, so that what a device's catalog costs to read is
 * bounded too. Only the tools kept counted (red team 11): a page of tools left out (schemas over the bounds) or of a
 * member no page needs counted nothing, so a device was asked for every one of session.maxToolPages pages, each as large
 * as a frame (64 pages of 256 KiB over MQTT, 16 MiB read per walk), and again after each list_changed it sent, once a
 * second: no read budget counts replies. 612 pages (143 MB) from one MQTT device in 10 s.
 */
describe('a tools/list walk is bounded by what the device listed, kept or not', () => {
  let t: TestGateway;
  const sockets: WebSocket[] = [];
  beforeAll(async () => {
    t = await startTestGateway();
  });
  afterAll(async () => {
    for (const ws of sockets) ws.terminate();
    await t.close();
  });

  const pagesFor = (bytesPerPage: number) => Math.ceil(MAX_CATALOG / bytesPerPage);

  it('stops at the bound on pages of members a page does not define, keeping the tools listed before it', async () => {
    const deviceId = '02:00:00:00:0f:01';
    const { ws, asked, incomplete } = await walker(t, deviceId, (n) => ({
      tools: [{ name: `t${n}`, inputSchema: { type: 'object' } }],
      pad: 'x'.repeat(PAGE_PAD),
    }));
    sockets.push(ws);
    expect(asked.pages).toBe(pagesFor(PAGE_PAD));
    expect(asked.pages).toBeLessThan(MAX_PAGES);
    const summary = (await t.api<{ state: string; toolCount: number; catalogWarning?: string }>('GET', `/v1/devices/${deviceId}`)).body;
    expect(summary).toMatchObject({ state: 'ready', toolCount: asked.pages });
    expect(summary.catalogWarning).toBe(`catalog cut: over ${MAX_CATALOG} bytes (session.maxCatalogBytes) after t${asked.pages}`);
    expect(incomplete.data).toMatchObject({ page: asked.pages + 1, after: `t${asked.pages}` });
    const line = t.logs.find((l) => l['msg'] === 'device catalog over session.maxCatalogBytes; catalog cut' && l['deviceId'] === deviceId);
    expect(line?.['listedBytes']).toBeGreaterThanOrEqual(MAX_CATALOG);

    // A relist after list_changed is the same walk, with the same bound.
    const again = t.nextEvent('device.catalog_incomplete', deviceId);
    asked.pages = 0;
    ws.send(JSON.stringify({ session_id: 's', type: 'mcp', payload: { jsonrpc: '2.0', method: 'notifications/tools/list_changed' } }));
    await again;
    expect(asked.pages).toBe(pagesFor(PAGE_PAD));
  });

  it('stops at the bound on pages of tools left out for their schemas', async () => {
    const deviceId = '02:00:00:00:0f:02';
    // Ten tools of ~5 KiB a page, each nested too deep: none is kept, every one is read.
    const leftOut = (n: number) => Array.from({ length: 10 }, (_, i) => ({ name: `deep${n}_${i}`, description: 'd'.repeat(4000), inputSchema: tooDeep() }));
    const refusedBefore = await t.metric('voxgate_schemas_refused_total');
    const { ws, asked } = await walker(t, deviceId, (n) => ({ tools: leftOut(n) }));
    sockets.push(ws);
    const bytesPerPage = leftOut(1).reduce((sum, tool) => sum + Buffer.byteLength(JSON.stringify(tool)) + 1, 0);
    expect(asked.pages).toBe(pagesFor(bytesPerPage));
    expect(asked.pages).toBeLessThan(MAX_PAGES);
    expect(await t.metric('voxgate_schemas_refused_total')).toBe(refusedBefore + 10 * asked.pages);
    // Each is counted; the lines about them are the device's bad input, 20 a minute (a line per tool before: a page of
    // a thousand such tools wrote a thousand lines, on every walk).
    const lines = t.logs.filter((l) => l['msg'] === 'tool schema over the bounds; tool left out of the catalog' && l['deviceId'] === deviceId);
    expect(lines.length).toBeGreaterThan(0);
    expect(lines.length).toBeLessThanOrEqual(20);
    expect((await t.api('GET', `/v1/devices/${deviceId}`)).body).toMatchObject({ state: 'ready', toolCount: 0 });
  });
});
