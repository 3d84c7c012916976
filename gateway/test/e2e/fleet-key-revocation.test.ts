import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { ConfigInput } from '../../src/index.js';
import { SqliteStore } from '../../src/store/sqlite-store.js';
import { startTestGateway, type TestGateway } from '../../../test/support/gateway-harness.js';
import { recordingVolumeTool, ReferenceDevice } from '../../../test/support/reference-device.js';
import { until } from '../../../test/support/wait.js';

/**
 * Work a caller leaves behind (queued calls, jobs, schedules) must not outlive its API key: an operator who removes
 * a leaked key from the config and restarts finds that key's work settled (KEY_REVOKED), never run, while every other
 * key's work goes on. A real gateway in-process over a real store in a temp dir, restarted with another key list,
 * and reference devices over WebSocket.
 */
const OPS = 'ops-key-revocation-0123456789';
const LEAKED = 'leaked-key-revocation-0123456789';
const TENANT_KEY = 'tenant-key-revocation-0123456789';
const SET_VOLUME = 'self.audio_speaker.set_volume';

interface Call {
  id: string;
  state: string;
  error?: { code: string; message: string };
}
interface Job {
  id: string;
  state: string;
  error?: { code: string };
  counts: Record<string, number>;
}
interface Schedule {
  id: string;
  paused: boolean;
  nextRun: string | null;
  lastResult?: { callId?: string; error?: { code: string } };
}
interface HistoryPage {
  events: Array<{ type: string; deviceId: string; data: Record<string, unknown> }>;
}

