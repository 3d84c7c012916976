import pino from 'pino';
import { afterEach, describe, expect, it, vi } from 'vitest';
import type { EncodeJob } from '../../../src/voice/converse/contracts.js';
import { DeadlineQueue } from '../../../src/throttle/deadline-queue.js';
import { EncoderPool, type BackendHooks, type EncodeBackend, type PoolJob } from '../../../src/voice/converse/audio/encoder-pool.js';
import { EncoderProcess } from '../../../src/voice/converse/audio/encoder-process.js';
import { createOpusDecoder, createOpusEncoder } from '../../../src/voice/converse/audio/opus.js';

const log = pino({ level: 'silent' });
const settled = (j: EncodeJob) => new Promise<void>((r) => j.onSettled(r));
const tone = (k: number) => Int16Array.from({ length: 1440 }, (_, i) => Math.round(6000 * Math.sin((k * 1440 + i) * 0.06)));

/** A backend that records what it is sent and answers when the test says. */
class FakeBackend implements EncodeBackend {
  readonly kind = 'process';
  alive = true;
  sent: Array<{ job: PoolJob; complexity: number }> = [];
  inFlight: PoolJob[] = [];
  constructor(
    private readonly hooks: BackendHooks,
    private readonly capacity = 2,
  ) {}
  room() {
    return this.capacity - this.inFlight.length;
  }
  open() {}
  free() {}
  close() {
    this.alive = false;
  }
  send(jobs: readonly PoolJob[], complexity: number) {
    for (const job of jobs) {
      this.sent.push({ job, complexity });
      this.inFlight.push(job);
    }
  }
  /** Answers the oldest job in flight. */
  finish(n = 1) {
    for (let i = 0; i < n; i++) {
      const job = this.inFlight.shift();
      if (job) this.hooks.done(job, Uint8Array.of(job.pcm[0]! & 0xff), 500);
    }
  }
}

const pools: EncoderPool[] = [];
afterEach(() => {
  for (const p of pools.splice(0)) p.close();
  vi.useRealTimers();
});

function fakePool(o: { capacity?: number; adaptive?: boolean; now?: () => number; windowMs?: number } = {}) {
  let backend!: FakeBackend;
  const changes: string[] = [];
  const pool = new EncoderPool({
    complexity: 5,
    adaptive: o.adaptive ?? false,
    backends: (hooks) => [(backend = new FakeBackend(hooks, o.capacity))],
    observe: (w) => w.change && changes.push(`${w.change}:${w.complexity}`),
    ...(o.now ? { now: o.now } : {}),
    ...(o.windowMs ? { windowMs: o.windowMs } : {}),
  });
  pools.push(pool);
  return { pool, backend, changes };
}

const frameOf = (n: number) => new Int16Array(1440).fill(n);

describe('DeadlineQueue', () => {
  it('pops the earliest deadline first, and the first queued among equal deadlines', () => {
    const q = new DeadlineQueue<{ deadline: number; seq: number }>();
    const order = [5, 1, 3, 1, 9, 0, 3].map((deadline, seq) => ({ deadline, seq }));
    for (const x of order) q.push(x);
    const out: number[] = [];
    while (q.size) out.push(q.pop()!.seq);
    expect(out).toEqual([5, 1, 3, 2, 6, 0, 4]);
  });
});

