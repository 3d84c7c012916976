import { spawnSync } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { GatewayEvent } from '../../src/events/bus.js';
import { startTestGateway, type TestGateway } from '../../../test/support/gateway-harness.js';
import { startNatsServer, type NatsServer } from '../../../test/support/nats-server.js';
import { ReferenceDevice } from '../../../test/support/reference-device.js';
import { until } from '../../../test/support/wait.js';

const hasNats = spawnSync('nats-server', ['--version']).status === 0;
const VOLUME = 'self.audio_speaker.set_volume';
/** Each await here is for the cluster to spread a write: generous hang guards, never timing assertions. */
const SPREAD_MS = 60_000;

interface Call {
  id: string;
  state: string;
  deviceId: string;
  result?: { isError: boolean };
}
interface Job {
  id: string;
  state: string;
  total: number;
  counts: Record<string, number>;
}
interface Schedule {
  id: string;
  nextRun: string | null;
  lastRun: string | null;
  lastResult?: { callId?: string };
}

/** Calls of `tool` the device got (the MCP requests it received), whatever instance sent them. */
const callsGot = (d: ReferenceDevice, tool = VOLUME) =>
  d.mcpReceived.filter((p) => p['method'] === 'tools/call' && (p['params'] as Record<string, unknown> | undefined)?.['name'] === tool);

/**
 * Issue 23's fleet in a three-instance cluster (real nats-server; the store is the KV bucket every instance
 * shares): a device named on one instance is named on all; a call queued on one for an offline device is
 * delivered once when it returns to another; a job started on one runs devices held by the others; a
 * schedule's run fires once across the three.
 */