const as = (apiKey: string) => ({ apiKey });
const open: TestGateway[] = [];
const devices: ReferenceDevice[] = [];
const dirs: string[] = [];
afterEach(async () => {
  for (const d of devices.splice(0)) d.terminate();
  for (const t of open.splice(0)) await t.close();
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

function dataDir(): string {
  const d = mkdtempSync(join(tmpdir(), 'voxgate-revoke-'));
  dirs.push(d);
  return d;
}

/** A gateway over `dir` with these keys; a second one over the same dir is a restart. */
async function boot(dir: string, apiKeys: string[], apiKeyTenants: Record<string, string> = {}): Promise<TestGateway> {
  const t = await startTestGateway({ apiKeys, apiKeyTenants } as ConfigInput, {}, { dataDir: dir });
  open.push(t);
  return t;
}

async function restart(t: TestGateway, dir: string, apiKeys: string[], apiKeyTenants: Record<string, string> = {}): Promise<TestGateway> {
  open.splice(open.indexOf(t), 1);
  await t.close();
  return boot(dir, apiKeys, apiKeyTenants);
}

/** A reference device recording every volume it is set to, connected and ready. */
async function online(t: TestGateway, deviceId: string, volumes: number[]): Promise<ReferenceDevice> {
  const d = new ReferenceDevice({ deviceId, tools: [recordingVolumeTool(volumes)] });
  devices.push(d);
  const ready = t.nextEvent('device.ready', deviceId);
  await d.connectWebSocket(t.wsUrl);
  await ready;
  return d;
}

const callOf = async (t: TestGateway, id: string) => (await t.api<Call>('GET', `/v1/calls/${id}`, undefined, as(OPS))).body;

describe('work queued by an API key does not outlive the key', { timeout: 60_000 }, () => {
  it('queued calls of a removed key are cancelled KEY_REVOKED at the restart, with their event and one log line, and never reach the device', async () => {
    const dir = dataDir();
    const id = '02:00:00:00:7e:01';
    let t = await boot(dir, [OPS, LEAKED]);
    const queue = async (key: string, volume: number) => {
      const r = await t.api<Call & Record<string, unknown>>('POST', `/v1/devices/${id}/calls`, { tool: SET_VOLUME, arguments: { volume } }, as(key));
      expect(r.status).toBe(202);
      // The key's fingerprint is kept inside; callers never see it.
      expect(r.body).not.toHaveProperty('principal');
      return r.body.id;
    };
    const leaked = await queue(LEAKED, 66);
    const legacy = await queue(LEAKED, 77);
    const mine = await queue(OPS, 12);
    await t.close();
    open.splice(open.indexOf(t), 1);
    // A call stored before the key's principal was recorded: made legacy by hand, as an older gateway wrote it.
    const store = new SqliteStore(join(dir, 'voxgate.db'));
    const doc = (await store.get('calls', legacy)) as Record<string, unknown>;
    delete doc['principal'];
    await store.put('calls', legacy, doc);
    await store.close();

    t = await boot(dir, [OPS]);
    // Settled at start, not left queued until its TTL.
    expect(await callOf(t, leaked)).toMatchObject({ state: 'cancelled', error: { code: 'KEY_REVOKED' } });
    expect((await callOf(t, leaked)).error?.message).toContain('no longer configured');
    expect((await callOf(t, legacy)).state).toBe('queued');
    expect((await callOf(t, mine)).state).toBe('queued');
    // Its call.state event went out as for any cancel (the history keeps it).
    await until(async () => {
      const page = await t.api<HistoryPage>('GET', `/v1/events/history?type=call.state&device=${id}`, undefined, as(OPS));
      return page.body.events.some((e) => e.data['callId'] === leaked && e.data['state'] === 'cancelled');
    }, 'the call.state event of the revoked call');
    // One warning for the key (by fingerprint: the key itself is in no line), and one summary.
    const lines = t.logs.filter((l) => l['code'] === 'KEY_REVOKED');
    expect(lines.filter((l) => l['keyPrincipal'] !== undefined)).toHaveLength(1);
    expect(lines.find((l) => l['keyPrincipal'] !== undefined)!['keyPrincipal']).toMatch(/^key:/);
    expect(JSON.stringify(t.logs)).not.toContain(LEAKED);
    expect((await t.api('GET', '/v1/devices', undefined, as(LEAKED))).status).toBe(401);

    // The device comes back: the operator's call and the legacy one run, in order; the removed key's never does.
    const volumes: number[] = [];
    await online(t, id, volumes);
    await until(async () => (await callOf(t, mine)).state === 'succeeded', "the operator key's call ran");
    expect(volumes).toEqual([77, 12]);
    expect((await callOf(t, leaked)).state).toBe('cancelled');
  });

  it('a key moved to another tenant across the restart is a revoked grant: its call on its old tenant device is not sent', async () => {
    const dir = dataDir();
    const id = '02:00:00:00:7e:02';
    let t = await boot(dir, [OPS, TENANT_KEY], { [TENANT_KEY]: 'acme' });
    // The device is acme's (an operator says so, once it is known), then goes offline.
    const first = await online(t, id, []);
    expect((await t.api('PATCH', `/v1/devices/${id}`, { tenant: 'acme' }, as(OPS))).status).toBe(200);
    const offline = t.nextEvent('device.offline', id);
    first.terminate();
    await offline;
    const queued = await t.api<Call>('POST', `/v1/devices/${id}/calls`, { tool: SET_VOLUME, arguments: { volume: 41 } }, as(TENANT_KEY));
    expect(queued.status).toBe(202);

    // Same key, now globex's. The device is still acme's, so the tenant check (DEVICE_MOVED) alone would send it.
    t = await restart(t, dir, [OPS, TENANT_KEY], { [TENANT_KEY]: 'globex' });
    expect(await callOf(t, queued.body.id)).toMatchObject({ state: 'cancelled', error: { code: 'KEY_REVOKED' } });
    expect((await callOf(t, queued.body.id)).error?.message).toContain('another tenant');
    // The key's new tenant cannot see it (nor the device).
    expect((await t.api('GET', `/v1/calls/${queued.body.id}`, undefined, as(TENANT_KEY))).status).toBe(404);

    const volumes: number[] = [];
    await online(t, id, volumes);
    const after = await t.api<Call>('POST', `/v1/devices/${id}/calls`, { tool: SET_VOLUME, arguments: { volume: 9 } }, as(OPS));
    await until(async () => (await callOf(t, after.body.id)).state === 'succeeded', 'a later call ran');
    expect(volumes).toEqual([9]);
  });

  it("a removed key's running job is cancelled KEY_REVOKED at the restart with its job.progress; the operator's job still runs", async () => {
    const dir = dataDir();
    const [a, b] = ['02:00:00:00:7e:03', '02:00:00:00:7e:04'];
    let t = await boot(dir, [OPS, LEAKED]);
    const start = async (key: string, volume: number, ids: string[]) => {
      const r = await t.api<Job & Record<string, unknown>>(
        'POST',
        '/v1/jobs',
        { tool: SET_VOLUME, arguments: { volume }, filter: { ids }, concurrency: 1 },
        as(key),
      );
      expect(r.status).toBe(202);
      expect(r.body).not.toHaveProperty('principal');
      return r.body.id;
    };
    const leakedJob = await start(LEAKED, 55, [a, b]);
    const opsJob = await start(OPS, 23, [a]);

    t = await restart(t, dir, [OPS]);
    const job = (await t.api<Job>('GET', `/v1/jobs/${leakedJob}`, undefined, as(OPS))).body;
    expect(job).toMatchObject({ state: 'cancelled', error: { code: 'KEY_REVOKED' }, counts: { cancelled: 2, queued: 0 } });
    const perDevice = await t.api<{ devices: Array<{ state: string; error?: { code: string } }> }>('GET', `/v1/jobs/${leakedJob}/devices`, undefined, as(OPS));
    expect(perDevice.body.devices.map((x) => [x.state, x.error?.code])).toEqual([
      ['cancelled', 'KEY_REVOKED'],
      ['cancelled', 'KEY_REVOKED'],
    ]);
    await until(async () => {
      const page = await t.api<HistoryPage>('GET', '/v1/events/history?type=job.progress', undefined, as(OPS));
      return page.body.events.some((e) => e.data['jobId'] === leakedJob && e.data['state'] === 'cancelled');
    }, 'the job.progress event of the revoked job');

    const volumes: number[] = [];
    await online(t, a, volumes);
    await until(async () => (await t.api<Job>('GET', `/v1/jobs/${opsJob}`, undefined, as(OPS))).body.state === 'succeeded', "the operator's job ended");
    expect(volumes).toEqual([23]);
  });

  it("a removed key's schedules are paused KEY_REVOKED at the restart; the operator's schedule still fires", async () => {
    const dir = dataDir();
    const id = '02:00:00:00:7e:05';
    let t = await boot(dir, [OPS, LEAKED]);
    const call = (volume: number) => ({ device: id, tool: SET_VOLUME, arguments: { volume } });
    const leakedCron = await t.api<Schedule>('POST', '/v1/schedules', { cron: '* * * * *', call: call(88) }, as(LEAKED));
    expect(leakedCron.status).toBe(201);
    expect(leakedCron.body).not.toHaveProperty('owner');
    // Due a few seconds after the restart: the operator's own work keeps working.
    const opsOnce = await t.api<Schedule>('POST', '/v1/schedules', { at: new Date(Date.now() + 3000).toISOString(), call: call(14) }, as(OPS));
    expect(opsOnce.status).toBe(201);

    t = await restart(t, dir, [OPS]);
    const revoked = (await t.api<Schedule>('GET', `/v1/schedules/${leakedCron.body.id}`, undefined, as(OPS))).body;
    expect(revoked).toMatchObject({ paused: true, nextRun: null, lastResult: { error: { code: 'KEY_REVOKED' } } });

    const volumes: number[] = [];
    await online(t, id, volumes);
    await until(
      async () => (await t.api<Schedule>('GET', `/v1/schedules/${opsOnce.body.id}`, undefined, as(OPS))).body.lastResult?.callId !== undefined,
      "the operator's schedule fired",
    );
    const fired = (await t.api<Schedule>('GET', `/v1/schedules/${opsOnce.body.id}`, undefined, as(OPS))).body;
    await until(async () => (await callOf(t, fired.lastResult!.callId!)).state === 'succeeded', 'its call ran');
    expect(volumes).toEqual([14]);
  });
});
