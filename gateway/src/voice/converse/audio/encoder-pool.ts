/**
 * Downlink Opus encoding for every conversation of the process, off the paths that pace frames: a pool of encoder
 * processes (the native libopus addon, one process each: it crashes in a worker_thread on exit, and its output buffer
 * is shared by the threads of a process), or the main thread in short slices when there are none. Frames wait in one
 * queue per backend, earliest deadline first (the deadline is when the device would run dry without the frame), so
 * with 100 answers starting together the frame a device needs next is encoded first, not one session's burst.
 * A device's encoder lives on one backend, so its frames are encoded in order. Under load the complexity drops.
 */
import type { EncodeJob, OpusEncoder, ScheduledEncoder } from '../contracts.js';
import { DeadlineQueue } from '../../../throttle/deadline-queue.js';
import { createOpusEncoder } from './opus.js';

/** What a backend needs to open one device's encoder. */
export interface EncoderSpec {
  readonly id: number;
  readonly sampleRate: number;
  readonly frameMs: number;
}

/** One queued frame of one device. */
export class PoolJob implements EncodeJob {
  packet: Uint8Array | undefined;
  settled = false;
  cancelled = false;
  /** Someone waited for it (the pacer: the frame was due and not yet encoded). */
  awaited = false;
  /** The backend it was sent to (told of a cancellation: it may hold the frame in its own queue). */
  sentTo: EncodeBackend | undefined;
  private waiters: Array<() => void> | undefined;

  constructor(
    readonly encoder: PooledEncoder,
    readonly pcm: Int16Array,
    readonly deadline: number,
    readonly seq: number,
    private readonly onSettle?: () => void,
    readonly backlog = 0,
  ) {}

  onSettled(fn: () => void): void {
    if (this.settled) return fn();
    this.awaited = true;
    (this.waiters ??= []).push(fn);
  }

  cancel(): void {
    if (this.cancelled || this.settled) return;
    this.cancelled = true;
    this.sentTo?.cancel?.(this);
  }

  settle(packet: Uint8Array | undefined): void {
    if (this.settled) return;
    this.settled = true;
    this.packet = this.cancelled ? undefined : packet;
    this.onSettle?.();
    const waiters = this.waiters;
    this.waiters = undefined;
    for (const w of waiters ?? []) w();
  }
}

/** Where frames are encoded. `done` is called once per job sent, in the order sent. */
export interface EncodeBackend {
  readonly kind: 'inline' | 'process';
  readonly alive: boolean;
  /** How many more jobs it takes now (one that orders frames itself takes many, one that does not a few). */
  room(): number;
  open(spec: EncoderSpec): void;
  send(jobs: readonly PoolJob[], complexity: number): void;
  /** A job sent here is not wanted any more: settle it now, skip it if not yet encoded. */
  cancel?(job: PoolJob): void;
  /** The complexity changed: frames not yet encoded use the new one (a backend that queues frames itself). */
  setComplexity?(complexity: number): void;
  /** The device's encoder is closed: its frames still queued here settle without a packet. */
  free(id: number): void;
  close(): void;
}

export interface BackendHooks {
  /** A job was encoded (packet undefined: it failed); `us` the codec's own time, `complexity` the one it used. */
  done(job: PoolJob, packet: Uint8Array | undefined, us: number, complexity?: number): void;
  /** The backend is gone (a crashed process): its jobs in flight are lost, its encoders move on. */
  died(backend: EncodeBackend, reason: string): void;
}

export interface EncoderPoolOptions {
  /** The configured complexity (0-10): where the adaptive complexity starts and returns to. */
  complexity: number;
  /** Drop complexity while frames are waited for past their deadline, restore it once they are not. */
  adaptive: boolean;
  /** The backends; empty: the main thread, in slices. */
  backends: (hooks: BackendHooks) => EncodeBackend[];
  /** Per completed window: what the pool did (metrics). */
  observe?: (o: {
    encoded: number;
    late: number;
    codecUs: number;
    /** Frames a process encoded below the set complexity (its queue held more than it could encode at that one). */
    eased: number;
    complexity: number;
    pending: number;
    change?: 'down' | 'up';
  }) => void;
  now?: () => number;
  /** How often the adaptive complexity decides (ms). */
  windowMs?: number;
}

/** Windows without a late frame before complexity goes back up one step. */
const QUIET_WINDOWS_TO_RAISE = 6;
const STEP_DOWN = 2;

/** A device's downlink encoder on the pool. */
export class PooledEncoder implements ScheduledEncoder {
  readonly frameSamples: number;
  backend: EncodeBackend;
  private lastDeadline = -Infinity;
  freed = false;

  constructor(
    private readonly pool: EncoderPool,
    readonly spec: EncoderSpec,
    backend: EncodeBackend,
  ) {
    this.frameSamples = (spec.sampleRate * spec.frameMs) / 1000;
    this.backend = backend;
  }

