import { describe, expect, it } from 'vitest';
import { HELLO, metricValue, registryPart as parts } from '../../../test/support/device-parts.js';
import { CLOSE_FORGOTTEN, CLOSE_NO_HELLO, CLOSE_REPLACED, CLOSE_TAKEOVER_REFUSED } from '../../src/devices/link.js';
import type { GatewayError } from '../../src/errors.js';

const tool = (name: string, extra: Record<string, unknown> = {}) => ({
  name,
  description: `the ${name} tool`,
  inputSchema: { type: 'object', properties: {} },
  ...extra,
});
/** A registry with devices that answer setup with `self.ping`, unless told otherwise. */
const registryPart = (opts: Parameters<typeof parts>[0] = {}) => parts(opts, [tool('self.ping')]);

describe('DeviceRegistry: presence', () => {
  it('says a device is online at once, ready after setup, and offline when its link closes', async () => {
    const { registry, events, metrics, ready } = registryPart();
    const { device } = await ready('02:00:00:00:00:01');
    expect(registry.get('02:00:00:00:00:01')).toMatchObject({ online: true, state: 'ready', toolCount: 1, server: { name: 'sim-board', version: '1.0.0' } });
    expect(registry.ready().map((d) => d.deviceId)).toEqual(['02:00:00:00:00:01']);
    expect(await metricValue(metrics, 'voxgate_devices_ready')).toBe(1);
    device.disconnect();
    await expect.poll(() => registry.get('02:00:00:00:00:01')?.online).toBe(false);
    expect(registry.get('02:00:00:00:00:01')).toMatchObject({ state: 'offline', toolCount: 1 });
    expect(events.map((e) => e.type)).toEqual(['device.online', 'device.ready', 'device.offline']);
    expect(await metricValue(metrics, 'voxgate_devices_ready')).toBe(0);
    expect(registry.ready()).toEqual([]);
  });

  it('tells "never connected" from "offline", and find() says neither', async () => {
    const { registry, ready } = registryPart();
    expect(() => registry.device('02:00:00:00:00:09')).toThrow(expect.objectContaining({ code: 'DEVICE_NOT_FOUND' }));
    const { device } = await ready('02:00:00:00:00:01');
    expect(registry.find('02:00:00:00:00:01')).toBeDefined();
    device.disconnect();
    await expect.poll(() => registry.find('02:00:00:00:00:01')).toBeUndefined();
    expect(() => registry.device('02:00:00:00:00:01')).toThrow(
      expect.objectContaining({ code: 'DEVICE_OFFLINE', message: 'device 02:00:00:00:00:01 is offline' }),
    );
  });

  it('lets a newer connection with the same credentials replace the live one; its pending call fails DEVICE_OFFLINE', async () => {
    const { registry, metrics, ready } = registryPart();
    const first = await ready('02:00:00:00:00:01', [tool('self.ping')], 'cred-a');
    const pending = first.session!.call('self.ping', {}).catch((e: unknown) => e);
    await first.device.nextRequest('tools/call');
    const second = await ready('02:00:00:00:00:01', [tool('self.ping')], 'cred-a');
    expect(((await pending) as GatewayError).code).toBe('DEVICE_OFFLINE');
    expect(first.link.closed?.code).toBe(CLOSE_REPLACED);
    expect(registry.find('02:00:00:00:00:01')).toBe(second.session);
    // The replaced connection's own close comes later: it must not mark the device offline.
    await new Promise((resolve) => setImmediate(resolve));
    expect(registry.get('02:00:00:00:00:01')).toMatchObject({ online: true, state: 'ready' });
    expect(await metricValue(metrics, 'voxgate_device_takeovers_total')).toBe(1);
    expect(await metricValue(metrics, 'voxgate_devices_ready')).toBe(1);
  });

  it('refuses a newer connection with other credentials, and keeps the live one', async () => {
    const { registry, metrics, connect, ready } = registryPart();
    const live = await ready('02:00:00:00:00:01', [tool('self.ping')], 'cred-a');
    const intruder = connect('02:00:00:00:00:01', { credential: 'cred-b' });
    expect(intruder.session).toBeUndefined();
    expect(intruder.link.closed).toEqual({ code: CLOSE_TAKEOVER_REFUSED, reason: 'another connection holds this device' });
    expect(registry.find('02:00:00:00:00:01')).toBe(live.session);
    expect(await metricValue(metrics, 'voxgate_device_takeovers_refused_total')).toBe(1);
  });

  it('forgets a device: its live connection is closed, its pending call fails DEVICE_NOT_FOUND, and it leaves the listing', async () => {
    const { registry, events, ready } = registryPart();
    const { device, link, session } = await ready('02:00:00:00:00:01');
    await ready('02:00:00:00:00:02');
    const pending = session!.call('self.ping', {}).catch((e: unknown) => e);
    await device.nextRequest('tools/call');
    expect(await registry.forget('02:00:00:00:00:01')).toBe(true);
    expect(((await pending) as GatewayError).code).toBe('DEVICE_NOT_FOUND');
    expect(link.closed?.code).toBe(CLOSE_FORGOTTEN);
    expect(events.filter((e) => e.type === 'device.offline').map((e) => [e.deviceId, e.data['reason']])).toEqual([
      ['02:00:00:00:00:01', 'forgotten by an operator'],
    ]);
    expect(registry.get('02:00:00:00:00:01')).toBeUndefined();
    expect(registry.ids()).toEqual(['02:00:00:00:00:02']);
    expect(await registry.forget('02:00:00:00:00:01')).toBe(false);
  });
});

