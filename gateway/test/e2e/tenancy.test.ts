import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { OtaResponseSchema, type OtaResponse } from '@voxgate/protocol';
import { connect } from 'mqtt';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestGateway, TEST_API_KEY, type TestGateway } from '../../../test/support/gateway-harness.js';
import { ReferenceDevice, type RefTool } from '../../../test/support/reference-device.js';
import { openSse, type SseStream } from '../../../test/support/sse.js';

/**
 * Issue 20 item 6: tenants that separate everything. Two tenants' keys and one operator key against real
 * devices enrolled in hmac mode: a tenant's key neither sees nor acts on another tenant's device, its
 * enrollment, its events or its tools (HTTP and /mcp); the operator key sees all.
 */
const SECRET = 'tenancy-device-secret-0123456789';
const KEY_A = 'key-tenant-acme-0123456789';
const KEY_B = 'key-tenant-globex-0123456789';
const DEV_A = '02:00:00:00:6a:01';
const DEV_B = '02:00:00:00:6b:01';
const DEV_OPS = '02:00:00:00:6c:01';
const compact = (id: string) => id.replace(/:/g, '');
const perDevice = (id: string, tool: string) => `device__${compact(id)}__${tool.replace(/\./g, '_')}`;

interface Problem {
  code: string;
}
interface DeviceOut {
  id: string;
  tenant: string | null;
}
interface Pending {
  enrollments: Array<{ code: string; deviceId: string }>;
}

