import { GatewayError } from '../errors.js';
import type { Metrics } from '../metrics.js';
import { DeadlineTimer } from './deadline-timer.js';

/** The call timeouts of `config.calls`: what a call gets when it asks for none, and the most it may ask for. */
export interface CallTimeouts {
  defaultTimeoutMs: number;
  maxTimeoutMs: number;
}

/** The timeout a call runs with: its own, else the default, never over the maximum. */
export function clampTimeout(requestedMs: number | undefined, limits: CallTimeouts): number {
  return Math.min(requestedMs ?? limits.defaultTimeoutMs, limits.maxTimeoutMs);
}

export interface CallQueueDeps {
  deviceId: string;
  /** Calls run at once per device; the firmware answers one at a time, so 1 by default. */
  concurrency: number;
  /** Calls waiting beyond the running ones; more are refused with DEVICE_BUSY. */
  queueLimit: number;
  metrics: Metrics;
  /** True once the session is closed: nothing is queued any more. */
  isClosed: () => boolean;
  offline: () => GatewayError;
}

/**
 * A call in the queue, in callback form: `start` runs it when a slot is free, with the time left until its
 * deadline, and the job calls `CallQueue.release` once when it has finished (whatever the outcome); `fail` ends
 * one that never started (queue full, deadline passed in the queue, device gone). One object per call and no
 * promise of the queue's own: a tool call is one promise from the route to the device's reply and back.
 */
export interface QueueJob {
  readonly deadline: number;
  start(remainingMs: number): void;
  fail(err: unknown): void;
}

/** One device's calls: FIFO with `concurrency` slots and a bounded queue; a job's deadline covers its time in the queue too. */
export class CallQueue {
  private active = 0;
  /** Made when a call first has to wait: most devices never queue one. */
  private waiting: QueueJob[] | undefined;
  /** The queued calls' deadlines: one timer for the queue, made with `waiting`. */
  private deadlines: DeadlineTimer | undefined;

  constructor(private readonly d: CallQueueDeps) {}

  get waitingCount(): number {
    return this.waiting?.length ?? 0;
  }

  /** Start `job` when a slot is free (now, if one is and nobody waits); DEVICE_BUSY when the queue is full. */
  submit(job: QueueJob): void {
    if (this.d.isClosed()) return job.fail(this.d.offline());
    const waiting = this.waiting;
    if (this.active < this.d.concurrency && (waiting === undefined || waiting.length === 0)) return this.startJob(job);
    if (waiting !== undefined && waiting.length >= this.d.queueLimit) {
      this.d.metrics.calls.inc({ outcome: 'busy' });
      return job.fail(new GatewayError('DEVICE_BUSY', `device ${this.d.deviceId} has ${waiting.length} calls waiting; try again later`));
    }
    (this.waiting ??= []).push(job);
    (this.deadlines ??= new DeadlineTimer(this)).arm(job.deadline);
  }

  /** Run `run` when a slot is free, with the time left until `deadline`; DEVICE_BUSY when the queue is full. */
  enqueue<T>(deadline: number, run: (remainingMs: number) => Promise<T>): Promise<T> {
    return new Promise<T>((resolve, reject) => this.submit(new PromisedJob(this, deadline, run, resolve, reject)));
  }

  /** A running job has finished: its slot frees, and the next job starts at once. */
  release(): void {
    this.active--;
    this.next();
  }

  /** The deadline timer's sweep: queued calls due at `now` leave the queue with DEVICE_TIMEOUT, oldest first. */
  expireDue(now: number): number {
    const waiting = this.waiting;
    if (waiting === undefined) return Infinity;
    let next = Infinity;
    const due: QueueJob[] = [];
    for (let i = 0; i < waiting.length;) {
      const job = waiting[i]!;
      if (job.deadline > now) {
        next = Math.min(next, job.deadline);
        i++;
      } else due.push(...waiting.splice(i, 1));
    }
    for (const job of due) {
      this.d.metrics.calls.inc({ outcome: 'timeout' });
      job.fail(new GatewayError('DEVICE_TIMEOUT', `call waited in the device queue until its deadline`));
    }
    return next;
  }

  /** Hold a slot for `job`; a job that throws as it starts frees it and fails. */
  private startJob(job: QueueJob): void {
    this.active++;
    try {
      job.start(Math.max(1, job.deadline - Date.now()));
    } catch (e) {
      this.release();
      job.fail(e instanceof Error ? e : new Error(String(e)));
    }
  }

  /** Fail every queued job (running ones fail through their requests). */
  failAll(err: GatewayError): void {
    this.deadlines?.stop();
    for (const job of this.waiting?.splice(0) ?? []) job.fail(err);
  }

  private next(): void {
    const waiting = this.waiting;
    if (waiting === undefined) return;
    while (this.active < this.d.concurrency && waiting.length > 0) this.startJob(waiting.shift()!);
  }
}

/** `enqueue`'s job: runs a promise-returning `run` and settles with it, the slot freed first. */
class PromisedJob<T> implements QueueJob {
  constructor(
    private readonly queue: CallQueue,
    readonly deadline: number,
    private readonly run: (remainingMs: number) => Promise<T>,
    private readonly resolve: (value: T) => void,
    private readonly reject: (err: unknown) => void,
  ) {}

  start(remainingMs: number): void {
    // A throw here is startJob's: it frees the slot and fails the job.
    this.run(remainingMs).then(
      (value) => {
        this.queue.release();
        this.resolve(value);
      },
      (err: unknown) => {
        this.queue.release();
        this.reject(err);
      },
    );
  }

  fail(err: unknown): void {
    this.reject(err);
  }
}
