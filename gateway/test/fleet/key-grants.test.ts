import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { FakeClock, Targets } from '../../../test/support/schedule-parts.js';
import { until as untilSoon } from '../../../test/support/wait.js';
import { principalOf } from '../../src/api/auth.js';
import { KeyGrants } from '../../src/fleet/key-grants.js';
import { SchedulesSlice } from '../../src/fleet/schedules-config.js';
import { Scheduler } from '../../src/fleet/schedules.js';
import { mac, rigsPerTest, SharedMemoryStore, startRig } from './fleet-parts.js';

/**
 * The checks made before each send, job call and schedule run, for what the start-up settling cannot see: work
 * written to a shared store (the cluster's KV bucket, simulated) by an instance whose key list still has a key that
 * this instance's no longer has (a rolling restart that removes a leaked key). The restart itself, over a real
 * gateway and devices: gateway/test/e2e/fleet-key-revocation.test.ts.
 */
const until = (check: Parameters<typeof untilSoon>[0], what: string) => untilSoon(check, what, 45_000);
const LEAKED = principalOf('leaked-key-0123456789');
const OPS = principalOf('ops-key-0123456789');
/** The key lists: before the leaked key was removed, and after. */
const before = () =>
  new KeyGrants(
    new Map([
      [OPS, undefined],
      [LEAKED, undefined],
    ]),
  );
const after = () => new KeyGrants(new Map([[OPS, undefined]]));

describe('work of a removed key, met at run time', () => {
  const { keep } = rigsPerTest();

  const pair = async () => {
    const shared = new SharedMemoryStore();
    const old = await startRig('', { soleSender: false, store: shared.view(), grants: before() });
    const updated = await startRig('', { soleSender: false, store: shared.view(), grants: after() });
    keep(old, updated);
    return { shared, old, updated };
  };

  it('a call queued through a peer that still has the key is cancelled KEY_REVOKED, not sent, by the instance that holds the device', async () => {
    const { old, updated } = await pair();
    const id = mac(1);
    const device = updated.fake.add(id);
    const leaked = await old.fleet.calls.enqueue({ deviceId: id, tool: 't', arguments: { n: 1 }, principal: LEAKED });
    const mine = await old.fleet.calls.enqueue({ deviceId: id, tool: 't', arguments: { n: 2 }, principal: OPS });
    await until(() => updated.fleet.calls.get(mine.id) !== undefined, 'the peer heard of both calls');
    updated.fake.connect(id);
    // Delivered in order: once the later call has run, the earlier one was dealt with.
    await until(() => updated.fleet.calls.get(mine.id)?.state === 'succeeded', "the operator key's call ran");
    expect(device.ran.map((r) => r.args['n'])).toEqual([2]);
    expect(updated.fleet.calls.get(leaked.id)).toMatchObject({ state: 'cancelled', error: { code: 'KEY_REVOKED' } });
    expect(updated.fake.events).toContainEqual(expect.objectContaining({ type: 'call.state', data: { callId: leaked.id, state: 'cancelled' } }));
  });

  it('a job started through a peer that still has the key is cancelled KEY_REVOKED at its first call; its calls are not sent', async () => {
    const { old, updated } = await pair();
    const [x, y] = [mac(2), mac(3)];
    const dx = updated.fake.add(x);
    updated.fake.add(y);
    old.fake.add(x);
    old.fake.add(y);
    const job = await old.fleet.jobs.create({ tool: 't', arguments: {}, filter: { ids: [x, y] }, concurrency: 2, principal: LEAKED });
    await until(() => updated.fleet.jobs.devices(job.id, { limit: 10 }).calls.length === 2, 'the peer heard of the job and its calls');
    updated.fake.connect(x);
    await until(() => updated.fleet.jobs.get(job.id)!.state !== 'running' || dx.ran.length > 0, 'the job was dealt with');
    expect(dx.ran).toEqual([]);
    const ended = updated.fake.events.find((e) => e.type === 'job.progress' && e.data['jobId'] === job.id && e.data['state'] === 'cancelled');
    expect(ended?.data['error']).toMatchObject({ code: 'KEY_REVOKED' });
    await until(() => updated.fleet.jobs.get(job.id)!.counts.cancelled === 2, 'both its calls cancelled');
    expect(updated.fleet.jobs.devices(job.id, { limit: 10 }).calls.map((c) => c.error?.code)).toEqual(['KEY_REVOKED', 'KEY_REVOKED']);
    expect(dx.ran).toEqual([]);
  });

  it('a schedule whose key is gone when its run comes starts nothing: paused, KEY_REVOKED, with its schedule.fired event', async () => {
    const shared = new SharedMemoryStore();
    const clock = new FakeClock(Date.parse('2026-11-26T00:00:00Z'));
    const config = SchedulesSlice.parse({});
    const log = pino({ level: 'silent' });
    const targets = new Targets();
    const fired: Array<Record<string, unknown>> = [];
    const bus = { publish: (_t: string, _d: string, data: Record<string, unknown> = {}) => void fired.push(data) };
    const call = { device: mac(4), tool: 't', arguments: {} };
    // Made on the instance that still has the key, with nothing due yet; run by one that has not.
    const old = await Scheduler.open({ store: shared.view(), targets, bus: bus as never, log, config, clock, grants: before() });
    await old.idle();
    const leaked = await old.create({ cron: '0 * * * *', call }, { principal: LEAKED });
    const mine = await old.create({ cron: '0 * * * *', call }, { principal: OPS });
    await old.close();
    const updated = await Scheduler.open({ store: shared.view(), targets, bus: bus as never, log, config, clock, grants: after() });
    await updated.idle();
    // Settled at open, before any run: paused, with why.
    expect(updated.get(leaked.id)).toMatchObject({ paused: true, nextRun: null, lastResult: { error: { code: 'KEY_REVOKED' } } });
    await clock.moveTo('2026-11-26T01:00:00Z', updated);
    expect(targets.calls).toHaveLength(1);
    expect(updated.get(mine.id).lastResult).toMatchObject({ callId: 'call-1' });

    // A peer resumes it (or never heard it was settled): the run itself checks again.
    const resumed = await updated.setPaused(leaked.id, false);
    expect(resumed.paused).toBe(false);
    await clock.moveTo('2026-11-26T02:00:00Z', updated);
    expect(targets.calls).toHaveLength(2);
    expect(updated.get(leaked.id)).toMatchObject({ paused: true, nextRun: null, lastResult: { error: { code: 'KEY_REVOKED' } } });
    expect(fired).toContainEqual(expect.objectContaining({ scheduleId: leaked.id, error: expect.objectContaining({ code: 'KEY_REVOKED' }) }));
    await updated.close();
  });
});
