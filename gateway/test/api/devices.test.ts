import { describe, expect, it } from 'vitest';
import { deviceRoutes } from '../../src/api/devices.js';
import type { DeviceHandle } from '../../src/devices/device-handle.js';
import type { DeviceDirectory, DeviceSummary } from '../../src/devices/directory.js';
import { GatewayError } from '../../src/errors.js';
import { apiPart, bearer } from '../../../test/support/api-parts.js';

const READY = 'aa:bb:cc:00:00:01';
const SETTING_UP = 'aa:bb:cc:00:00:02';
const RETRYING = 'aa:bb:cc:00:00:03';
const FAILED = 'aa:bb:cc:00:00:04';
const OFFLINE = 'aa:bb:cc:00:00:05';

const summary = (id: string, o: Partial<DeviceSummary> = {}): DeviceSummary => ({
  ...{
    id,
    clientId: `c-${id}`,
    transport: 'websocket',
    online: true,
    state: 'ready',
    connectedAt: '2026-11-26T08:00:00.000Z',
    lastSeenAt: '2026-11-26T08:00:00.000Z',
  },
  ...{ server: null, protocolVersion: null, toolCount: 0, toolsHash: null, pendingCalls: 0 },
  ...{ name: null, room: null, tags: [], tenant: null, board: null, firmware: null, firstSeenAt: '2026-11-26T08:00:00.000Z' },
  ...o,
});

/** A device handle that records what reached it. */
function handle(deviceId: string, o: Partial<DeviceHandle> = {}) {
  const seen: Array<{ op: string; name: string; args: unknown; opts?: unknown }> = [];
  const h: DeviceHandle = {
    deviceId,
    state: 'ready',
    catalog: { tools: [{ name: 'self.get_volume', description: 'Volume', inputSchema: { type: 'object' }, userOnly: false }], hash: 'h1' } as never,
    findTool: () => undefined,
    call: async (name, args, opts) => (seen.push({ op: 'call', name, args, opts }), { content: [{ type: 'text', text: 'ok' }], durationMs: 3 }),
    rpc: async (name, args, opts) => (seen.push({ op: 'rpc', name, args, opts }), { echoed: name }),
    notify: (name, args) => void seen.push({ op: 'notify', name, args }),
    ...o,
  };
  return { h, seen };
}

/** The device routes over a directory stand-in (no registry, no sessions). */
async function devicesPart(firmwareVersion?: (id: string) => string | undefined) {
  const ready = handle(READY);
  const handles = new Map<string, DeviceHandle>([
    [READY, ready.h],
    [SETTING_UP, handle(SETTING_UP, { state: 'initializing' as never, catalog: undefined }).h],
    [
      RETRYING,
      handle(RETRYING, {
        state: 'initializing' as never,
        catalog: undefined,
        setup: { step: 'tools/list', attempt: 2, lastError: 'timeout', retryAt: Date.now() + 1000 },
      }).h,
    ],
    [FAILED, handle(FAILED, { state: 'failed' as never, catalog: undefined, initError: 'bad initialize answer' }).h],
  ]);
  const summaries = new Map<string, DeviceSummary>([
    [READY, summary(READY, { server: { name: 'xiaozhi', version: '1.7.6' }, firmware: '1.0.0' })],
    [SETTING_UP, summary(SETTING_UP, { firmware: '1.0.3' })],
    [OFFLINE, summary(OFFLINE, { online: false, state: 'offline' })],
  ]);
  const directory: DeviceDirectory = {
    find: (id) => handles.get(id),
    device: (id) => {
      const h = handles.get(id);
      if (h) return h;
      if (summaries.has(id)) throw new GatewayError('DEVICE_OFFLINE', `device ${id} is offline`);
      throw new GatewayError('DEVICE_NOT_FOUND', `no device ${id} has ever connected`);
    },
    get: (id) => summaries.get(id),
    page: () => ({ devices: [...summaries.values()], next: undefined }),
    ready: () => [],
    onChange: () => () => undefined,
  };
  const app = await apiPart((scope) => scope.register(deviceRoutes, { registry: directory, ...(firmwareVersion ? { firmwareVersion } : {}) }));
  const api = async (method: 'GET' | 'POST', url: string, body?: unknown) => {
    const r = await app.inject({ method, url, headers: bearer(), ...(body === undefined ? {} : { payload: body as Record<string, unknown> }) });
    return { status: r.statusCode, headers: r.headers, body: r.json<Record<string, unknown>>() };
  };
  return { app, api, seen: ready.seen };
}