describe.skipIf(!hasNats)('the fleet in a three-instance cluster (issue 23)', { timeout: 240_000 }, () => {
  let nats: NatsServer;
  const gws: TestGateway[] = [];
  const devices: ReferenceDevice[] = [];
  /** Every event any instance's bus carried, once each (the cluster relays each event to every instance, id kept). */
  const seen = new Map<string, GatewayEvent>();
  /** Which instance published an event: ids are `<boot>-<seq>`, the boot is the instance's. */
  const origin = (e: GatewayEvent) => e.id.slice(0, e.id.lastIndexOf('-'));
  const sentEvents = (match: (e: GatewayEvent) => boolean) =>
    [...seen.values()].filter((e) => e.type === 'call.state' && e.data['state'] === 'sent' && match(e));

  beforeAll(async () => {
    nats = await startNatsServer();
    for (const name of ['a', 'b', 'c'])
      gws.push(await startTestGateway({ cluster: { enabled: true, instanceId: `gw-${name}`, nats: { servers: [nats.url] }, heartbeatMs: 1_000 } }));
    for (const g of gws) g.gw.bus.subscribe((e) => void seen.set(e.id, e));
  }, 180_000);
  afterAll(async () => {
    for (const d of devices) d.terminate();
    await Promise.all(gws.map((g) => g.close()));
    await nats?.stop();
  }, 120_000);

  /** The instance (boot) each device was last ready on. */
  const boots = new Map<string, string>();
  const connect = async (g: TestGateway, deviceId: string) => {
    const d = new ReferenceDevice({ deviceId });
    devices.push(d);
    const ready = g.nextEvent('device.ready', deviceId, SPREAD_MS);
    await d.connectWebSocket(g.wsUrl);
    boots.set(deviceId, origin(await ready));
    return d;
  };
  const everywhere = async (what: string, check: (g: TestGateway) => Promise<boolean>) => {
    for (const g of gws) await until(() => check(g), what, SPREAD_MS);
  };
  const callOn = async (g: TestGateway, id: string) => (await g.api<Call>('GET', `/v1/calls/${id}`)).body;

  it('names a device on A, seen named on B and C; a call queued on B while it is offline is delivered once when it returns to C', async () => {
    const [a, b, c] = gws as [TestGateway, TestGateway, TestGateway];
    const id = '02:00:00:00:23:a1';
    const first = await connect(a, id);
    await until(
      async () => (await a.api('PATCH', `/v1/devices/${id}`, { name: 'Kitchen speaker', room: 'Kitchen', tags: ['audio'] })).status === 200,
      'A names it',
    );
    await everywhere(
      'the name on every instance',
      async (g) => (await g.api<{ name: string | null }>('GET', `/v1/devices/${id}`)).body.name === 'Kitchen speaker',
    );
    expect((await c.api<{ devices: Array<{ id: string }> }>('GET', '/v1/devices?room=kitchen&tag=audio')).body.devices.map((d) => d.id)).toEqual([id]);

    const offline = a.nextEvent('device.offline', id, SPREAD_MS);
    first.terminate();
    await offline;
    await everywhere('it offline everywhere', async (g) => (await g.api<{ online: boolean }>('GET', `/v1/devices/${id}`)).body.online === false);

    const queued = await b.api<Call>('POST', `/v1/devices/${id}/calls`, { tool: VOLUME, arguments: { volume: 17 } });
    expect(queued.status).toBe(202);
    await everywhere('the queued call on every instance', async (g) => (await callOn(g, queued.body.id)).state === 'queued');

    const back = await connect(c, id);
    await everywhere('the call succeeded, read on every instance', async (g) => (await callOn(g, queued.body.id)).state === 'succeeded');
    expect(back.volume).toBe(17);
    expect(callsGot(back)).toHaveLength(1);
    expect(callsGot(first)).toHaveLength(0);
    for (const g of gws) expect(await callOn(g, queued.body.id)).toMatchObject({ state: 'succeeded', deviceId: id, result: { isError: false } });
    // Sent once, by C (the instance that holds the device now).
    const sent = sentEvents((e) => e.data['callId'] === queued.body.id);
    expect(sent.map(origin)).toEqual([boots.get(id)]);
  });

  it('runs a job started on A over devices held by B and C (and A), read back on every instance', async () => {
    const [a, b, c] = gws as [TestGateway, TestGateway, TestGateway];
    const held = [await connect(a, '02:00:00:00:23:b1'), await connect(b, '02:00:00:00:23:b2'), await connect(c, '02:00:00:00:23:b3')];
    const ids = held.map((d) => d.deviceId);
    // Every instance must know every device before a job can pick it by tag: tag each on the instance that holds it.
    for (const [i, d] of held.entries())
      await until(async () => (await gws[i]!.api('PATCH', `/v1/devices/${d.deviceId}`, { tags: ['cluster-job'] })).status === 200, 'tagged');
    await until(
      async () => (await a.api<{ devices: unknown[] }>('GET', '/v1/devices?tag=cluster-job')).body.devices.length === 3,
      'A to see the three tagged',
      SPREAD_MS,
    );
    const job = await a.api<Job>('POST', '/v1/jobs', { tool: VOLUME, arguments: { volume: 61 }, filter: { tags: ['cluster-job'] }, concurrency: 2 });
    expect(job.status).toBe(202);
    expect(job.body.total).toBe(3);
    await everywhere('the job done on every instance', async (g) => {
      const j = (await g.api<Job>('GET', `/v1/jobs/${job.body.id}`)).body;
      return j.state === 'succeeded' && j.counts['succeeded'] === 3;
    }).catch(async (e) => {
      for (const g of gws)
        console.log(
          JSON.stringify((await g.api('GET', `/v1/jobs/${job.body.id}`)).body),
          JSON.stringify((await g.api('GET', `/v1/jobs/${job.body.id}/devices`)).body),
        );
      throw e;
    });
    for (const d of held) {
      expect(callsGot(d)).toHaveLength(1);
      expect(d.volume).toBe(61);
    }
    const results = (await c.api<{ devices: Array<{ deviceId: string; state: string }> }>('GET', `/v1/jobs/${job.body.id}/devices`)).body.devices;
    expect(results.map((r) => [r.deviceId, r.state]).sort()).toEqual(ids.map((id) => [id, 'succeeded']).sort());
    // Each call was sent once, by the instance holding its device: three instances, not A alone.
    const sent = sentEvents((e) => e.data['jobId'] === job.body.id);
    expect(sent.map((e) => [e.deviceId, origin(e)]).sort()).toEqual(ids.map((id) => [id, boots.get(id)]).sort());
    expect(new Set(sent.map(origin)).size).toBe(3);
  });

  it('fires a one-off schedule once across the three instances', async () => {
    const [, b] = gws as [TestGateway, TestGateway, TestGateway];
    const d = await connect(gws[2]!, '02:00:00:00:23:c1');
    // Soon enough for a test, late enough that every instance knows it first (if one does not, it still claims the run).
    const at = new Date(Date.now() + 4_000).toISOString();
    const created = await b.api<Schedule>('POST', '/v1/schedules', { at, call: { device: d.deviceId, tool: VOLUME, arguments: { volume: 29 } } });
    expect(created.status).toBe(201);
    // Every instance has handled the run (it fired there, or it lost the claim, or it heard the run was made): none is due any more.
    await everywhere('the run handled on every instance', async (g) => {
      const s = (await g.api<Schedule>('GET', `/v1/schedules/${created.body.id}`)).body;
      return s.nextRun === null && s.lastRun !== null;
    });
    const s = (await b.api<Schedule>('GET', `/v1/schedules/${created.body.id}`)).body;
    expect(s.lastResult?.callId).toBeDefined();
    await until(async () => (await callOn(b, s.lastResult!.callId!)).state === 'succeeded', 'the call it started', SPREAD_MS);
    const calls = (await b.api<{ calls: Call[] }>('GET', `/v1/devices/${d.deviceId}/calls`)).body.calls;
    expect(calls.map((x) => x.id)).toEqual([s.lastResult!.callId]);
    expect(callsGot(d)).toHaveLength(1);
    const fired = new Set(
      [...seen.values()].filter((e) => e.type === 'schedule.fired' && e.data['scheduleId'] === created.body.id).map((e) => e.data['callId']),
    );
    expect([...fired]).toEqual([s.lastResult!.callId]);
  });
});
