import { describe, expect, it } from 'vitest';
import { until as untilSoon } from '../../../test/support/wait.js';
import { JOB_ENDS_COLLECTION } from '../../src/fleet/jobs.js';
import { mac, rigsPerTest, SharedMemoryStore, startRig, type Rig } from './fleet-parts.js';

/** A job over devices held by two instances sharing one store (the cluster's KV bucket, simulated). */
/** A hang guard only (a busy machine): every wait is for a state, never a time. */
const until = (check: Parameters<typeof untilSoon>[0], what: string) => untilSoon(check, what, 45_000);

describe('fleet jobs with a shared store', () => {
  const { keep } = rigsPerTest();

  const pair = async () => {
    const shared = new SharedMemoryStore();
    const a = await startRig('', { soleSender: false, store: shared.view() });
    const b = await startRig('', { soleSender: false, store: shared.view() });
    keep(a, b);
    return { shared, a, b };
  };
  const ends = (r: Rig, jobId: string) => r.fake.events.filter((e) => e.type === 'job.progress' && e.data['jobId'] === jobId && e.data['state'] !== 'running');

  it('ends when its last two calls finish on two instances at once (each before hearing of the other), ended by one of them', async () => {
    const { a, b } = await pair();
    const [x, y] = [mac(1), mac(2)];
    const onA = a.fake.add(x, { ready: true, hold: true });
    const onB = b.fake.add(y, { ready: true, hold: true });
    a.fake.add(y);
    const job = await a.fleet.jobs.create({ tool: 't', arguments: {}, filter: { ids: [x, y] }, concurrency: 2 });
    await until(() => onA.held.length === 1 && onB.held.length === 1, 'both devices got their call');
    onA.held.splice(0).forEach((answer) => answer());
    onB.held.splice(0).forEach((answer) => answer());
    await until(() => a.fleet.jobs.get(job.id)?.state === 'succeeded' && b.fleet.jobs.get(job.id)?.state === 'succeeded', 'the job ended on both');
    await until(() => a.fleet.jobs.get(job.id)!.counts.succeeded === 2 && b.fleet.jobs.get(job.id)!.counts.succeeded === 2, 'both count both');
    // One instance ended it (one claim); a change that lands after the end is told too, with the same word.
    expect(await a.store.get(JOB_ENDS_COLLECTION, job.id)).toMatchObject({ state: 'succeeded' });
    const told = [...ends(a, job.id), ...ends(b, job.id)];
    expect(told.length).toBeGreaterThanOrEqual(1);
    expect(told.every((e) => e.data['state'] === 'succeeded')).toBe(true);
  });

  it('an abort judged on either instance is made once, and the queued calls are cancelled', async () => {
    const { a, b } = await pair();
    const ids = Array.from({ length: 40 }, (_, i) => mac(100 + i));
    // Half on each instance, all refusing; a tenth offline (their calls stay queued until the abort cancels them).
    ids.forEach((id, i) => {
      const [here, there] = i % 2 ? [b, a] : [a, b];
      here.fake.add(id, { ready: i % 10 !== 0, fails: true });
      there.fake.add(id);
    });
    const job = await a.fleet.jobs.create({ tool: 't', arguments: {}, filter: { ids }, concurrency: 4, abortOverPercent: 50 });
    await until(() => a.fleet.jobs.get(job.id)?.state === 'aborted' && b.fleet.jobs.get(job.id)?.state === 'aborted', 'aborted on both');
    await until(() => {
      const c = a.fleet.jobs.get(job.id)!.counts;
      return c.queued + c.sent === 0;
    }, 'nothing left queued or in flight');
    const c = a.fleet.jobs.get(job.id)!.counts;
    expect(c.cancelled).toBeGreaterThanOrEqual(4);
    expect(c.failed + c.cancelled).toBe(40);
    // One claim decided it (calls sent before the abort still finish, and are told as progress of the aborted job).
    expect(await a.store.get(JOB_ENDS_COLLECTION, job.id)).toMatchObject({ state: 'aborted' });
  });
});
