import { GatewayError } from '../errors.js';
import type { Metrics } from '../metrics.js';

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

interface Job {
  start: () => void;
  reject: (err: GatewayError) => void;
  timer: NodeJS.Timeout;
}

/** One device's calls: FIFO with `concurrency` slots and a bounded queue; a job's deadline covers its time in the queue too. */
export class CallQueue {
  private active = 0;
  /** Made when a call first has to wait: most devices never queue one. */
  private waiting: Job[] | undefined;

  constructor(private readonly d: CallQueueDeps) {}

  get waitingCount(): number {
    return this.waiting?.length ?? 0;
  }

  /** Run `run` when a slot is free, with the time left until `deadline`; DEVICE_BUSY when the queue is full. */
  enqueue<T>(deadline: number, run: (remainingMs: number) => Promise<T>): Promise<T> {
    if (this.d.isClosed()) return Promise.reject(this.d.offline());
    // A free slot and nobody waiting (the usual case): run now, with no promise around the run's own.
    const waiting = this.waiting;
    if (this.active < this.d.concurrency && (waiting === undefined || waiting.length === 0)) return this.runNow(deadline, run);
    if (waiting !== undefined && waiting.length >= this.d.queueLimit) {
      this.d.metrics.calls.inc({ outcome: 'busy' });
      return Promise.reject(new GatewayError('DEVICE_BUSY', `device ${this.d.deviceId} has ${waiting.length} calls waiting; try again later`));
    }
    const queue = (this.waiting ??= []);
    return new Promise<T>((resolve, reject) => {
      const job: Job = {
        start: () => {
          clearTimeout(job.timer);
          this.runNow(deadline, run).then(resolve, reject);
        },
        reject,
        timer: setTimeout(
          () => {
            const i = queue.indexOf(job);
            if (i >= 0) queue.splice(i, 1);
            this.d.metrics.calls.inc({ outcome: 'timeout' });
            reject(new GatewayError('DEVICE_TIMEOUT', `call waited in the device queue until its deadline`));
          },
          Math.max(1, deadline - Date.now()),
        ),
      };
      queue.push(job);
    });
  }

  /** Hold a slot while `run` runs; the slot frees (and the next job starts) when it settles, or throws. */
  private runNow<T>(deadline: number, run: (remainingMs: number) => Promise<T>): Promise<T> {
    this.active++;
    let running: Promise<T>;
    try {
      running = run(Math.max(1, deadline - Date.now()));
    } catch (e) {
      this.release();
      return Promise.reject(e instanceof Error ? e : new Error(String(e)));
    }
    return running.then(
      (value) => {
        this.release();
        return value;
      },
      (err: unknown) => {
        this.release();
        throw err;
      },
    );
  }

  private release(): void {
    this.active--;
    this.next();
  }

  /** Fail every queued job (running ones fail through their requests). */
  failAll(err: GatewayError): void {
    for (const job of this.waiting?.splice(0) ?? []) {
      clearTimeout(job.timer);
      job.reject(err);
    }
  }

  private next(): void {
    const waiting = this.waiting;
    if (waiting === undefined) return;
    while (this.active < this.d.concurrency && waiting.length > 0) waiting.shift()!.start();
  }
}
