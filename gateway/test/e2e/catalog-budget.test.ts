import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startTestGateway, type TestGateway } from '../../../test/support/gateway-harness.js';
import { ReferenceDevice, toolJson, type RefTool } from '../../../test/support/reference-device.js';

/** What the gateway says of a device (GET /v1/devices/{id}). */
interface Summary {
  state: string;
  toolCount: number;
  catalogWarning?: string;
}
interface ToolsBody {
  tools: Array<{ name: string }>;
}
interface CallBody {
  content: Array<{ type: string; text?: string }>;
  isError: boolean;
}

/** `n` tools of ~480 bytes each, named after `prefix`: devices with other prefixes have other catalogs. */
function padded(prefix: string, n: number): RefTool[] {
  return Array.from({ length: n }, (_, i) => ({
    name: `self.${prefix}.tool_${i}`,
    description: `${prefix} tool ${i}: ${'x'.repeat(400)}`,
    properties: { level: { type: 'integer', minimum: 0, maximum: 100 } },
    run: (args) => ({ prefix, i, level: args['level'] ?? null }),
  }));
}

/** The size of these tools as the gateway counts them: each one's JSON and its comma. */
const listedBytes = (tools: RefTool[]) => tools.reduce((sum, t) => sum + Buffer.byteLength(toolJson(t)) + 1, 0);

let mac = 0x10;
const nextMac = () => `02:00:00:00:0b:${(mac++).toString(16).padStart(2, '0')}`;

/** Gateways of their own (one per describe), reference-firmware devices over real WebSockets. */
function fleet() {
  const devices: ReferenceDevice[] = [];
  return {
    device(tools: RefTool[]): ReferenceDevice {
      const d = new ReferenceDevice({ deviceId: nextMac(), tools });
      devices.push(d);
      return d;
    },
    async online(t: TestGateway, d: ReferenceDevice): Promise<Summary> {
      const ready = t.nextEvent('device.ready', d.deviceId);
      await d.connectWebSocket(t.wsUrl);
      await ready;
      return (await t.api<Summary>('GET', `/v1/devices/${d.deviceId}`)).body;
    },
    stop(): void {
      for (const d of devices.splice(0)) d.terminate();
    },
  };
}

describe('one device’s catalog over session.maxCatalogBytes', () => {
  const MAX = 8192;
  let t: TestGateway;
  const f = fleet();
  beforeAll(async () => {
    t = await startTestGateway({ session: { maxCatalogBytes: MAX } });
  });
  afterEach(() => f.stop());
  afterAll(() => t.close());

  it('stops the walk at the bound and cuts the catalog at a tool: the device is ready with the tools that fit and says why', async () => {
    const tools = padded('big', 40); // ~19 KB: three 8000-byte pages
    const d = f.device(tools);
    const incomplete = t.nextEvent('device.catalog_incomplete', d.deviceId);
    const summary = await f.online(t, d);
    expect(summary.state).toBe('ready');
    expect(summary.catalogWarning).toMatch(/^catalog cut: over 8192 bytes \(session\.maxCatalogBytes\) after self\.big\.tool_\d+$/);

    // The tools kept are the first ones listed, as many as fit in the bound, and not one more.
    const listed = (await t.api<ToolsBody>('GET', `/v1/devices/${d.deviceId}/tools`)).body.tools.map((x) => x.name);
    const kept = listed.length;
    expect(summary.toolCount).toBe(kept);
    expect(kept).toBeGreaterThan(0);
    expect(listed).toEqual(tools.slice(0, kept).map((x) => x.name));
    expect(listedBytes(tools.slice(0, kept))).toBeLessThanOrEqual(MAX);
    expect(listedBytes(tools.slice(0, kept + 1))).toBeGreaterThan(MAX);

    // The walk stopped at the page the bound fell in, though the device had more to list.
    const lists = d.mcpReceived.filter((p) => p['method'] === 'tools/list');
    const event = await incomplete;
    expect(event.data).toMatchObject({ page: lists.length, after: listed[kept - 1], toolCount: kept });
    const replies = d.sent.filter((s) => s.includes('"tools":['));
    expect(replies).toHaveLength(lists.length);
    expect(replies[replies.length - 1]).toContain('"nextCursor"');

    expect(await t.metric('voxgate_device_catalogs_cut_total', { reason: 'device_bytes' })).toBe(1);
    const line = t.logs.find((l) => l['msg'] === 'device catalog over session.maxCatalogBytes; catalog cut');
    expect(line).toMatchObject({ deviceId: d.deviceId, reason: 'device_bytes', cap: MAX, page: lists.length });

    // What was kept works; what was cut is not the device's tool here.
    const ok = await t.api<CallBody>('POST', `/v1/devices/${d.deviceId}/tools/self.big.tool_0/call`, { arguments: { level: 7 } });
    expect(ok.status).toBe(200);
    expect(ok.body.isError).toBe(false);
    expect(ok.body.content[0]?.text).toContain('"level":7');
    const cut = await t.api('POST', `/v1/devices/${d.deviceId}/tools/self.big.tool_39/call`, { arguments: { level: 7 } });
    expect(cut.status).toBe(404);
  });

  it('leaves a catalog within the bound whole, with no warning', async () => {
    const tools = padded('small', 10);
    expect(listedBytes(tools)).toBeLessThan(MAX);
    const summary = await f.online(t, f.device(tools));
    expect(summary).toMatchObject({ state: 'ready', toolCount: 10 });
    expect(summary.catalogWarning).toBeUndefined();
  });
});