  get sampleRate(): number {
    return this.spec.sampleRate;
  }

  get frameMs(): number {
    return this.spec.frameMs;
  }

  schedule(frame: Int16Array, deadlineMs: number): EncodeJob {
    if (frame.length !== this.frameSamples) throw new RangeError(`an Opus frame is ${this.frameSamples} samples, got ${frame.length}`);
    // Never before an earlier frame of this device: its frames must encode in order.
    this.lastDeadline = Math.max(this.lastDeadline, deadlineMs);
    return this.pool.enqueue(this, frame, this.lastDeadline);
  }

  free(): void {
    if (this.freed) return;
    this.freed = true;
    this.pool.release(this);
  }
}

export class EncoderPool {
  private readonly backends: EncodeBackend[];
  private inline: InlineBackend | undefined;
  private readonly queues = new Map<EncodeBackend, DeadlineQueue<PoolJob>>();
  private readonly encoders = new Set<PooledEncoder>();
  private readonly kicked = new Set<EncodeBackend>();
  private seq = 0;
  private nextId = 1;
  /** Frames scheduled and not yet settled. */
  private pending = 0;
  private readonly settledOne = () => void this.pending--;
  private current: number;
  private readonly window = { encoded: 0, late: 0, codecUs: 0, eased: 0, quiet: 0 };
  private readonly timer: NodeJS.Timeout;
  private readonly now: () => number;
  private closed = false;
  private readonly hooks: BackendHooks = {
    done: (job, packet, us, complexity) => this.done(job, packet, us, complexity),
    died: (backend, reason) => this.died(backend, reason),
  };

  constructor(private readonly o: EncoderPoolOptions) {
    this.now = o.now ?? (() => performance.now());
    this.current = o.complexity;
    this.backends = o.backends(this.hooks);
    for (const b of this.backends) b.setComplexity?.(this.current);
    this.timer = setInterval(() => this.decide(), o.windowMs ?? 500);
    this.timer.unref();
  }

  /** The complexity frames are encoded at now. */
  get complexity(): number {
    return this.current;
  }

  /** Processes alive (0: encoding on the main thread). */
  get processes(): number {
    return this.backends.filter((b) => b.alive).length;
  }

  encoder(sampleRate: number, frameMs: number): ScheduledEncoder {
    const spec: EncoderSpec = { id: this.nextId++, sampleRate, frameMs };
    // Checks the rate and frame length here, where a bad setting can still throw to the caller.
    createOpusEncoder(sampleRate, frameMs).free();
    const e = new PooledEncoder(this, spec, this.leastLoaded());
    e.backend.open(spec);
    this.encoders.add(e);
    return e;
  }

  close(): void {
    this.closed = true;
    clearInterval(this.timer);
    for (const q of this.queues.values()) for (const j of q.drain()) j.settle(undefined);
    for (const b of this.backends) b.close();
    this.inline?.close();
  }

  /** @internal */
  enqueue(e: PooledEncoder, pcm: Int16Array, deadline: number): PoolJob {
    const job = new PoolJob(e, pcm, deadline, this.seq++, this.settledOne, this.pending);
    this.pending++;
    if (this.closed || e.freed) {
      job.settle(undefined);
      return job;
    }
    this.queueOf(e.backend).push(job);
    this.kick(e.backend);
    return job;
  }

  /** @internal */
  release(e: PooledEncoder): void {
    this.encoders.delete(e);
    if (e.backend.alive) e.backend.free(e.spec.id);
  }

  private leastLoaded(): EncodeBackend {
    const alive = this.backends.filter((b) => b.alive);
    if (alive.length === 0) return (this.inline ??= new InlineBackend(this.hooks));
    const load = new Map<EncodeBackend, number>(alive.map((b) => [b, 0]));
    for (const e of this.encoders) if (load.has(e.backend)) load.set(e.backend, load.get(e.backend)! + 1);
    return alive.reduce((best, b) => (load.get(b)! < load.get(best)! ? b : best));
  }

  private queueOf(b: EncodeBackend): DeadlineQueue<PoolJob> {
    let q = this.queues.get(b);
    if (!q) this.queues.set(b, (q = new DeadlineQueue()));
    return q;
  }

  /** Sends a backend what it has room for, once per tick however many frames were queued in it. */
  private kick(b: EncodeBackend): void {
    if (this.kicked.has(b)) return;
    this.kicked.add(b);
    queueMicrotask(() => {
      this.kicked.delete(b);
      this.dispatch(b);
    });
  }