describe('tenants separate devices, enrollments, events and tools (issue 20 item 6)', () => {
  let t: TestGateway;
  const runs: string[] = [];
  /** Each device's own tool records who ran it: a refused call must never reach the device. */
  const marker = (id: string): RefTool => ({ name: 'self.mark', description: 'Mark', run: () => (runs.push(id), true) });
  const devA = new ReferenceDevice({ deviceId: DEV_A, tools: [marker(DEV_A)] });
  // A client id that enrollment.tenantRules gives to globex.
  const devB = new ReferenceDevice({ deviceId: DEV_B, clientId: 'globex-0001', tools: [marker(DEV_B)] });
  const devOps = new ReferenceDevice({ deviceId: DEV_OPS, tools: [marker(DEV_OPS)] });

  const as = (apiKey: string) => ({ apiKey });
  const ota = async (d: ReferenceDevice): Promise<OtaResponse> => {
    const res = await fetch(`${t.baseUrl}/xiaozhi/ota/`, {
      method: 'POST',
      headers: { 'device-id': d.deviceId, 'client-id': d.clientId, 'content-type': 'application/json' },
      body: JSON.stringify({ application: { version: '1.7.6' }, board: { type: 'sim-board' } }),
    });
    expect(res.status).toBe(200);
    return OtaResponseSchema.parse(await res.json());
  };
  const online = async (d: ReferenceDevice, creds: OtaResponse) => {
    const ready = t.nextEvent('device.ready', d.deviceId);
    if (creds.mqtt)
      await d.connectMqtt(t.mqttUrl, {
        clientId: creds.mqtt.client_id!,
        username: creds.mqtt.username!,
        password: creds.mqtt.password!,
        publishTopic: creds.mqtt.publish_topic,
      });
    else await d.connectWebSocket(t.wsUrl, { token: creds.websocket!.token! });
    await ready;
  };
  const pendingFor = async (key: string) => (await t.api<Pending>('GET', '/v1/enrollments', undefined, as(key))).body.enrollments.map((e) => e.deviceId);
  const devicesFor = async (key: string) => (await t.api<{ devices: DeviceOut[] }>('GET', '/v1/devices', undefined, as(key))).body.devices;
  const deviceToolsFor = async (key: string) =>
    (await t.api<{ tools: Array<{ name: string }> }>('GET', '/v1/tools', undefined, as(key))).body.tools
      .map((x) => x.name)
      .filter((n) => n.startsWith('device__'));

  beforeAll(async () => {
    t = await startTestGateway({
      deviceAuth: 'hmac',
      deviceSecret: SECRET,
      apiKeys: [TEST_API_KEY, KEY_A, KEY_B],
      apiKeyTenants: { [KEY_A]: 'acme', [KEY_B]: 'globex' },
      enrollment: { tenantRules: [{ tenant: 'globex', clientIdPrefix: 'globex-' }] },
      mcp: { deviceTools: 'both' },
    });
  });
  afterAll(async () => {
    for (const d of [devA, devB, devOps]) d.terminate();
    await t.close();
  });

  it("enrollment: a pending request is an operator's unless a rule gives it to a tenant; a tenant approves only its own", async () => {
    const codeA = (await ota(devA)).activation!.code;
    const codeB = (await ota(devB)).activation!.code;
    const codeOps = (await ota(devOps)).activation!.code;

    expect((await pendingFor(TEST_API_KEY)).sort()).toEqual([DEV_A, DEV_B, DEV_OPS]);
    expect(await pendingFor(KEY_A)).toEqual([]);
    expect(await pendingFor(KEY_B)).toEqual([DEV_B]);

    // acme cannot see, approve or reject requests that are not its own: 404, as if there were none.
    for (const code of [codeA, codeB, codeOps]) {
      expect((await t.api<Problem>('POST', `/v1/enrollments/${code}/approve`, undefined, as(KEY_A))).body.code).toBe('ENROLLMENT_NOT_FOUND');
      expect((await t.api<Problem>('POST', `/v1/enrollments/${code}/reject`, undefined, as(KEY_A))).body.code).toBe('ENROLLMENT_NOT_FOUND');
    }
    // globex approves its own request, for itself only.
    const wrong = await t.api<Problem>('POST', `/v1/enrollments/${codeB}/approve`, { tenant: 'acme' }, as(KEY_B));
    expect([wrong.status, wrong.body.code]).toEqual([403, 'FORBIDDEN']);
    const b = await t.api<{ deviceId: string; tenant: string }>('POST', `/v1/enrollments/${codeB}/approve`, undefined, as(KEY_B));
    expect([b.status, b.body.deviceId, b.body.tenant]).toEqual([200, DEV_B, 'globex']);
    // The operator names acme's device; the third stays an operator's (no tenant).
    const a = await t.api<{ tenant: string }>('POST', `/v1/enrollments/${codeA}/approve`, { tenant: 'acme' });
    expect([a.status, a.body.tenant]).toEqual([200, 'acme']);
    const ops = await t.api<{ tenant: string | null }>('POST', `/v1/enrollments/${codeOps}/approve`);
    expect([ops.status, ops.body.tenant]).toEqual([200, null]);

    for (const d of [devA, devB, devOps]) await online(d, await ota(d));
    expect((await t.api<{ tenant: string }>('GET', `/v1/enrollments/devices/${DEV_A}`, undefined, as(KEY_A))).body.tenant).toBe('acme');
    expect((await t.api<Problem>('GET', `/v1/enrollments/devices/${DEV_B}`, undefined, as(KEY_A))).status).toBe(404);
    // acme cannot re-enroll (disconnect) globex's device, nor the operator's.
    for (const id of [DEV_B, DEV_OPS])
      expect((await t.api<Problem>('POST', `/v1/enrollments/devices/${id}/reenroll`, undefined, as(KEY_A))).body.code).toBe('ENROLLMENT_NOT_FOUND');
    expect(devB.connected && devOps.connected).toBe(true);
  });

  it("devices: a tenant lists, reads, calls and changes only its own; another tenant's device is 404; the operator sees all", async () => {
    expect((await devicesFor(KEY_A)).map((d) => [d.id, d.tenant])).toEqual([[DEV_A, 'acme']]);
    expect((await devicesFor(KEY_B)).map((d) => [d.id, d.tenant])).toEqual([[DEV_B, 'globex']]);
    expect((await devicesFor(TEST_API_KEY)).map((d) => [d.id, d.tenant])).toEqual([
      [DEV_A, 'acme'],
      [DEV_B, 'globex'],
      [DEV_OPS, null],
    ]);

    for (const id of [DEV_B, DEV_OPS]) {
      const base = `/v1/devices/${id}`;
      const tries = [
        await t.api<Problem>('GET', base, undefined, as(KEY_A)),
        await t.api<Problem>('GET', `${base}/tools`, undefined, as(KEY_A)),
        await t.api<Problem>('POST', `${base}/tools/self.mark/call`, {}, as(KEY_A)),
        await t.api<Problem>('POST', `${base}/rpc`, { method: 'tools/list' }, as(KEY_A)),
        await t.api<Problem>('PATCH', base, { voiceMode: 'off' }, as(KEY_A)),
        await t.api<Problem>('PATCH', base, { tenant: 'acme' }, as(KEY_A)),
        // Routes under /v1/devices/{id} that other parts register are scoped too.
        await t.api<Problem>('GET', `${base}/firmware`, undefined, as(KEY_A)),
      ];
      expect(tries.map((r) => [r.status, r.body.code])).toEqual(tries.map(() => [404, 'DEVICE_NOT_FOUND']));
    }
    expect(runs).toEqual([]);
    expect((await t.api('POST', `/v1/devices/${DEV_A}/tools/self.mark/call`, {}, as(KEY_A))).status).toBe(200);
    expect(runs).toEqual([DEV_A]);
    // Only an operator key moves a device between tenants, even to the caller's own tenant.
    const own = await t.api<Problem>('PATCH', `/v1/devices/${DEV_A}`, { tenant: 'globex' }, as(KEY_A));
    expect([own.status, own.body.code]).toEqual([403, 'FORBIDDEN']);
    expect((await t.api<{ voiceMode: string; tenant: string }>('PATCH', `/v1/devices/${DEV_A}`, { voiceMode: 'off' }, as(KEY_A))).body).toMatchObject({
      voiceMode: 'off',
      tenant: 'acme',
    });
  });

  it('fleet: a tenant queues calls for its own devices only and reads only those; jobs and schedules are for operators', async () => {
    const mine = await t.api<{ id: string }>('POST', `/v1/devices/${DEV_A}/calls`, { tool: 'self.mark' }, as(KEY_A));
    expect(mine.status).toBe(202);
    expect((await t.api<Problem>('POST', `/v1/devices/${DEV_B}/calls`, { tool: 'self.mark' }, as(KEY_A))).status).toBe(404);
    // A tool B's device lacks: the call is B's to read, and it runs nothing the later checks count.
    const theirs = await t.api<{ id: string }>('POST', `/v1/devices/${DEV_B}/calls`, { tool: 'self.absent' }, as(KEY_B));
    expect(theirs.status).toBe(202);
    expect((await t.api('GET', `/v1/calls/${mine.body.id}`, undefined, as(KEY_A))).status).toBe(200);
    expect((await t.api<Problem>('GET', `/v1/calls/${theirs.body.id}`, undefined, as(KEY_A))).body.code).toBe('NOT_FOUND');
    expect((await t.api<Problem>('DELETE', `/v1/calls/${theirs.body.id}`, undefined, as(KEY_A))).body.code).toBe('NOT_FOUND');
    expect((await t.api('GET', `/v1/calls/${theirs.body.id}`)).status).toBe(200);
    const job = await t.api<Problem>('POST', '/v1/jobs', { tool: 'self.mark', filter: { ids: [DEV_B] } }, as(KEY_A));
    expect([job.status, job.body.code]).toEqual([403, 'FORBIDDEN']);
    const at = new Date(Date.now() + 3_600_000).toISOString();
    const schedule = await t.api<Problem>('POST', '/v1/schedules', { at, call: { device: DEV_B, tool: 'self.mark' } }, as(KEY_A));
    expect([schedule.status, schedule.body.code]).toEqual([403, 'FORBIDDEN']);
    expect((await t.api<Problem>('GET', '/v1/jobs', undefined, as(KEY_A))).status).toBe(403);
  });

  it("tools: a tenant's /v1/tools, devices_list, device_call and /mcp reach only its own devices", async () => {
    expect(await deviceToolsFor(KEY_A)).toEqual([perDevice(DEV_A, 'self.mark')]);
    expect(await deviceToolsFor(KEY_B)).toEqual([perDevice(DEV_B, 'self.mark')]);
    expect((await deviceToolsFor(TEST_API_KEY)).sort()).toEqual([DEV_A, DEV_B, DEV_OPS].map((id) => perDevice(id, 'self.mark')).sort());

    const byName = await t.api<Problem>('POST', `/v1/tools/${perDevice(DEV_B, 'self.mark')}/call`, {}, as(KEY_A));
    expect([byName.status, byName.body.code]).toEqual([404, 'TOOL_NOT_FOUND']);
    const generic = await t.api<{ isError: boolean; content: Array<{ text: string }> }>(
      'POST',
      '/v1/tools/device_call/call',
      { arguments: { device_id: DEV_B, tool: 'self.mark' } },
      as(KEY_A),
    );
    expect(generic.body.isError).toBe(true);
    expect(generic.body.content[0]!.text).toContain(`no device ${DEV_B}`);
    const listed = await t.api<{ structuredContent: { devices: Array<{ device_id: string }> } }>(
      'POST',
      '/v1/tools/devices_list/call',
      { arguments: {} },
      as(KEY_A),
    );
    expect(listed.body.structuredContent.devices.map((d) => d.device_id)).toEqual([DEV_A]);
    expect(runs.filter((id) => id !== DEV_A)).toEqual([]);

    const client = new Client({ name: 'tenant-acme', version: '1' });
    await client.connect(new StreamableHTTPClientTransport(new URL(`${t.baseUrl}/mcp`), { requestInit: { headers: { authorization: `Bearer ${KEY_A}` } } }));
    try {
      const names = (await client.listTools()).tools.map((x) => x.name);
      expect(names.filter((n) => n.startsWith('device__'))).toEqual([perDevice(DEV_A, 'self.mark')]);
      await expect(client.callTool({ name: perDevice(DEV_B, 'self.mark'), arguments: {} })).rejects.toThrow(/no tool named/);
    } finally {
      await client.close();
    }
    expect(runs.filter((id) => id !== DEV_A)).toEqual([]);
  });

  it("events: a tenant's stream (and its Last-Event-ID replay) carries only its devices' events", async () => {
    const streams: SseStream[] = [];
    const open = async (key: string, lastId?: string) => {
      const s = await openSse(`${t.baseUrl}/v1/events?type=device.offline,device.ready`, {
        authorization: `Bearer ${key}`,
        ...(lastId ? { 'last-event-id': lastId } : {}),
      });
      streams.push(s);
      return s;
    };
    const next = async (s: SseStream) => JSON.parse((await s.events.next()).data) as { id: string; type: string; deviceId: string };
    try {
      const ops = await open(TEST_API_KEY);
      const acme = await open(KEY_A);
      // globex's device goes away, then acme's: acme's stream hears only the second.
      const bGone = t.nextEvent('device.offline', DEV_B);
      devB.terminate();
      await bGone;
      const aGone = t.nextEvent('device.offline', DEV_A);
      devA.terminate();
      await aGone;
      const first = await next(ops);
      expect([first.type, first.deviceId]).toEqual(['device.offline', DEV_B]);
      expect((await next(ops)).deviceId).toBe(DEV_A);
      expect((await next(acme)).deviceId).toBe(DEV_A);
      // Resuming from before globex's event replays only acme's.
      const resumed = await open(KEY_A, first.id);
      expect((await next(resumed)).deviceId).toBe(DEV_A);
      const opsResumed = await open(TEST_API_KEY, first.id);
      expect((await next(opsResumed)).deviceId).toBe(DEV_A);
      // A device moved to acme by the operator streams to acme from then on.
      expect((await t.api('PATCH', `/v1/devices/${DEV_OPS}`, { tenant: 'acme' })).status).toBe(200);
      const opsGone = t.nextEvent('device.offline', DEV_OPS);
      devOps.terminate();
      await opsGone;
      expect((await next(acme)).deviceId).toBe(DEV_OPS);
      expect((await devicesFor(KEY_A)).map((d) => d.id)).toEqual([DEV_A, DEV_OPS]);
      // The kept history (GET /v1/events/history) likewise.
      const history = async (key: string) =>
        new Set(
          (await t.api<{ events: Array<{ deviceId: string }> }>('GET', '/v1/events/history?limit=1000', undefined, as(key))).body.events.map((e) => e.deviceId),
        );
      await expect.poll(async () => (await history(TEST_API_KEY)).has(DEV_B)).toBe(true);
      const acmeHistory = await history(KEY_A);
      expect(acmeHistory.has(DEV_A)).toBe(true);
      expect([...acmeHistory].filter((id) => id !== DEV_A && id !== DEV_OPS)).toEqual([]);
    } finally {
      for (const s of streams) s.close();
    }
  });

  it('fleet: a call a tenant queued for its offline device is not sent once the device belongs to another tenant', async () => {
    const id = '02:00:00:00:6a:02';
    const dev = new ReferenceDevice({ deviceId: id, tools: [marker(id)] });
    try {
      const code = (await ota(dev)).activation!.code;
      expect((await t.api('POST', `/v1/enrollments/${code}/approve`, { tenant: 'acme' })).status).toBe(200);
      const creds = await ota(dev);
      await online(dev, creds);
      const gone = t.nextEvent('device.offline', id);
      dev.terminate();
      await gone;
      // acme queues a call for its offline device, then the operator gives the device to globex.
      const queued = await t.api<{ id: string }>('POST', `/v1/devices/${id}/calls`, { tool: 'self.mark' }, as(KEY_A));
      expect(queued.status).toBe(202);
      expect((await t.api('PATCH', `/v1/devices/${id}`, { tenant: 'globex' })).status).toBe(200);
      await online(dev, creds);
      const stateOf = async (callId: string) => (await t.api<{ state: string }>('GET', `/v1/calls/${callId}`)).body.state;
      await expect.poll(() => stateOf(queued.body.id)).not.toBe('queued');
      const call = await t.api<{ state: string; error: { code: string } }>('GET', `/v1/calls/${queued.body.id}`);
      expect([call.body.state, call.body.error.code]).toEqual(['failed', 'DEVICE_MOVED']);
      // acme's call never reached globex's device.
      expect(runs.filter((r) => r === id)).toEqual([]);
      // A call globex queues now runs.
      const own = await t.api<{ id: string }>('POST', `/v1/devices/${id}/calls`, { tool: 'self.mark' }, as(KEY_B));
      await expect.poll(() => stateOf(own.body.id)).toBe('succeeded');
      expect(runs.filter((r) => r === id)).toEqual([id]);
    } finally {
      dev.terminate();
    }
  });

  it("MQTT event subscribers (every device's events) log in with an operator key only", async () => {
    const login = (password: string) =>
      new Promise<string>((resolve) => {
        const c = connect(t.mqttUrl, { clientId: `backend-${password.slice(4, 12)}`, username: 'backend', password, reconnectPeriod: 0 });
        c.once('connect', () => (c.end(true), resolve('connected')));
        c.once('error', (e) => (c.end(true), resolve(`refused ${String((e as { code?: number }).code)}`)));
      });
    expect(await login(KEY_A)).toMatch(/^refused/);
    expect(await login(TEST_API_KEY)).toBe('connected');
  });
});
