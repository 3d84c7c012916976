import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startNatsServer, type NatsServer } from '../../../test/support/nats-server.js';
import { FakeClock, Targets } from '../../../test/support/schedule-parts.js';
import { until } from '../../../test/support/wait.js';
import { ClusterSlice } from '../../src/cluster/config.js';
import { GatewayError } from '../../src/errors.js';
import { SchedulesSlice, type SchedulesConfig } from '../../src/fleet/schedules-config.js';
import { SCHEDULE_CLAIMS, SCHEDULES } from '../../src/fleet/schedules-record.js';
import { Scheduler, type NewSchedule } from '../../src/fleet/schedules.js';
import { NatsKvStore } from '../../src/store/nats-kv-store.js';
import { SqliteStore } from '../../src/store/sqlite-store.js';
import type { Store } from '../../src/store/store.js';

const log = pino({ level: 'silent' });
const DEVICE = 'aa:bb:cc:dd:ee:01';
const call = { device: DEVICE, tool: 'self.audio_speaker.set_volume', arguments: { volume: 30 } };

interface Fired {
  deviceId: string;
  data: Record<string, unknown>;
}

const dirs: string[] = [];
const stores: Store[] = [];
const schedulers: Scheduler[] = [];
function sqlite(path?: string): { store: SqliteStore; path: string } {
  let p = path;
  if (!p) {
    const dir = mkdtempSync(join(tmpdir(), 'voxgate-schedules-'));
    dirs.push(dir);
    p = join(dir, 'voxgate.db');
  }
  const store = new SqliteStore(p);
  stores.push(store);
  return { store, path: p };
}

async function open(store: Store, clock: FakeClock, targets = new Targets(), config: Partial<SchedulesConfig> = {}, instanceId?: string) {
  const fired: Fired[] = [];
  const bus = { publish: (_type: string, deviceId: string, data: Record<string, unknown> = {}) => void fired.push({ deviceId, data }) };
  const s = await Scheduler.open({ store, targets, bus: bus as never, log, config: { ...SchedulesSlice.parse({}), ...config }, clock, instanceId });
  schedulers.push(s);
  await s.idle();
  return { s, fired, targets };
}

const refusal = async (p: Promise<unknown>): Promise<string> => {
  const e = await p.then(
    () => undefined,
    (err: unknown) => err,
  );
  expect(e, 'refused').toBeInstanceOf(GatewayError);
  expect((e as GatewayError).code).toBe('INVALID_REQUEST');
  return (e as GatewayError).message;
};