describe('EncoderPool', () => {
  it('sends frames earliest deadline first across devices, a few at a time, and each device in its own order', async () => {
    const { pool, backend } = fakePool({ capacity: 2 });
    const a = pool.encoder(24_000, 60);
    const b = pool.encoder(24_000, 60);
    // Device a queued a whole sentence; device b's first frame is needed sooner than most of it.
    const aJobs = [0, 1, 2, 3].map((i) => a.schedule(frameOf(10 + i), 1000 + i * 60));
    const bJob = b.schedule(frameOf(20), 1050);
    // An earlier deadline for a later frame of a cannot overtake a's earlier frames.
    const aLate = a.schedule(frameOf(14), 0);
    await Promise.resolve();
    expect(backend.sent.map((s) => s.job.pcm[0])).toEqual([10, 20]);
    backend.finish(2);
    await Promise.resolve();
    expect(backend.sent.map((s) => s.job.pcm[0])).toEqual([10, 20, 11, 12]);
    backend.finish(2);
    await Promise.resolve();
    backend.finish(2);
    await Promise.all([...aJobs, bJob, aLate].map(settled));
    expect(backend.sent.map((s) => s.job.pcm[0])).toEqual([10, 20, 11, 12, 13, 14]);
    expect(aJobs.map((j) => j.packet?.[0])).toEqual([10, 11, 12, 13]);
  });

  it('skips cancelled frames and frames of a freed encoder; they settle without a packet', async () => {
    const { pool, backend } = fakePool({ capacity: 1 });
    const a = pool.encoder(24_000, 60);
    const jobs = [0, 1, 2].map((i) => a.schedule(frameOf(i), i));
    jobs[1]!.cancel();
    await Promise.resolve();
    backend.finish();
    await Promise.resolve();
    backend.finish();
    await Promise.all(jobs.map(settled));
    expect(backend.sent.map((s) => s.job.pcm[0])).toEqual([0, 2]);
    expect(jobs.map((j) => j.packet?.[0])).toEqual([0, undefined, 2]);
    a.free();
    const after = a.schedule(frameOf(3), 0);
    expect(after.settled).toBe(true);
    expect(after.packet).toBeUndefined();
  });

  it('lowers the complexity after a window with a frame encoded past its deadline, and restores it after quiet windows', async () => {
    vi.useFakeTimers({ now: 0 });
    let now = 0;
    const { pool, backend, changes } = fakePool({ adaptive: true, now: () => now, windowMs: 100 });
    const a = pool.encoder(24_000, 60);
    // Past its deadline but nobody waited for it (its deadline was an early estimate): not late.
    a.schedule(frameOf(0), 50);
    await Promise.resolve();
    now = 80;
    backend.finish();
    await vi.advanceTimersByTimeAsync(100);
    expect(pool.complexity).toBe(5);
    // The pacer waits for this one, and it comes past its deadline.
    a.schedule(frameOf(1), 50).onSettled(() => undefined);
    await Promise.resolve();
    backend.finish();
    await vi.advanceTimersByTimeAsync(100);
    expect(pool.complexity).toBe(3);
    a.schedule(frameOf(2), 10_000);
    await Promise.resolve();
    backend.finish();
    expect(backend.sent.at(-1)!.complexity).toBe(3);
    await vi.advanceTimersByTimeAsync(100 * 6);
    expect(pool.complexity).toBe(4);
    await vi.advanceTimersByTimeAsync(100 * 6);
    expect(pool.complexity).toBe(5);
    await vi.advanceTimersByTimeAsync(100 * 12);
    expect(pool.complexity).toBe(5);
    expect(changes).toEqual(['down:3', 'up:4', 'up:5']);
  });

  it('without the adaptive setting, keeps the configured complexity whatever is late', async () => {
    vi.useFakeTimers({ now: 0 });
    const { pool, backend } = fakePool({ adaptive: false, now: () => 1e9, windowMs: 100 });
    pool
      .encoder(24_000, 60)
      .schedule(frameOf(1), 0)
      .onSettled(() => undefined);
    await Promise.resolve();
    backend.finish();
    await vi.advanceTimersByTimeAsync(300);
    expect(pool.complexity).toBe(5);
  });

  it('with no process, encodes on the main thread the same packets as a plain encoder', async () => {
    const pool = new EncoderPool({ complexity: 5, adaptive: false, backends: () => [] });
    pools.push(pool);
    expect(pool.processes).toBe(0);
    const e = pool.encoder(24_000, 60);
    const ref = createOpusEncoder(24_000, 60, { complexity: 5 });
    const jobs = Array.from({ length: 12 }, (_, k) => e.schedule(tone(k), k * 60));
    await Promise.all(jobs.map(settled));
    for (let k = 0; k < jobs.length; k++) expect([...jobs[k]!.packet!]).toEqual([...ref.encode(tone(k))]);
    ref.free();
    e.free();
  });
});