describe('the device routes (api/devices.ts)', () => {
  it('shows one device, its firmware from its initialize answer, else its OTA report, else its record', async () => {
    const { app, api } = await devicesPart((id) => (id === SETTING_UP ? '1.0.9' : undefined));
    expect((await api('GET', `/v1/devices/${READY.replaceAll(':', '')}`)).body).toMatchObject({ id: READY, firmwareVersion: '1.7.6', tenant: null });
    expect((await api('GET', `/v1/devices/${SETTING_UP}`)).body['firmwareVersion']).toBe('1.0.9');
    expect((await api('GET', `/v1/devices/${OFFLINE}`)).body).toMatchObject({ online: false, firmwareVersion: null });
    const missing = await api('GET', '/v1/devices/aa:bb:cc:00:00:99');
    expect([missing.status, missing.body['code']]).toEqual([404, 'DEVICE_NOT_FOUND']);
    expect((await api('GET', '/v1/devices/not-a-device')).status).toBe(400);
    await app.close();
  });

  it('lists tools of a ready device, and says what setup is doing otherwise', async () => {
    const { app, api } = await devicesPart();
    expect((await api('GET', `/v1/devices/${READY}/tools`)).body).toEqual({
      tools: [{ name: 'self.get_volume', description: 'Volume', inputSchema: { type: 'object' }, userOnly: false }],
      hash: 'h1',
    });
    const initializing = await api('GET', `/v1/devices/${SETTING_UP}/tools`);
    expect([initializing.status, initializing.body['code'], initializing.body['state']]).toEqual([503, 'DEVICE_NOT_READY', 'initializing']);
    const retrying = await api('GET', `/v1/devices/${RETRYING}/tools`);
    expect(retrying.body).toMatchObject({ code: 'DEVICE_NOT_READY', state: 'retrying', step: 'tools/list', attempt: 2 });
    expect(retrying.body['detail']).toContain('attempt 2: timeout');
    const failed = await api('GET', `/v1/devices/${FAILED}/tools`);
    expect([failed.status, failed.body['code'], failed.body['detail']]).toEqual([
      502,
      'DEVICE_ERROR',
      `device ${FAILED} did not complete initialization: bad initialize answer`,
    ]);
    const offline = await api('GET', `/v1/devices/${OFFLINE}/tools`);
    expect([offline.status, offline.body['code']]).toEqual([503, 'DEVICE_OFFLINE']);
    await app.close();
  });

  it('calls a tool with its arguments and timeout, answering isError false when the device left it out', async () => {
    const { app, api, seen } = await devicesPart();
    const r = await api('POST', `/v1/devices/${READY}/tools/self.audio_speaker.set_volume/call`, { arguments: { volume: 40 }, timeoutMs: 5000 });
    expect([r.status, r.body]).toEqual([200, { content: [{ type: 'text', text: 'ok' }], isError: false, durationMs: 3 }]);
    expect(seen).toEqual([{ op: 'call', name: 'self.audio_speaker.set_volume', args: { volume: 40 }, opts: { timeoutMs: 5000 } }]);
    // No arguments, no timeout: none are sent, and the device's default timeout holds.
    expect((await api('POST', `/v1/devices/${READY}/tools/self.get_volume/call`, {})).status).toBe(200);
    expect(seen[1]).toEqual({ op: 'call', name: 'self.get_volume', args: {}, opts: {} });
    for (const body of [{ timeoutMs: 0 }, { timeoutMs: 3_600_001 }, { arguments: [1, 2] }])
      expect([JSON.stringify(body), (await api('POST', `/v1/devices/${READY}/tools/t/call`, body)).status]).toEqual([JSON.stringify(body), 400]);
    expect(seen).toHaveLength(2);
    await app.close();
  });

  it('sends raw JSON-RPC: a notification is 202 with no reply; a caller’s own id is refused', async () => {
    const { app, api, seen } = await devicesPart();
    expect((await api('POST', `/v1/devices/${READY}/rpc`, { method: 'tools/list', params: { cursor: 'x' } })).body).toEqual({
      result: { echoed: 'tools/list' },
    });
    const sent = await api('POST', `/v1/devices/${READY}/rpc`, { method: 'notifications/state_changed', params: { n: 1 } });
    expect([sent.status, sent.body]).toEqual([202, { sent: true, notification: 'notifications/state_changed' }]);
    const withId = await api('POST', `/v1/devices/${READY}/rpc`, { id: 7, method: 'tools/list' });
    expect([withId.status, withId.body['code']]).toEqual([400, 'INVALID_REQUEST']);
    expect(withId.body['detail']).toMatch(/remove "id"/);
    expect((await api('POST', `/v1/devices/${READY}/rpc`, { method: '' })).status).toBe(400);
    expect(seen.map((s) => s.op)).toEqual(['rpc', 'notify']);
    await app.close();
  });
});