  private dispatch(b: EncodeBackend): void {
    const q = this.queues.get(b);
    if (!q || !b.alive || this.closed) return;
    const batch: PoolJob[] = [];
    for (let room = b.room(); room > 0 && q.size > 0;) {
      const job = q.pop()!;
      if (job.cancelled || job.encoder.freed) {
        job.settle(undefined);
        continue;
      }
      batch.push(job);
      room--;
    }
    for (const job of batch) job.sentTo = b;
    if (batch.length) b.send(batch, this.current);
  }

  private done(job: PoolJob, packet: Uint8Array | undefined, us: number, complexity?: number): void {
    this.window.encoded++;
    this.window.codecUs += us;
    if (complexity !== undefined && complexity < this.current) this.window.eased++;
    // Late: the pacer was waiting for it, past the time the device needed it (not merely past an early estimate).
    if (job.awaited && this.now() > job.deadline) this.window.late++;
    job.settle(packet);
    this.kick(job.encoder.backend);
  }

  /** A process died: what it had in flight is lost (those frames are skipped), its devices encode elsewhere. */
  private died(b: EncodeBackend, _reason: string): void {
    const q = this.queues.get(b);
    this.queues.delete(b);
    for (const e of this.encoders) {
      if (e.backend !== b) continue;
      e.backend = this.leastLoaded();
      e.backend.open(e.spec);
    }
    for (const j of q?.drain() ?? []) {
      if (j.encoder.backend === b) j.settle(undefined);
      else {
        this.queueOf(j.encoder.backend).push(j);
        this.kick(j.encoder.backend);
      }
    }
  }

  /** Adaptive complexity: down a step for a window with a frame encoded after its deadline, up one after quiet ones. */
  private decide(): void {
    const w = this.window;
    let change: 'down' | 'up' | undefined;
    if (this.o.adaptive && w.late > 0 && this.current > 0) {
      this.current = Math.max(0, this.current - STEP_DOWN);
      change = 'down';
      w.quiet = 0;
    } else if (w.late === 0 && ++w.quiet >= QUIET_WINDOWS_TO_RAISE && this.current < this.o.complexity) {
      this.current++;
      change = 'up';
      w.quiet = 0;
    }
    if (w.late > 0) w.quiet = 0;
    if (change) for (const b of this.backends) if (b.alive) b.setComplexity?.(this.current);
    if (w.encoded > 0 || change || this.pending > 0)
      this.o.observe?.({
        encoded: w.encoded,
        late: w.late,
        codecUs: w.codecUs,
        eased: w.eased,
        complexity: this.current,
        pending: this.pending,
        ...(change ? { change } : {}),
      });
    w.encoded = 0;
    w.late = 0;
    w.codecUs = 0;
    w.eased = 0;
  }
}

/**
 * The main thread as a backend (no processes configured, or none left): a few frames per slice, a macrotask
 * between slices, so pacing timers and sockets run in between and no stretch of encoding stalls the loop.
 */
class InlineBackend implements EncodeBackend {
  readonly kind = 'inline';
  alive = true;
  private readonly codecs = new Map<number, { enc: OpusEncoder; complexity: number }>();
  private readonly pending: Array<{ job: PoolJob; complexity: number }> = [];
  private scheduled = false;

  constructor(private readonly hooks: BackendHooks) {}

  room(): number {
    return Math.max(0, INLINE_SLICE_FRAMES - this.pending.length);
  }

  open(spec: EncoderSpec): void {
    this.codecs.get(spec.id)?.enc.free();
    this.codecs.set(spec.id, { enc: createOpusEncoder(spec.sampleRate, spec.frameMs), complexity: -1 });
  }

  send(jobs: readonly PoolJob[], complexity: number): void {
    for (const job of jobs) this.pending.push({ job, complexity });
    if (this.scheduled) return;
    this.scheduled = true;
    setImmediate(() => this.slice());
  }

  free(id: number): void {
    this.codecs.get(id)?.enc.free();
    this.codecs.delete(id);
  }

  close(): void {
    this.alive = false;
    for (const c of this.codecs.values()) c.enc.free();
    this.codecs.clear();
    for (const p of this.pending.splice(0)) p.job.settle(undefined);
  }

  private slice(): void {
    this.scheduled = false;
    for (const { job, complexity } of this.pending.splice(0)) {
      if (job.cancelled) {
        job.settle(undefined);
        continue;
      }
      const c = this.codecs.get(job.encoder.spec.id);
      let packet: Uint8Array | undefined;
      const t = performance.now();
      try {
        if (c && c.complexity !== complexity) {
          c.enc.setComplexity?.(complexity);
          c.complexity = complexity;
        }
        packet = c?.enc.encode(job.pcm);
      } catch {
        packet = undefined;
      }
      this.hooks.done(job, packet, Math.round((performance.now() - t) * 1000));
    }
  }
}

/** Frames the main thread encodes between two turns of the event loop (~4 ms at complexity 5). */
const INLINE_SLICE_FRAMES = 6;
