import { jetstreamManager } from '@nats-io/jetstream';
import { Kvm } from '@nats-io/kv';
import { connect } from '@nats-io/transport-node';
import { OtaResponseSchema, type OtaResponse } from '@voxgate/protocol';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startTestGateway, TEST_API_KEY, type TestGateway } from '../../../test/support/gateway-harness.js';
import { startClusterMember } from '../../../test/support/gateway-process.js';
import { startNatsServer, type NatsServer } from '../../../test/support/nats-server.js';
import { ReferenceDevice } from '../../../test/support/reference-device.js';
import { DEVICE_FACTS_COLLECTION } from '../../src/devices/record-shapes.js';
import { openSse } from '../../../test/support/sse.js';
import { until, withTimeout } from '../../../test/support/wait.js';

interface Problem {
  code: string;
  detail: string;
}
interface ToolsBody {
  tools: Array<{ name: string }>;
  hash: string;
}

/** Long enough that an instance is never taken for dead on a busy machine; short enough that a killed one is found in seconds. */
const HEARTBEAT_MS = 1000;
const auth = { authorization: `Bearer ${TEST_API_KEY}` };

let mac = 0x10;
const nextMac = () => `02:00:00:00:13:${(mac++).toString(16).padStart(2, '0')}`;

describe('many instances on NATS (issue 13)', () => {
  let nats: NatsServer;
  const gws: TestGateway[] = [];
  const devices: ReferenceDevice[] = [];
  const device = (id = nextMac()) => {
    const d = new ReferenceDevice({ deviceId: id });
    devices.push(d);
    return d;
  };
  /** Connect the device to one instance (WebSocket, or MQTT) and wait until every instance can list its tools. */
  const online = async (d: ReferenceDevice, on: TestGateway, transport: 'websocket' | 'mqtt' = 'websocket') => {
    const ready = on.nextEvent('device.ready', d.deviceId);
    if (transport === 'mqtt') await d.connectMqtt(on.mqttUrl, { clientId: `GID_voxgate@@@${d.deviceId.replace(/:/g, '_')}@@@u` });
    else await d.connectWebSocket(on.wsUrl);
    await ready;
    for (const g of gws)
      await until(async () => (await g.api('GET', `/v1/devices/${d.deviceId}/tools`)).status === 200, `${d.deviceId}'s tools on every instance`);
    return d;
  };
  const setVolume = (g: TestGateway, d: ReferenceDevice, volume: number, timeoutMs?: number) =>
    g.api<Problem & { content: Array<{ text: string }> }>('POST', `/v1/devices/${d.deviceId}/tools/self.audio_speaker.set_volume/call`, {
      arguments: { volume },
      ...(timeoutMs ? { timeoutMs } : {}),
    });

  beforeAll(async () => {
    nats = await startNatsServer();
    for (const name of ['a', 'b', 'c'])
      gws.push(await startTestGateway({ cluster: { enabled: true, instanceId: `gw-${name}`, nats: { servers: [nats.url] }, heartbeatMs: HEARTBEAT_MS } }));
    // A hang guard, not a budget: three gateways and nats-server start in a few seconds on a quiet machine.
  }, 120_000);
  afterEach(() => {
    for (const d of devices.splice(0)) d.terminate();
  });
  afterAll(async () => {
    await Promise.all(gws.map((g) => g.close()));
    await nats?.stop();
  });

  it('answers for every device on every instance: tools, calls (HTTP and the hub), device info', async () => {
    const spread = await Promise.all(gws.map((g) => online(device(), g)));
    // One more over MQTT on the second instance: forwarding does not care how the device is connected.
    spread.push(await online(device(), gws[1]!, 'mqtt'));
    let volume = 1;
    for (const g of gws)
      for (const d of spread) {
        const tools = await g.api<ToolsBody>('GET', `/v1/devices/${d.deviceId}/tools`);
        expect(tools.body.tools.map((t) => t.name)).toContain('self.audio_speaker.set_volume');
        const r = await setVolume(g, d, ++volume);
        expect(r.status, `${g.gw.cluster?.instanceId} -> ${d.deviceId}`).toBe(200);
        expect(r.body.content[0]!.text).toBe('true');
        expect(d.volume).toBe(volume);
        // The hub (what /mcp and the assistant use) reaches it the same way.
        const hub = await g.api<{ isError?: boolean }>('POST', '/v1/tools/device_call/call', {
          arguments: { device_id: d.deviceId, tool: 'self.audio_speaker.set_volume', arguments: { volume: ++volume } },
        });
        expect(hub.status).toBe(200);
        expect(d.volume).toBe(volume);
        const info = await g.api<{ online: boolean; state: string }>('GET', `/v1/devices/${d.deviceId}`);
        expect(info.body).toMatchObject({ online: true, state: 'ready' });
      }
    // The hub's namespace (what /mcp and the assistant list) names every device's tools on every instance.
    for (const g of gws)
      await until(async () => {
        const list = await g.api<{ tools: Array<{ name: string; source: { deviceId?: string; tool?: string } }> }>('GET', '/v1/tools');
        return spread.every((d) => list.body.tools.some((t) => t.source.deviceId === d.deviceId && t.source.tool === 'self.audio_speaker.set_volume'));
      }, `every device's tools in ${g.gw.cluster?.instanceId}'s namespace`);
    const far = await gws[2]!.api<{ tools: Array<{ name: string; source: { deviceId?: string; tool?: string } }> }>('GET', '/v1/tools');
    const name = far.body.tools.find((t) => t.source.deviceId === spread[0]!.deviceId && t.source.tool === 'self.audio_speaker.set_volume')!.name;
    const byName = await gws[2]!.api('POST', `/v1/tools/${encodeURIComponent(name)}/call`, { arguments: { volume: 77 } });
    expect(byName.status).toBe(200);
    expect(spread[0]!.volume).toBe(77);
  });

  it("lists every instance's devices on every instance: GET /v1/devices in pages, and the hub's devices_list", async () => {
    const spread = await Promise.all(gws.map((g) => online(device(), g)));
    const ids = spread.map((d) => d.deviceId).sort();
    for (const g of gws) {
      // Pages of 2 walk the local and the cluster's ids together, each device once, in id order.
      const listed: Array<{ id: string; online: boolean; state: string }> = [];
      let cursor: string | undefined;
      do {
        const page = await g.api<{ devices: typeof listed; nextCursor?: string }>(
          'GET',
          `/v1/devices?online=true&limit=2${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`,
        );
        expect(page.status).toBe(200);
        expect(page.body.devices.length).toBeLessThanOrEqual(2);
        listed.push(...page.body.devices);
        cursor = page.body.nextCursor;
      } while (cursor);
      const listedIds = listed.map((d) => d.id);
      expect(listedIds, `${g.gw.cluster?.instanceId}'s listing`).toEqual(expect.arrayContaining(ids));
      expect(new Set(listedIds).size).toBe(listedIds.length);
      expect(listedIds).toEqual([...listedIds].sort());
      for (const d of listed.filter((x) => ids.includes(x.id))) expect(d).toMatchObject({ online: true, state: 'ready' });

      const hub = await g.api<{ structuredContent: { devices: Array<{ device_id: string; online: boolean; tools: Array<{ name: string }> }> } }>(
        'POST',
        '/v1/tools/devices_list/call',
        { arguments: {} },
      );
      expect(hub.status).toBe(200);
      for (const id of ids) {
        const entry = hub.body.structuredContent.devices.find((x) => x.device_id === id);
        expect(entry, `${id} in ${g.gw.cluster?.instanceId}'s devices_list`).toMatchObject({ online: true });
        expect(entry!.tools.map((t) => t.name)).toContain('self.audio_speaker.set_volume');
      }
    }
  });

  it('shares enrollments: approved on one instance, the device collects its credentials from another and connects', async () => {
    // Two more instances with enrollment on (hmac device auth, approve policy); the KV store is shared.
    const enrolling = {
      deviceAuth: 'hmac' as const,
      deviceSecret: 'cluster-enrollment-secret-0123456789',
      cluster: { enabled: true, nats: { servers: [nats.url] }, heartbeatMs: HEARTBEAT_MS },
    };
    const a = await startTestGateway({ ...enrolling, cluster: { ...enrolling.cluster, instanceId: 'gw-enroll-a' } });
    gws.push(a);
    const b = await startTestGateway({ ...enrolling, cluster: { ...enrolling.cluster, instanceId: 'gw-enroll-b' } });
    gws.push(b);
    const d = device();
    const ota = async (g: TestGateway) => {
      const res = await fetch(`${g.baseUrl}/xiaozhi/ota/`, {
        method: 'POST',
        headers: { 'device-id': d.deviceId, 'client-id': d.clientId, 'content-type': 'application/json' },
        body: JSON.stringify({ application: { name: 'xiaozhi', version: '1.7.6' } }),
      });
      return { status: res.status, body: OtaResponseSchema.parse(await res.json()) };
    };
    const first = await ota(a);
    const code = first.body.activation!.code;
    expect((await a.api('POST', `/v1/enrollments/${code}/approve`)).status).toBe(200);
    let creds: OtaResponse | undefined;
    await until(async () => {
      const r = await ota(b);
      if (r.body.websocket?.token) creds = r.body;
      return creds !== undefined;
    }, 'the approval on gw-enroll-a to reach gw-enroll-b');
    const ready = b.nextEvent('device.ready', d.deviceId);
    await d.connectWebSocket(b.wsUrl, { token: creds!.websocket!.token! });
    await ready;
    // Revoked on B: A forgets the binding too (its next OTA answer is an activation code again).
    expect((await b.api('POST', `/v1/enrollments/devices/${d.deviceId}/reenroll`)).status).toBe(200);
    await until(async () => (await ota(a)).body.activation !== undefined, 'the revocation on gw-enroll-b to reach gw-enroll-a');

    // Junk written to the shared bucket (not JSON; a record for another device) is refused, logged, not believed.
    const nc = await connect({ servers: nats.url });
    try {
      const kv = await new Kvm(nc).open('voxgate-store');
      const key = `enrollments.${Buffer.from(d.deviceId).toString('base64url')}`;
      // Each under a key of its own: the bucket keeps one value per key, so a watcher may never see a value
      // overwritten before it was delivered.
      await kv.put(`enrollments.${Buffer.from('02:00:00:00:77:77').toString('base64url')}`, 'not json {');
      await kv.put(
        key,
        JSON.stringify({ deviceId: '02:00:00:00:66:66', clientId: d.clientId, credId: 'x', issuedAt: 1, delivered: true, via: 'approve', enrolledAt: 'now' }),
      );
      await until(
        async () => a.logs.some((l) => String(l['msg']).includes('unreadable enrollment record from the shared store')),
        'the forged record to be refused',
      );
      await until(
        async () => a.logs.some((l) => String(l['msg']).includes('unreadable document in the shared store')),
        'the unparsable document to be refused',
      );
      const still = await ota(a);
      expect(still.body.activation).toBeDefined();
      expect(still.body.websocket?.token).toBeUndefined();
    } finally {
      await nc.close();
    }
  });

  it('a DELETE of an id that never connected drops its OTA report on every instance, not only on the one that was asked', async () => {
    const [a, b] = gws as [TestGateway, TestGateway, TestGateway];
    const id = nextMac();
    const reported = async (g: TestGateway) =>
      (await g.api<{ reported: { version: string | null; boards: string[] } | null }>('GET', `/v1/devices/${id}/firmware`)).body.reported;
    // The check lands on B (the report lives where the check did); the device never connects.
    const check = await fetch(`${b.baseUrl}/xiaozhi/ota/`, {
      method: 'POST',
      headers: { 'device-id': id, 'client-id': 'never-connected', 'content-type': 'application/json' },
      body: JSON.stringify({ application: { name: 'xiaozhi', version: '1.0.6' } }),
    });
    expect(check.status).toBe(200);
    expect(await reported(b)).toEqual({ version: '1.0.6', boards: [] });
    expect(await reported(a)).toBeNull();

    // Forgotten on A: nothing is recorded there (404), and B hears the forget through the shared store's watch.
    const heard = new Promise<void>((resolve) => {
      const off = b.gw.store.onChange?.(DEVICE_FACTS_COLLECTION, (c) => {
        if (c.key !== id || c.value !== undefined) return;
        off?.();
        resolve();
      });
    });
    expect((await a.api('DELETE', `/v1/devices/${id}`)).status).toBe(404);
    await withTimeout(heard, 30_000, "A's forget to reach gw-b");
    expect(await reported(b)).toBeNull();
  });

  it('refuses to start when NATS cannot be reached, saying where it tried (without the password)', async () => {
    const closed = await startNatsServer();
    const url = closed.url;
    await closed.stop();
    const withPassword = url.replace('nats://', 'nats://voxuser:s3cret-pass@');
    const err = await startTestGateway({ cluster: { enabled: true, instanceId: 'gw-nowhere', nats: { servers: [withPassword] } } }).then(
      () => undefined,
      (e: unknown) => e as Error,
    );
    expect(err?.message).toContain(`cannot reach NATS at ${url}`);
    expect(err?.message).not.toContain('s3cret');
  });

  it("keeps the owner's problem codes for forwarded calls", async () => {
    const d = await online(device(), gws[0]!);
    const far = gws[2]!;
    const unknown = await far.api<Problem>('POST', `/v1/devices/${d.deviceId}/tools/self.nope/call`, { arguments: {} });
    expect([unknown.status, unknown.body.code]).toEqual([404, 'TOOL_NOT_FOUND']);
    const invalid = await setVolume(far, d, 1000);
    expect([invalid.status, invalid.body.code]).toEqual([422, 'INVALID_ARGUMENTS']);
    d.holdReplies();
    const slow = await setVolume(far, d, 5, 200);
    expect([slow.status, slow.body.code]).toEqual([504, 'DEVICE_TIMEOUT']);
    const never = await far.api<Problem>('POST', '/v1/devices/02:00:00:00:99:99/tools/x/call', { arguments: {} });
    expect([never.status, never.body.code]).toEqual([404, 'DEVICE_NOT_FOUND']);
  });

  it('lets a newer connection on another instance take over: the old one closes 4000, its pending call fails', async () => {
    const [a, b, c] = gws as [TestGateway, TestGateway, TestGateway];
    const first = await online(device(), a);
    first.holdReplies();
    const pending = setVolume(b, first, 7);
    await first.waitForMcp((p) => p['method'] === 'tools/call');
    const second = device(first.deviceId);
    const ready = c.nextEvent('device.ready', first.deviceId);
    await second.connectWebSocket(c.wsUrl);
    await ready;
    expect((await withTimeout(first.closed(), 10_000, 'the replaced connection to close')).code).toBe(4000);
    const failed = await pending;
    expect([failed.status, failed.body.code]).toEqual([503, 'DEVICE_OFFLINE']);
    // Every instance now reaches the new connection.
    for (const g of gws) {
      await until(async () => (await setVolume(g, second, 40)).status === 200, `calls through ${g.gw.cluster?.instanceId} to reach the new connection`);
      expect(second.volume).toBe(40);
    }
    expect(a.gw.directory.get(first.deviceId)).toMatchObject({ online: true, state: 'ready' });
  });

  it("serves every device's events once on each instance's SSE stream", async () => {
    const d = device();
    const far = gws[1]!;
    const stream = await openSse(`${far.baseUrl}/v1/events?device=${d.deviceId}`, auth);
    try {
      await online(d, gws[0]!);
      const seen: string[] = [];
      for (;;) {
        const e = await stream.events.next(10_000, 'events of a device on another instance');
        seen.push(e.event!);
        if (e.event === 'device.ready') break;
      }
      expect(seen).toEqual(['device.online', 'device.ready']);
    } finally {
      stream.close();
    }
  });

  it('replays missed events to a client that resumes with Last-Event-ID on another instance', async () => {
    const [a, b, c] = gws as [TestGateway, TestGateway, TestGateway];
    const d = device();
    const first = await openSse(`${b.baseUrl}/v1/events?device=${d.deviceId}`, auth);
    let lastId: string;
    try {
      await online(d, a);
      for (;;) {
        const e = await first.events.next(10_000, 'device.ready on the first stream');
        if (e.event === 'device.ready') {
          lastId = e.id!;
          break;
        }
      }
    } finally {
      first.close();
    }
    // Missed while no stream is open: the device drops and comes back on A.
    const offline = a.nextEvent('device.offline', d.deviceId);
    d.terminate();
    await offline;
    const again = device(d.deviceId);
    const ready = await (async () => {
      const r = a.nextEvent('device.ready', d.deviceId);
      await again.connectWebSocket(a.wsUrl);
      return r;
    })();
    // The stream has stored the last of them (JetStream stores asynchronously to the core delivery).
    const nc = await connect({ servers: nats.url });
    try {
      const jsm = await jetstreamManager(nc);
      await until(async () => {
        const m = await jsm.streams.getMessage('VOXGATE_EVENTS', { last_by_subj: `voxgate.events.${d.deviceId}.device.ready` });
        return m?.json<{ id?: string }>().id === ready.id;
      }, 'the last event in the stream');
    } finally {
      await nc.close();
    }
    const resumed = await openSse(`${c.baseUrl}/v1/events?device=${d.deviceId}`, { ...auth, 'last-event-id': lastId });
    try {
      const seen: Array<{ id?: string; event?: string }> = [];
      for (;;) {
        const e = await resumed.events.next(10_000, 'the replayed events on another instance');
        seen.push({ id: e.id, event: e.event });
        if (e.id === ready.id) break;
      }
      expect(seen.map((e) => e.event)).toEqual(['device.offline', 'device.online', 'device.ready']);
    } finally {
      resumed.close();
    }
    // An id no instance ever gave still gets resync.
    const unknown = await openSse(`${c.baseUrl}/v1/events?device=${d.deviceId}`, { ...auth, 'last-event-id': 'zzzz-1' });
    try {
      expect((await unknown.events.next(10_000, 'resync')).event).toBe('resync');
    } finally {
      unknown.close();
    }
  });

  it('refuses malformed messages from NATS with a clear answer, counted, and keeps serving', async () => {
    const a = gws[0]!;
    const nc = await connect({ servers: nats.url });
    try {
      const answer = async (body: string) =>
        JSON.parse(new TextDecoder().decode((await nc.request('voxgate.call.gw-a', body, { timeout: 10_000 })).data)) as { ok: boolean; code?: string };
      expect(await answer('{"op":"call","deviceId":')).toMatchObject({ ok: false, code: 'INVALID_REQUEST' });
      expect(await answer(JSON.stringify({ op: 'call', deviceId: 'not a mac', name: 'x', args: {} }))).toMatchObject({ ok: false, code: 'INVALID_REQUEST' });
      expect(await answer(JSON.stringify({ op: 'call', deviceId: '02:00:00:00:98:01', name: 'x', args: {} }))).toMatchObject({
        ok: false,
        code: 'DEVICE_OFFLINE',
      });
      const refused = await a.metric('voxgate_cluster_events_refused_total');
      nc.publish('voxgate.events.x.device.online', '{"origin":"gw-x","type":"device.online","deviceId":"x","data":{}}');
      nc.publish(
        'voxgate.events.02:00:00:00:98:02.device.pwned',
        JSON.stringify({ origin: 'gw-x', type: 'device.pwned', deviceId: '02:00:00:00:98:02', data: {} }),
      );
      await until(async () => (await a.metric('voxgate_cluster_events_refused_total')) >= refused + 2, 'the malformed events to be counted');
      const d = await online(device(), gws[1]!);
      expect((await setVolume(a, d, 8)).status).toBe(200);
    } finally {
      await nc.close();
    }
  });

  // It starts a compiled gateway process (several seconds under heavy load): a hang guard, not a budget.
  it('fails calls to a killed instance at once, and converges when its devices reconnect elsewhere', { timeout: 120_000 }, async () => {
    const killed = startClusterMember(nats.url, 'gw-killed', HEARTBEAT_MS, TEST_API_KEY);
    try {
      const started = await killed.logLine('voxgate started');
      const wsUrl = `ws://${String(started['http'])}/xiaozhi/v1/`;
      const d = device();
      const [a, b] = gws as [TestGateway, TestGateway];
      const relayed = a.nextEvent('device.ready', d.deviceId, 30_000);
      await d.connectWebSocket(wsUrl);
      await relayed;
      await until(async () => (await setVolume(a, d, 3)).status === 200, 'a call through gw-a to the device on gw-killed');

      d.holdReplies();
      // The call's own timeout is a minute: only the instance's death can end it in the test's time.
      const inFlight = setVolume(a, d, 9, 60_000);
      await d.waitForMcp((p) => p['method'] === 'tools/call' && (p['params'] as { arguments: { volume: number } }).arguments.volume === 9);
      killed.child.kill('SIGKILL');
      await killed.exited;
      const failed = await inFlight;
      expect([failed.status, failed.body.code]).toEqual([503, 'DEVICE_OFFLINE']);
      const after = await setVolume(b, d, 4);
      expect([after.status, after.body.code]).toEqual([503, 'DEVICE_OFFLINE']);
      const offline = await b.api<{ online: boolean }>('GET', `/v1/devices/${d.deviceId}`);
      expect([offline.status, offline.body.online], JSON.stringify(offline.body)).toEqual([200, false]);

      // The instance id starts again (a restarted process): it marks the entries its dead run left offline.
      const restarted = await startTestGateway({
        cluster: { enabled: true, instanceId: 'gw-killed', nats: { servers: [nats.url] }, heartbeatMs: HEARTBEAT_MS },
      });
      gws.push(restarted);
      const witness = await online(device(), restarted);
      expect((await setVolume(b, witness, 6)).status).toBe(200); // b sees gw-killed alive again
      await until(
        async () => (await b.api<{ online: boolean }>('GET', `/v1/devices/${d.deviceId}`)).body.online === false,
        "the dead run's entry to read offline",
      );
      const stillOffline = await setVolume(b, d, 4);
      expect([stillOffline.status, stillOffline.body.code]).toEqual([503, 'DEVICE_OFFLINE']);

      // The device comes back through another instance: presence converges on every instance.
      d.terminate();
      const again = device(d.deviceId);
      await online(again, b);
      for (const g of gws) {
        const r = await setVolume(g, again, 11);
        expect(r.status).toBe(200);
      }
    } finally {
      killed.dispose();
    }
  });

  it('recovers when NATS itself restarts: devices old and new answer through every instance', async () => {
    const before = await online(device(), gws[1]!);
    await nats.restart();
    const fresh = device();
    const ready = gws[0]!.nextEvent('device.ready', fresh.deviceId);
    await fresh.connectWebSocket(gws[0]!.wsUrl);
    await ready;
    for (const g of gws)
      for (const d of [before, fresh])
        // A short call timeout: a call sent while the clients reconnect may be lost once, then retried.
        await until(
          async () => (await setVolume(g, d, 12, 2000)).status === 200,
          `${g.gw.cluster?.instanceId} to reach ${d.deviceId} after NATS restarted`,
          30_000,
        );
  }, 90_000);
});