describe('EncoderProcess', () => {
  it('encodes in a child process, in order, exactly as the codec does in this process; its audio decodes', async () => {
    // Easing off: with it, a loaded machine's slower frames lower the child's complexity below 5 (by design), and the
    // bytes then differ from the complexity-5 reference (seen with three test runs on two cores).
    const pool = new EncoderPool({ complexity: 5, adaptive: false, backends: (hooks) => [new EncoderProcess(hooks, log, undefined, false)] });
    pools.push(pool);
    expect(pool.processes).toBe(1);
    const e = pool.encoder(24_000, 60);
    const ref = createOpusEncoder(24_000, 60, { complexity: 5 });
    const jobs = Array.from({ length: 30 }, (_, k) => e.schedule(tone(k), k * 60));
    await Promise.all(jobs.map(settled));
    const dec = createOpusDecoder(24_000);
    for (let k = 0; k < jobs.length; k++) {
      expect([...jobs[k]!.packet!]).toEqual([...ref.encode(tone(k))]);
      expect(dec.decode(jobs[k]!.packet!).length).toBe(1440);
    }
    ref.free();
    dec.free();
  });

  it('orders the frames it holds earliest deadline first across devices, and drops cancelled ones', async () => {
    let proc!: EncoderProcess;
    const pool = new EncoderPool({ complexity: 5, adaptive: false, backends: (hooks) => [(proc = new EncoderProcess(hooks, log))] });
    pools.push(pool);
    const a = pool.encoder(24_000, 60);
    const b = pool.encoder(24_000, 60);
    await settled(a.schedule(tone(0), 0));
    // The process is held still while a's sentence reaches it, then b's urgent frame (two writes, ~60 KB: one pipe read).
    process.kill(proc.pid!, 'SIGSTOP');
    const order: string[] = [];
    const aJobs = Array.from({ length: 20 }, (_, k) => a.schedule(tone(k + 1), 10_000 + k * 60));
    await new Promise((r) => setImmediate(r));
    const bJob = b.schedule(tone(0), 5);
    await new Promise((r) => setImmediate(r));
    process.kill(proc.pid!, 'SIGCONT');
    aJobs.forEach((j, k) => j.onSettled(() => order.push(`a${k}`)));
    bJob.onSettled(() => order.push('b'));
    aJobs[19]!.cancel();
    await Promise.all([...aJobs, bJob].map(settled));
    expect(order[0]).toBe('a19'); // settled at once by the cancellation
    expect(order[1]).toBe('b');
    expect(order.slice(2)).toEqual(Array.from({ length: 19 }, (_, k) => `a${k}`));
    expect(aJobs[19]!.packet).toBeUndefined();
    expect(bJob.packet!.length).toBeGreaterThan(0);
  });

  it('encodes below the set complexity while more frames are due soon than fit at it, and never without easing', async () => {
    const used = async (ease: boolean) => {
      const complexities = new Set<number>();
      const pool = new EncoderPool({
        complexity: 5,
        adaptive: false,
        backends: (hooks) => [
          new EncoderProcess({ ...hooks, done: (j, p, us, c) => (complexities.add(c ?? -1), hooks.done(j, p, us, c)) }, log, undefined, ease),
        ],
      });
      pools.push(pool);
      // A hundred answers' worth of frames, all needed now: far more than 300 ms of encoding at complexity 5.
      const devices = Array.from({ length: 100 }, () => pool.encoder(24_000, 60));
      const now = performance.now();
      const jobs = devices.flatMap((e) => Array.from({ length: 10 }, (_, k) => e.schedule(tone(k), now + k * 60)));
      await Promise.all(jobs.map(settled));
      return complexities;
    };
    expect([...(await used(true))].some((c) => c < 5)).toBe(true);
    expect([...(await used(false))]).toEqual([5]);
  });

  it('when the process dies, its devices go on encoding on the main thread', async () => {
    let proc!: EncoderProcess;
    const pool = new EncoderPool({ complexity: 5, adaptive: false, backends: (hooks) => [(proc = new EncoderProcess(hooks, log))] });
    pools.push(pool);
    const e = pool.encoder(24_000, 60);
    await settled(e.schedule(tone(0), 0));
    const gone = new Promise<void>((r) => proc['child'].once('exit', () => r()));
    process.kill(proc.pid!, 'SIGKILL');
    await gone;
    expect(pool.processes).toBe(0);
    const later = e.schedule(tone(1), 0);
    await settled(later);
    expect(later.packet?.length).toBeGreaterThan(0);
  });
});