describe('DeviceRegistry: listing', () => {
  it('pages devices in id order whatever order they came in, with a cursor that survives a forgotten device', async () => {
    const { registry, connect } = registryPart();
    for (const id of ['02:00:00:00:00:03', '02:00:00:00:00:01', '02:00:00:00:00:04', '02:00:00:00:00:02']) connect(id, { transport: 'mqtt' });
    const p1 = registry.page({}, { limit: 2 });
    expect(p1.devices.map((d) => d.id)).toEqual(['02:00:00:00:00:01', '02:00:00:00:00:02']);
    expect(p1.next).toBe('02:00:00:00:00:02');
    await registry.forget('02:00:00:00:00:02');
    const p2 = registry.page({}, { limit: 2, after: p1.next });
    expect(p2.devices.map((d) => d.id)).toEqual(['02:00:00:00:00:03', '02:00:00:00:00:04']);
    expect(p2.next).toBeUndefined();
    expect(registry.page({ online: true }, { limit: 10 }).devices).toHaveLength(3);
  });

  it('keeps id order for devices that connect between listings, and after a forget of one not yet listed', async () => {
    const { registry, connect } = registryPart();
    const ids = (n: number) => `02:00:00:00:00:${String(n).padStart(2, '0')}`;
    for (const n of [7, 3, 9]) connect(ids(n), { transport: 'mqtt' });
    expect(registry.ids()).toEqual([ids(3), ids(7), ids(9)]);
    for (const n of [8, 1, 5, 10]) connect(ids(n), { transport: 'mqtt' });
    await registry.forget(ids(5));
    connect(ids(2), { transport: 'mqtt' });
    expect(registry.page({}, { limit: 3, after: ids(1) }).devices.map((d) => d.id)).toEqual([ids(2), ids(3), ids(7)]);
    expect(registry.ids()).toEqual([1, 2, 3, 7, 8, 9, 10].map(ids));
  });

  it('past maxKnownDevices forgets offline never-ready devices first, never an online one', async () => {
    const { registry, metrics, connect, ready } = registryPart({ maxKnownDevices: 3 });
    const a = await ready('02:00:00:00:00:01');
    const b = connect('02:00:00:00:00:02', { transport: 'mqtt' });
    connect('02:00:00:00:00:03', { transport: 'mqtt' });
    a.device.disconnect();
    b.device.disconnect();
    await expect.poll(() => registry.page({ online: false }, { limit: 10 }).devices.length).toBe(2);
    connect('02:00:00:00:00:04', { transport: 'mqtt' });
    // 02 was never ready: it goes first, though 01 went offline earlier.
    expect(registry.ids()).toEqual(['02:00:00:00:00:01', '02:00:00:00:00:03', '02:00:00:00:00:04']);
    expect(await metricValue(metrics, 'voxgate_devices_forgotten_total', { kind: 'never_ready' })).toBe(1);
  });
});