afterEach(async () => {
  for (const s of schedulers.splice(0)) await s.close();
  for (const st of stores.splice(0)) await st.close();
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

describe('schedules (one instance, SQLite store, a clock moved by hand)', () => {
  it('a cron in a time zone: nextRun in that zone, fires once per run with a schedule.fired event', async () => {
    const clock = new FakeClock(Date.parse('2026-11-26T00:00:00Z'));
    const { s, fired, targets } = await open(sqlite().store, clock);
    // 08:30 in Paris is 07:30 UTC in November.
    const made = await s.create({ cron: '30 8 * * *', timeZone: 'Europe/Paris', call });
    expect(made).toMatchObject({ cron: '30 8 * * *', timeZone: 'Europe/Paris', paused: false, nextRun: '2026-11-26T07:30:00.000Z', lastRun: null, call });
    expect(made.id).toMatch(/^sch_/);
    expect(clock.pending).toBe(1);

    await clock.moveTo('2026-11-26T07:29:59Z', s);
    expect(targets.calls).toHaveLength(0);
    await clock.moveTo('2026-11-26T07:30:00Z', s);
    expect(targets.calls).toEqual([{ deviceId: DEVICE, tool: call.tool, args: { volume: 30 }, tenant: undefined }]);
    expect(fired).toEqual([{ deviceId: DEVICE, data: { scheduleId: made.id, run: '2026-11-26T07:30:00.000Z', callId: 'call-1' } }]);
    expect(s.get(made.id)).toMatchObject({ lastRun: '2026-11-26T07:30:00.000Z', lastResult: { callId: 'call-1' }, nextRun: '2026-11-27T07:30:00.000Z' });

    await clock.moveTo('2026-11-27T12:00:00Z', s);
    expect(targets.calls).toHaveLength(2);
    expect(s.list().map((x) => x.nextRun)).toEqual(['2026-11-28T07:30:00.000Z']);
    // One timer for the scheduler, whatever the number of schedules.
    await s.create({ cron: '*/5 * * * *', call });
    await s.create({ cron: '0 0 1 1 *', call });
    expect(clock.pending).toBe(1);
  });

  it('a one-off at a time fires once, then has no next run; a failed start is its result', async () => {
    const clock = new FakeClock(Date.parse('2026-11-26T10:00:00Z'));
    const { s, fired, targets } = await open(sqlite().store, clock);
    const once = await s.create({ at: '2026-11-26T11:00:00+01:00', call });
    expect(once.nextRun).toBe('2026-11-26T10:00:00.000Z');
    const job = await s.create({ at: '2026-11-26T10:05:00Z', job: { tool: 'self.reboot', filter: { tags: ['kitchen'] } } });
    await clock.moveTo('2026-11-26T10:00:00Z', s);
    targets.offline.add(DEVICE);
    const later = await s.create({ at: '2026-11-26T10:10:00Z', call });
    await clock.moveTo('2026-11-26T10:30:00Z', s);
    expect(s.get(once.id)).toMatchObject({ lastRun: '2026-11-26T10:00:00.000Z', nextRun: null, lastResult: { callId: 'call-1' } });
    expect(s.get(job.id)).toMatchObject({ lastRun: '2026-11-26T10:05:00.000Z', nextRun: null, lastResult: { jobId: 'job-1' } });
    expect(targets.jobs).toEqual([{ tool: 'self.reboot', filter: { tags: ['kitchen'] } }]);
    expect(s.get(later.id).lastResult).toEqual({ error: { code: 'DEVICE_OFFLINE', message: `device ${DEVICE} is offline` } });
    expect(fired.map((f) => f.data['scheduleId'])).toEqual([once.id, job.id, later.id]);
    expect(fired[1]!.deviceId).toBe('');
    expect(clock.pending).toBe(0);
  });

  it('refuses what cannot run, saying why', async () => {
    const clock = new FakeClock(Date.parse('2026-11-26T10:00:00Z'));
    const { s } = await open(sqlite().store, clock, new Targets(), { maxSchedules: 2 });
    const bad = async (input: NewSchedule, why: RegExp) => expect(await refusal(s.create(input))).toMatch(why);
    await bad({ cron: 'every day', call }, /not a five-field cron expression/);
    await bad({ cron: '61 * * * *', call }, /minute/);
    // A seconds field: nothing runs more than once a minute.
    await bad({ cron: '* * * * * *', call }, /five-field/);
    await bad({ cron: '0 0 30 2 *', call }, /never runs/);
    await bad({ cron: '0 8 * * *', timeZone: 'Mars/Olympus_Mons', call }, /not an IANA time zone/);
    await bad({ at: '2026-11-26T12:00:00', call }, /with an offset/);
    await bad({ at: 'tomorrow', call }, /ISO 8601/);
    await bad({ at: '2027-02-30T08:00:00Z', call }, /does not exist/);
    await bad({ at: '2026-11-26T09:00:00Z', call }, /past by more than the grace window/);
    await bad({ at: '2026-11-27T09:00:00Z', timeZone: 'Europe/Paris', call }, /"timeZone" goes with "cron"/);
    await bad({ cron: '0 8 * * *', at: '2026-11-27T09:00:00Z', call }, /exactly one of "cron"/);
    await bad({ call }, /exactly one of "cron"/);
    await bad({ cron: '0 8 * * *' }, /exactly one of "call"/);
    await bad({ cron: '0 8 * * *', call, job: { tool: 't', filter: {} } }, /exactly one of "call"/);
    await bad({ cron: '0 8 * * *', call: { ...call, device: 'kitchen' } }, /not a device id/);
    await bad({ cron: '0 8 * * *', call: { ...call, arguments: { text: 'x'.repeat(9000) } } }, /over 8192 bytes/);
    expect(s.size).toBe(0);
    // Within the grace window a slightly late one-off is accepted (and fires at once); the bound holds.
    await s.create({ at: '2026-11-26T09:58:00Z', call });
    await s.create({ cron: '@daily', call });
    await bad({ cron: '@hourly', call }, /already 2 schedules/);
  });

  it('paused: nothing runs and nextRun is null; resumed, a cron starts again after now', async () => {
    const clock = new FakeClock(Date.parse('2026-11-26T10:00:00Z'));
    const { s, targets } = await open(sqlite().store, clock);
    const hourly = await s.create({ cron: '0 * * * *', call });
    const paused = await s.setPaused(hourly.id, true);
    expect(paused).toMatchObject({ paused: true, nextRun: null });
    expect(clock.pending).toBe(0);
    await clock.moveTo('2026-11-26T13:30:00Z', s);
    expect(targets.calls).toHaveLength(0);
    expect(await s.setPaused(hourly.id, false)).toMatchObject({ paused: false, nextRun: '2026-11-26T14:00:00.000Z' });
    await clock.moveTo('2026-11-26T14:00:00Z', s);
    expect(targets.calls).toHaveLength(1);
  });

  it('deleted: gone from memory and store, never fires; unknown ids and other tenants get NOT_FOUND', async () => {
    const clock = new FakeClock(Date.parse('2026-11-26T10:00:00Z'));
    const { store } = sqlite();
    const { s, targets } = await open(store, clock);
    const a = await s.create({ cron: '0 * * * *', call }, { tenant: 'acme', principal: 'key:a' });
    const b = await s.create({ cron: '0 * * * *', call }, { tenant: 'other', principal: 'key:b' });
    expect(s.list('acme').map((x) => x.id)).toEqual([a.id]);
    expect(
      s
        .list()
        .map((x) => x.id)
        .sort(),
    ).toEqual([a.id, b.id].sort());
    expect(s.get(a.id)).not.toHaveProperty('owner');
    expect(() => s.get(a.id, 'other')).toThrow(/no schedule/);
    await expect(s.delete(a.id, 'other')).rejects.toMatchObject({ code: 'NOT_FOUND' });
    await s.delete(a.id, 'acme');
    expect(await store.get(SCHEDULES, a.id)).toBeUndefined();
    await expect(s.delete(a.id)).rejects.toMatchObject({ code: 'NOT_FOUND' });
    await clock.moveTo('2026-11-26T11:00:00Z', s);
    // The schedule's calls start as the caller that made it (its tenant).
    expect(targets.calls.map((c) => c.tenant)).toEqual(['other']);
  });

  it('survives a restart; a run missed by less than the grace window fires once, older ones are skipped', async () => {
    const clock = new FakeClock(Date.parse('2026-11-26T10:10:00Z'));
    const { store, path } = sqlite();
    const first = await open(store, clock);
    const hourly = await first.s.create({ cron: '0 * * * *', timeZone: 'UTC', call });
    const soon = await first.s.create({ at: '2026-11-26T10:30:00Z', call });
    const late = await first.s.create({ at: '2026-11-26T10:20:00Z', call });
    await first.s.close();
    await store.close();

    // Down from 10:10 to 11:03: the 11:00 run is 3 min late (fires, once), 10:30 and 10:20 are older than 5 min.
    clock.t = Date.parse('2026-11-26T11:03:00Z');
    const second = await open(sqlite(path).store, clock);
    expect(second.targets.calls).toHaveLength(1);
    expect(second.s.get(hourly.id)).toMatchObject({
      lastRun: '2026-11-26T11:00:00.000Z',
      lastResult: { callId: 'call-1' },
      nextRun: '2026-11-26T12:00:00.000Z',
    });
    expect(second.s.get(soon.id)).toMatchObject({ lastRun: '2026-11-26T10:30:00.000Z', lastResult: { skipped: true }, nextRun: null });
    expect(second.s.get(late.id)).toMatchObject({ lastResult: { skipped: true }, nextRun: null });
    expect(second.fired).toHaveLength(1);
    await second.s.close();
    await stores.at(-1)!.close();

    // Down for hours: many runs missed, the latest (15:00) is 10 min late: skipped; nothing fires.
    clock.t = Date.parse('2026-11-26T15:10:00Z');
    const third = await open(sqlite(path).store, clock);
    expect(third.targets.calls).toHaveLength(0);
    expect(third.s.get(hourly.id)).toMatchObject({ lastRun: '2026-11-26T15:00:00.000Z', lastResult: { skipped: true }, nextRun: '2026-11-26T16:00:00.000Z' });
    // Several runs missed within the window (a stall, not a restart): one fires, for the latest.
    const every = await third.s.create({ cron: '* * * * *', call });
    await clock.moveTo(Date.parse('2026-11-26T15:14:30Z'), third.s);
    expect(third.targets.calls).toHaveLength(4);
    const stalled = new FakeClock(clock.t);
    await third.s.close();
    await stores.at(-1)!.close();
    stalled.t = Date.parse('2026-11-26T15:18:30Z');
    const fourth = await open(sqlite(path).store, stalled);
    expect(fourth.targets.calls).toHaveLength(1);
    expect(fourth.s.get(every.id)).toMatchObject({ lastRun: '2026-11-26T15:18:00.000Z', nextRun: '2026-11-26T15:19:00.000Z' });
  });

  it('claims a run before firing it, so a second scheduler over the same claims never fires it again; old claims go', async () => {
    const clock = new FakeClock(Date.parse('2026-11-26T10:00:00Z'));
    const { store } = sqlite();
    const { s, targets } = await open(store, clock, new Targets(), { claimRetentionMs: 3_600_000 });
    const hourly = await s.create({ cron: '0 * * * *', call });
    await clock.moveTo('2026-11-26T11:00:00Z', s);
    expect(await store.list(SCHEDULE_CLAIMS)).toEqual([
      { key: `${hourly.id}@2026-11-26T11:00:00.000Z`, value: { by: 'local', at: Date.parse('2026-11-26T11:00:00Z') } },
    ]);
    // The record written back as it was before the run (a stale copy): the claim alone keeps the run from firing twice.
    await store.put(SCHEDULES, hourly.id, { ...((await store.get(SCHEDULES, hourly.id)) as object), lastRun: null, nextRun: '2026-11-26T11:00:00.000Z' });
    await s.close();
    const again = await open(store, clock);
    expect(again.targets.calls).toHaveLength(0);
    expect(targets.calls).toHaveLength(1);
    // Claims are pruned past their retention (at least the grace window plus a margin).
    await clock.moveTo('2026-11-26T13:30:00Z', again.s);
    const claims = (await store.list(SCHEDULE_CLAIMS)).map((c) => c.key);
    expect(claims).not.toContain(`${hourly.id}@2026-11-26T11:00:00.000Z`);
    expect(claims).toContain(`${hourly.id}@2026-11-26T13:00:00.000Z`);
  });

  it('a store that fails: the due run is tried again after a pause (no tight loop), and fires once when the store is back', async () => {
    const clock = new FakeClock(Date.parse('2026-11-26T10:00:00Z'));
    const { store } = sqlite();
    let failing = false;
    const flaky: Store = {
      get: (c, k) => store.get(c, k),
      put: (c, k, v) => store.put(c, k, v),
      putMany: (c, e) => store.putMany(c, e),
      delete: (c, k) => store.delete(c, k),
      list: (c) => store.list(c),
      close: () => store.close(),
      create: async (c, k, v) => {
        if (failing) throw new Error('the store is down');
        return store.create(c, k, v);
      },
    };
    const { s, targets } = await open(flaky, clock);
    const hourly = await s.create({ cron: '0 * * * *', call });
    failing = true;
    await clock.moveTo('2026-11-26T11:00:00Z', s);
    expect(targets.calls).toHaveLength(0);
    expect(clock.nextAt).toBe(Date.parse('2026-11-26T11:00:05Z'));
    await clock.moveTo('2026-11-26T11:00:05Z', s);
    expect(clock.nextAt).toBe(Date.parse('2026-11-26T11:00:10Z'));
    failing = false;
    await clock.moveTo('2026-11-26T11:00:10Z', s);
    expect(targets.calls).toHaveLength(1);
    expect(s.get(hourly.id)).toMatchObject({ lastRun: '2026-11-26T11:00:00.000Z', nextRun: '2026-11-26T12:00:00.000Z' });
  });

  it('SQLite create is put-if-absent', async () => {
    const { store } = sqlite();
    expect(await store.create('c', 'k', { n: 1 })).toBe(true);
    expect(await store.create('c', 'k', { n: 2 })).toBe(false);
    expect(await store.get('c', 'k')).toEqual({ n: 1 });
    await store.delete('c', 'k');
    expect(await store.create('c', 'k', { n: 3 })).toBe(true);
  });
});

const natsServerInstalled = spawnSync('nats-server', ['--version']).status === 0;
if (!natsServerInstalled) console.warn('schedules cluster test skipped: nats-server is not installed (apt-get install nats-server)');

describe.skipIf(!natsServerInstalled)('schedules in a cluster (three schedulers, NATS KV stores)', { timeout: 60_000 }, () => {
  let nats: NatsServer;
  beforeAll(async () => {
    nats = await startNatsServer();
  });
  afterAll(async () => {
    await nats?.stop();
  });
  const kv = async (bucket: string) => {
    const store = await NatsKvStore.open(ClusterSlice.parse({ enabled: true, nats: { servers: [nats.url] }, storeBucket: bucket }), log);
    stores.push(store);
    return store;
  };

  it('NATS KV create is put-if-absent, also after a delete', async () => {
    const [a, b] = [await kv('create-test'), await kv('create-test')];
    const both = await Promise.all([a.create('claims', 's@1', { by: 'a' }), b.create('claims', 's@1', { by: 'b' })]);
    expect(both.filter(Boolean)).toHaveLength(1);
    expect(await a.create('claims', 's@1', { by: 'a' })).toBe(false);
    await a.delete('claims', 's@1');
    expect(await b.create('claims', 's@1', { by: 'b' })).toBe(true);
    expect(await a.get('claims', 's@1')).toEqual({ by: 'b' });
  });

  it('fires each run exactly once across three instances', async () => {
    const start = Date.parse('2026-11-26T10:00:00Z');
    const instances = await Promise.all(
      ['a', 'b', 'c'].map(async (name) => {
        const clock = new FakeClock(start);
        return { clock, ...(await open(await kv('sched-cluster'), clock, new Targets(), {}, `gw-${name}`)) };
      }),
    );
    const made = await instances[0]!.s.create({ cron: '*/10 * * * *', call });
    const once = await instances[1]!.s.create({ at: '2026-11-26T10:05:00Z', job: { tool: 'self.reboot', filter: { room: 'kitchen' } } });
    await until(() => instances.every((i) => i.s.size === 2), 'every instance to hear of both schedules');
    const everyone = async (t: string) => Promise.all(instances.map((i) => i.clock.moveTo(t, i.s)));
    for (const t of ['2026-11-26T10:05:00Z', '2026-11-26T10:10:00Z', '2026-11-26T10:20:00Z', '2026-11-26T10:30:00Z']) await everyone(t);
    const calls = instances.flatMap((i) => i.targets.calls);
    const jobs = instances.flatMap((i) => i.targets.jobs);
    expect(calls).toHaveLength(3);
    expect(jobs).toHaveLength(1);
    expect(instances.flatMap((i) => i.fired)).toHaveLength(4);
    // Every instance ends up with the winner's record of the last run.
    await until(() => instances.every((i) => i.s.get(made.id).lastRun === '2026-11-26T10:30:00.000Z'), 'the last run on every instance');
    await until(
      () => instances.every((i) => i.s.get(once.id).nextRun === null && i.s.get(once.id).lastResult?.jobId !== undefined),
      'the one-off done everywhere',
    );
    // A delete on one instance reaches the others.
    await instances[2]!.s.delete(made.id);
    await until(() => instances.every((i) => i.s.size === 1), 'the delete on every instance');
  });
});
