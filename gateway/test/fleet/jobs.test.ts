import { describe, expect, it } from 'vitest';
import type { GatewayEvent } from '../../src/events/bus.js';
import { JOBS_COLLECTION } from '../../src/fleet/jobs.js';
import { mac, rigsPerTest, type Rig } from './fleet-parts.js';

/**
 * Jobs over simulated devices: the devices are the fake call port of fleet-parts.ts (plain objects that
 * answer after a macrotask), not sessions; the queue, the delivery, the job runner and the SQLite store are
 * the real ones.
 */
describe('fleet jobs', () => {
  const { rig, dir, forget } = rigsPerTest();
  /** The job's last word: ended, and nothing of it queued or in flight any more. */
  const ended = (r: Rig, jobId: string) =>
    r.fake.event((e) => {
      const c = e.data['counts'] as Record<string, number> | undefined;
      return e.type === 'job.progress' && e.data['jobId'] === jobId && e.data['state'] !== 'running' && c?.['queued'] === 0 && c['sent'] === 0;
    });

  it('runs over 1 000 simulated devices, some offline until later and some failing, within its concurrency', async () => {
    const r = await rig(dir());
    const offline: string[] = [];
    for (let i = 0; i < 1000; i++) {
      const id = mac(i);
      r.fake.add(id, { ready: i % 10 !== 0, fails: i % 20 === 1, board: 'esp32-s3-box' });
      if (i % 10 === 0) offline.push(id);
    }
    r.fake.add(mac(5000), { ready: true, board: 'other-board' });
    const job = await r.fleet.jobs.create({
      tool: 'self.audio_speaker.set_volume',
      arguments: { volume: 40 },
      filter: { board: 'esp32-s3-box' },
      concurrency: 20,
    });
    expect(job).toMatchObject({ state: 'running', total: 1000, concurrency: 20 });
    // The online devices finish; the offline ones wait.
    await r.fake.event(() => r.fleet.jobs.get(job.id)!.counts.queued === offline.length && r.fleet.jobs.get(job.id)!.counts.sent === 0);
    expect(r.fleet.jobs.get(job.id)!.state).toBe('running');
    for (const id of offline) r.fake.connect(id);
    await ended(r, job.id);

    const done = r.fleet.jobs.get(job.id)!;
    expect(done.counts).toEqual({ queued: 0, sent: 0, succeeded: 950, failed: 50, expired: 0, cancelled: 0 });
    expect(done.state).toBe('failed');
    expect(r.fake.maxInFlight).toBeLessThanOrEqual(20);
    expect(r.fake.devices.get(mac(5000))!.ran).toEqual([]);
    for (const d of r.fake.devices.values()) if (d.board === 'esp32-s3-box') expect(d.ran).toHaveLength(1);
    // Progress is throttled (not one event per call change), and the last event has the final counts.
    const progress = r.fake.events.filter((e) => e.type === 'job.progress' && e.data['jobId'] === job.id);
    expect(progress.length).toBeLessThan(1000);
    expect(progress.at(-1)!.data).toMatchObject({ state: 'failed', counts: done.counts, total: 1000 });
    expect(progress.every((e) => e.deviceId === '')).toBe(true);
    // Per-device results, paged.
    const failed = r.fleet.jobs.devices(job.id, { state: 'failed', limit: 30 });
    expect(failed.calls).toHaveLength(30);
    expect(failed.calls.every((c) => c.error?.code === 'TOOL_ERROR')).toBe(true);
    const rest = r.fleet.jobs.devices(job.id, { state: 'failed', limit: 30, after: failed.next });
    expect(rest.calls).toHaveLength(20);
    expect(rest.next).toBeUndefined();
    expect(await r.store.get(JOBS_COLLECTION, job.id)).toMatchObject({ state: 'failed', counts: done.counts });
  }, 120_000);

  it('aborts when more than abortOverPercent of the finished calls failed: the queued calls are cancelled', async () => {
    const r = await rig(dir());
    for (let i = 0; i < 200; i++) r.fake.add(mac(i), { ready: true, fails: i % 10 < 3 });
    const job = await r.fleet.jobs.create({ tool: 't', arguments: {}, filter: { ids: [...r.fake.devices.keys()] }, concurrency: 5, abortOverPercent: 10 });
    await ended(r, job.id);
    const done = r.fleet.jobs.get(job.id)!;
    expect(done.state).toBe('aborted');
    expect(done.counts.queued).toBe(0);
    expect(done.counts.cancelled).toBeGreaterThan(100);
    expect(done.counts.succeeded + done.counts.failed + done.counts.cancelled).toBe(200);
    const ran = [...r.fake.devices.values()].filter((d) => d.ran.length > 0).length;
    expect(ran).toBe(done.counts.succeeded + done.counts.failed);
    const cancelled = r.fleet.jobs.devices(job.id, { state: 'cancelled', limit: 1000 }).calls;
    expect(cancelled.every((c) => r.fake.devices.get(c.deviceId)!.ran.length === 0)).toBe(true);
  });

  it('paces calls at ratePerSecond', async () => {
    const r = await rig(dir());
    for (let i = 0; i < 5; i++) r.fake.add(mac(i), { ready: true });
    const t0 = Date.now();
    const job = await r.fleet.jobs.create({ tool: 't', arguments: {}, filter: { ids: [...r.fake.devices.keys()] }, concurrency: 5, ratePerSecond: 20 });
    await ended(r, job.id);
    const starts = [...r.fake.devices.values()].map((d) => d.ran[0]!.at).sort((a, b) => a - b);
    // Five starts, each at least 50 ms after the one before: the last at least 200 ms after the job began.
    expect(starts.at(-1)! - t0).toBeGreaterThanOrEqual(200);
    expect(r.fleet.jobs.get(job.id)!.state).toBe('succeeded');
  });

  it('cancel: the queued calls are cancelled and the job says so', async () => {
    const r = await rig(dir());
    for (let i = 0; i < 10; i++) r.fake.add(mac(i));
    const job = await r.fleet.jobs.create({ tool: 't', arguments: {}, filter: { ids: [...r.fake.devices.keys()] }, concurrency: 2 });
    const cancelled = await r.fleet.jobs.cancel(job.id);
    expect(cancelled).toMatchObject({ state: 'cancelled', counts: { queued: 0, cancelled: 10 } });
    const last: GatewayEvent = await ended(r, job.id);
    expect(last.data).toMatchObject({ state: 'cancelled' });
    expect((await r.fleet.jobs.cancel(job.id)).state).toBe('cancelled');
    await expect(r.fleet.jobs.cancel('job_nope')).rejects.toMatchObject({ code: 'NOT_FOUND' });
  });

  it('survives a restart: its calls wait in the store and it ends when the devices come', async () => {
    const folder = dir();
    const first = await rig(folder);
    const ids = [mac(1), mac(2), mac(3)];
    for (const id of ids) first.fake.add(id);
    const job = await first.fleet.jobs.create({ tool: 't', arguments: { a: 1 }, filter: { ids }, concurrency: 1 });
    forget(first);
    await first.stop();

    const second = await rig(folder);
    for (const id of ids) second.fake.add(id);
    expect(second.fleet.jobs.get(job.id)).toMatchObject({ state: 'running', counts: { queued: 3 }, total: 3 });
    for (const id of ids) second.fake.connect(id);
    await ended(second, job.id);
    expect(second.fleet.jobs.get(job.id)).toMatchObject({ state: 'succeeded', counts: { succeeded: 3 } });
    expect(second.fake.maxInFlight).toBe(1);
  });

  it('an unreadable job in the store is skipped at start, never fatal; the others load', async () => {
    const folder = dir();
    const first = await rig(folder);
    first.fake.add(mac(1));
    const job = await first.fleet.jobs.create({ tool: 't', arguments: {}, filter: { ids: [mac(1)] }, concurrency: 1 });
    await first.store.put(JOBS_COLLECTION, 'job_broken', { id: 'job_broken', tool: '', concurrency: -1 });
    forget(first);
    await first.stop();
    const second = await rig(folder);
    expect(second.fleet.jobs.get(job.id)).toMatchObject({ state: 'running', total: 1 });
    expect(second.fleet.jobs.get('job_broken')).toBeUndefined();
  });

  it('a job selecting no device ends at once; too many running jobs is 429', async () => {
    const r = await rig(dir(), { config: { maxRunningJobs: 1 } });
    const empty = await r.fleet.jobs.create({ tool: 't', arguments: {}, filter: { board: 'nothing' }, concurrency: 1 });
    expect(empty).toMatchObject({ state: 'succeeded', total: 0 });
    // Its arguments are bounded all the same (red team 9): kept with the job, they were checked only per selected device.
    const big = { text: 'x'.repeat(20 * 1024) };
    await expect(r.fleet.jobs.create({ tool: 't', arguments: big, filter: { board: 'nothing' }, concurrency: 1 })).rejects.toMatchObject({
      code: 'PAYLOAD_TOO_LARGE',
    });
    r.fake.add(mac(1));
    await r.fleet.jobs.create({ tool: 't', arguments: {}, filter: { ids: [mac(1)] }, concurrency: 1 });
    await expect(r.fleet.jobs.create({ tool: 't', arguments: {}, filter: { ids: [mac(1)] }, concurrency: 1 })).rejects.toMatchObject({ code: 'TOO_MANY_JOBS' });
  });
});