describe('DeviceRegistry: setup at the edges (from the e2e session tests)', () => {
  it('closes a WebSocket device that never says hello (4002)', async () => {
    const { connect } = registryPart({ settings: { requestTimeoutMs: 50 } });
    const { link } = connect('02:00:00:00:05:01');
    await expect.poll(() => link.closed?.code).toBe(CLOSE_NO_HELLO);
  });

  it('keeps retrying the initialize of a connected device that does not answer, and says so to callers', async () => {
    const { registry, lines, connect } = registryPart({ settings: { requestTimeoutMs: 50, setupRetryMinMs: 10, setupRetryMaxMs: 20 } });
    const { device, session } = connect('02:00:00:00:05:02');
    device.send(HELLO);
    await device.nextRequest('initialize');
    await device.nextRequest('initialize');
    await expect
      .poll(() => lines.some((l) => l['msg'] === 'device setup step failed; retrying while the link is up' && l['deviceId'] === '02:00:00:00:05:02'))
      .toBe(true);
    expect(registry.get('02:00:00:00:05:02')).toMatchObject({ online: true, state: 'initializing' });
    expect(session!.setup).toMatchObject({ step: 'initialize' });
    const err = (await session!.call('x', {}, { timeoutMs: 100 }).catch((e: unknown) => e)) as GatewayError;
    expect(err.code).toBe('DEVICE_TIMEOUT');
    expect(err.message).toContain('initializ');
  });

  it('marks a device whose initialize replies stay malformed as failed after setupMaxErrors, and says so', async () => {
    const { registry, lines, connect } = registryPart({ settings: { requestTimeoutMs: 2000, setupRetryMinMs: 10, setupRetryMaxMs: 20, setupMaxErrors: 2 } });
    const { device, session } = connect('02:00:00:00:05:05');
    device.send(HELLO);
    // Every request gets the same malformed reply, for as long as the gateway asks.
    const garble = (text: string) => {
      const p = (JSON.parse(text) as { type?: string; payload?: { id?: number } }).payload;
      if (p?.id !== undefined) device.reply(p.id, { protocolVersion: 7 });
    };
    const deliver = device.deliver.bind(device);
    device.deliver = (text) => (deliver(text), garble(text));
    await expect.poll(() => registry.get('02:00:00:00:05:05')?.state).toBe('failed');
    expect((await session!.call('x', {}).catch((e: unknown) => e)) as GatewayError).toMatchObject({ code: 'DEVICE_ERROR' });
    expect(lines.some((l) => l['msg'] === 'device initialization failed' && l['deviceId'] === '02:00:00:00:05:05')).toBe(true);
  });

  it('keeps the pages before a tool the device refuses for good: ready, with a warning in its summary, asked once', async () => {
    const { registry, metrics, events, connect } = registryPart({ settings: { setupRetryMinMs: 10, setupRetryMaxMs: 20 } });
    const { device, session } = connect('02:00:00:00:0c:01', { transport: 'mqtt' });
    const init = await device.nextRequest('initialize');
    device.reply(init.id, { protocolVersion: '2024-11-05', capabilities: {}, serverInfo: { name: 'b', version: '1' } });
    const p1 = await device.nextRequest('tools/list');
    device.reply(p1.id, { tools: [tool('a'), tool('b'), tool('c')], nextCursor: 'self.huge.describe' });
    const p2 = await device.nextRequest('tools/list');
    device.replyError(p2.id, 'Failed to add tool self.huge.describe because of payload size limit');
    await expect.poll(() => registry.get('02:00:00:00:0c:01')?.state).toBe('ready');
    const warning = 'catalog incomplete: tool after c refused by the device';
    expect(registry.get('02:00:00:00:0c:01')).toMatchObject({ state: 'ready', toolCount: 3, catalogWarning: warning });
    expect(events.find((e) => e.type === 'device.catalog_incomplete')?.data).toMatchObject({ warning, page: 2, after: 'c', toolCount: 3 });
    // The tools it has answer as usual.
    const call = session!.call('a', {});
    device.reply((await device.nextRequest('tools/call')).id, { content: [{ type: 'text', text: 'ok' }], isError: false });
    expect((await call).content).toEqual([{ type: 'text', text: 'ok' }]);
    // Refused once, not retried: the same cursor gets the same answer.
    const asks = device.frames.filter((f) => f.includes('"tools/list"') && f.includes('self.huge.describe'));
    expect(asks).toHaveLength(1);
    expect(await metricValue(metrics, 'voxgate_device_setup_retries_total', { step: 'tools_list' })).toBe(0);
    expect(await metricValue(metrics, 'voxgate_device_catalogs_incomplete_total')).toBe(1);
  });
});

describe('DeviceRegistry: calls (from the e2e int32 test)', () => {
  it('refuses integers outside int32 (the firmware would saturate them) before sending, and passes the int32 edges', async () => {
    const counter = tool('self.counter.set', { inputSchema: { type: 'object', properties: { value: { type: 'integer' } } } });
    const { registry, ready } = registryPart();
    const { device } = await ready('02:00:00:00:09:70', [counter]);
    const call = (value: number) => registry.device('02:00:00:00:09:70').call('self.counter.set', { value });
    for (const v of [2 ** 31, -(2 ** 31) - 1, 2 ** 40]) {
      const e = (await call(v).catch((x: unknown) => x)) as GatewayError;
      expect(e.code).toBe('INVALID_ARGUMENTS');
      expect(`${e.message} ${JSON.stringify(e.extra)}`).toContain('32-bit');
    }
    expect(device.frames.some((f) => f.includes('tools/call'))).toBe(false);
    for (const v of [2 ** 31 - 1, -(2 ** 31)]) {
      const pending = call(v);
      const r = await device.nextRequest('tools/call');
      expect(r.params).toEqual({ name: 'self.counter.set', arguments: { value: v } });
      device.reply(r.id, { content: [{ type: 'text', text: String(v) }], isError: false });
      expect((await pending).content).toEqual([{ type: 'text', text: String(v) }]);
    }
  });
});