describe('one device’s catalog over session.maxTools or session.maxToolPages', () => {
  let t: TestGateway;
  const f = fleet();
  beforeAll(async () => {
    t = await startTestGateway({ session: { maxTools: 5, maxToolPages: 2 } });
  });
  afterEach(() => f.stop());
  afterAll(() => t.close());

  it('cuts at maxTools inside a page and says so as the byte bound does (warning, event, counter, line)', async () => {
    const tools = padded('many', 12); // ~6 KB: one page
    const d = f.device(tools);
    const incomplete = t.nextEvent('device.catalog_incomplete', d.deviceId);
    const summary = await f.online(t, d);
    expect(summary).toMatchObject({ state: 'ready', toolCount: 5 });
    expect(summary.catalogWarning).toBe('catalog cut: over 5 tools (session.maxTools) after self.many.tool_4');
    const listed = (await t.api<ToolsBody>('GET', `/v1/devices/${d.deviceId}/tools`)).body.tools.map((x) => x.name);
    expect(listed).toEqual(tools.slice(0, 5).map((x) => x.name));
    expect((await incomplete).data).toMatchObject({ page: 1, after: 'self.many.tool_4', toolCount: 5 });
    expect(await t.metric('voxgate_device_catalogs_cut_total', { reason: 'device_tools' })).toBe(1);
    const line = t.logs.find((l) => l['msg'] === 'device catalog over 5 tools (session.maxTools); catalog cut');
    expect(line).toMatchObject({ deviceId: d.deviceId, reason: 'device_tools', listedTools: 12, keptTools: 5 });
  });

  it('stops the walk at maxToolPages with pages left and says where the catalog stops', async () => {
    // One ~4.5 KB tool per 8000-byte page: four pages, two of them past the cap, and fewer tools than maxTools.
    const tools = Array.from({ length: 4 }, (_, i) => ({
      name: `self.wide.tool_${i}`,
      description: `wide tool ${i}: ${'y'.repeat(4400)}`,
      run: () => ({ i }),
    }));
    const d = f.device(tools);
    const incomplete = t.nextEvent('device.catalog_incomplete', d.deviceId);
    const summary = await f.online(t, d);
    const lists = d.mcpReceived.filter((p) => p['method'] === 'tools/list');
    expect(lists).toHaveLength(2);
    const listed = (await t.api<ToolsBody>('GET', `/v1/devices/${d.deviceId}/tools`)).body.tools.map((x) => x.name);
    expect(listed.length).toBeGreaterThan(0);
    expect(listed.length).toBeLessThan(tools.length);
    expect(summary).toMatchObject({ state: 'ready', toolCount: listed.length });
    const last = listed[listed.length - 1];
    expect(summary.catalogWarning).toBe(`catalog cut: over 2 pages (session.maxToolPages) after ${last}`);
    expect((await incomplete).data).toMatchObject({ page: 3, after: last });
    expect(await t.metric('voxgate_device_catalogs_cut_total', { reason: 'device_pages' })).toBe(1);
  });

  it('leaves a catalog of exactly maxTools tools whole, with no warning', async () => {
    const summary = await f.online(t, f.device(padded('five', 5)));
    expect(summary).toMatchObject({ state: 'ready', toolCount: 5 });
    expect(summary.catalogWarning).toBeUndefined();
  });
});

describe('the catalogs of all devices over devices.catalogBudgetBytes', () => {
  // Room for one ~10 KB catalog, not two.
  const BUDGET = 16 * 1024;
  let t: TestGateway;
  const f = fleet();
  beforeAll(async () => {
    t = await startTestGateway({ devices: { catalogBudgetBytes: BUDGET } });
  });
  afterAll(async () => {
    f.stop();
    await t.close();
  });
  const held = () => t.metric('voxgate_device_catalog_bytes');
  const call = (d: ReferenceDevice, tool: string) => t.api<CallBody>('POST', `/v1/devices/${d.deviceId}/tools/${tool}/call`, { arguments: { level: 3 } });

  it('refuses a newcomer’s catalog when full, keeps what others hold, counts identical catalogs once, and gives the bytes back when catalogs go', async () => {
    // A: the first catalog fits whole.
    const a = f.device(padded('a', 20));
    expect(await f.online(t, a)).toMatchObject({ state: 'ready', toolCount: 20 });
    const aBytes = await held();
    expect(aBytes).toBeGreaterThan(BUDGET / 2);
    expect(aBytes).toBeLessThanOrEqual(BUDGET);

    // A2: the same firmware (the same catalog) costs nothing more.
    const a2 = f.device(padded('a', 20));
    const a2Summary = await f.online(t, a2);
    expect(a2Summary).toMatchObject({ state: 'ready', toolCount: 20 });
    expect(a2Summary.catalogWarning).toBeUndefined();
    expect(await held()).toBe(aBytes);

    // B: another catalog of the same size does not fit: B is ready with no tools and says why.
    const b = f.device(padded('b', 20));
    const incomplete = t.nextEvent('device.catalog_incomplete', b.deviceId);
    const bSummary = await f.online(t, b);
    expect(bSummary).toMatchObject({ state: 'ready', toolCount: 0 });
    expect(bSummary.catalogWarning).toMatch(/^catalog refused: .*devices\.catalogBudgetBytes/);
    expect((await incomplete).data).toMatchObject({ toolCount: 0 });
    expect((await t.api<ToolsBody>('GET', `/v1/devices/${b.deviceId}/tools`)).body.tools).toEqual([]);
    expect(await held()).toBe(aBytes);
    expect(await t.metric('voxgate_device_catalogs_cut_total', { reason: 'gateway_budget' })).toBe(1);
    expect(t.logs.find((l) => l['msg'] === 'device catalog refused: devices.catalogBudgetBytes is full')).toMatchObject({
      deviceId: b.deviceId,
      reason: 'gateway_budget',
      budget: BUDGET,
    });

    // A keeps its catalog and works.
    const r = await call(a, 'self.a.tool_5');
    expect(r.status).toBe(200);
    expect(r.body.isError).toBe(false);
    expect((await t.api<Summary>('GET', `/v1/devices/${a.deviceId}`)).body).toMatchObject({ toolCount: 20 });

    // A2 leaves: A still holds the catalog, so nothing is given back.
    const a2Gone = t.nextEvent('device.offline', a2.deviceId);
    a2.terminate();
    await a2Gone;
    expect(await held()).toBe(aBytes);

    // A is forgotten: its bytes go back, and B's catalog, listed again (its tools changed), fits now.
    expect((await t.api('DELETE', `/v1/devices/${a.deviceId}`)).status).toBe(204);
    expect(await held()).toBe(0);
    const relisted = t.nextEvent('device.tools_changed', b.deviceId);
    b.notify('notifications/tools/list_changed');
    await relisted;
    const bNow = (await t.api<Summary>('GET', `/v1/devices/${b.deviceId}`)).body;
    expect(bNow).toMatchObject({ state: 'ready', toolCount: 20 });
    expect(bNow.catalogWarning).toBeUndefined();
    const bBytes = await held();
    expect(bBytes).toBeGreaterThan(BUDGET / 2);

    // C, another ~10 KB catalog, does not fit beside B's.
    const c = f.device(padded('c', 20));
    expect(await f.online(t, c)).toMatchObject({ toolCount: 0 });
    expect(await held()).toBe(bBytes);

    // B's catalog is replaced by a small one: the old one's bytes go back, and D (as large as C) fits.
    b.tools = padded('b', 2);
    const shrunk = t.nextEvent('device.tools_changed', b.deviceId);
    b.notify('notifications/tools/list_changed');
    await shrunk;
    const small = await held();
    expect(small).toBeLessThan(bBytes / 5);
    const d = f.device(padded('d', 20));
    expect(await f.online(t, d)).toMatchObject({ state: 'ready', toolCount: 20 });
    expect(await held()).toBeGreaterThan(small + BUDGET / 2);
    expect((await call(d, 'self.d.tool_19')).body.isError).toBe(false);
    expect(await t.metric('voxgate_device_catalogs_cut_total', { reason: 'gateway_budget' })).toBe(2);

    // D disconnects: its catalog, held by no one else, gives its bytes back.
    const dGone = t.nextEvent('device.offline', d.deviceId);
    d.terminate();
    await dGone;
    expect(await held()).toBe(small);
  });
});
