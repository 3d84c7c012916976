/** Small await helpers for tests: wait on events, never sleep-to-wait. */
/** Anything with on/off, e.g. a node EventEmitter, a ws WebSocket/WebSocketServer or an mqtt.js client. */
export interface Emitter {
  on(event: string, listener: (...args: unknown[]) => void): unknown;
  off(event: string, listener: (...args: unknown[]) => void): unknown;
}

export interface Deferred<T> {
  readonly promise: Promise<T>;
  resolve(value: T): void;
  reject(reason: unknown): void;
  readonly settled: boolean;
}

/** A promise with its resolve/reject exposed. Settling twice is a no-op. */
export function deferred<T = void>(): Deferred<T> {
  let res!: (v: T) => void;
  let rej!: (e: unknown) => void;
  let settled = false;
  const promise = new Promise<T>((resolve, reject) => {
    res = resolve;
    rej = reject;
  });
  // a rejected deferred nobody awaits must not crash the test process
  promise.catch(() => undefined);
  return {
    promise,
    resolve(v) {
      if (settled) return;
      settled = true;
      res(v);
    },
    reject(e) {
      if (settled) return;
      settled = true;
      rej(e);
    },
    get settled() {
      return settled;
    },
  };
}

/** Reject with a clear message if `p` does not settle within `ms`. */
export function withTimeout<T>(p: Promise<T>, ms: number, what = 'operation'): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const t = setTimeout(() => reject(new Error(`timed out after ${ms} ms waiting for ${what}`)), ms);
    p.then(
      (v) => {
        clearTimeout(t);
        resolve(v);
      },
      (e: unknown) => {
        clearTimeout(t);
        reject(e);
      },
    );
  });
}

/**
 * Resolve with the arguments of the next `event` from `emitter`; reject on timeout, or on an 'error'
 * event (unless `event` is 'error' itself).
 */
export function once<T extends unknown[] = unknown[]>(emitter: Emitter, event: string, timeoutMs = 15_000): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const onEvent = (...args: unknown[]): void => {
      cleanup();
      resolve(args as T);
    };
    const onError = (err: unknown): void => {
      cleanup();
      reject(err);
    };
    const timer = setTimeout(() => {
      cleanup();
      reject(new Error(`timed out after ${timeoutMs} ms waiting for '${event}'`));
    }, timeoutMs);
    const cleanup = (): void => {
      clearTimeout(timer);
      emitter.off(event, onEvent);
      if (event !== 'error') emitter.off('error', onError);
    };
    emitter.on(event, onEvent);
    if (event !== 'error') emitter.on('error', onError);
  });
}

/** A timer-based pause. For simulated device-side delays (vTaskDelay), not for waiting in tests. */
export function delay(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** An async FIFO: push values, `next()` takes the oldest or waits for one. */
export class AsyncQueue<T> {
  private readonly items: T[] = [];
  private readonly waiters: Array<(v: T) => void> = [];

  push(v: T): void {
    const w = this.waiters.shift();
    if (w) w(v);
    else this.items.push(v);
  }

  next(timeoutMs = 15_000, what = 'queue item'): Promise<T> {
    const v = this.items.shift();
    if (v !== undefined) return Promise.resolve(v);
    let waiter!: (v: T) => void;
    const p = new Promise<T>((resolve) => {
      waiter = resolve;
      this.waiters.push(resolve);
    });
    return withTimeout(p, timeoutMs, what).catch((e: unknown) => {
      const i = this.waiters.indexOf(waiter);
      if (i !== -1) this.waiters.splice(i, 1);
      throw e;
    });
  }

  get size(): number {
    return this.items.length;
  }
}

/**
 * Resolve once `check` returns true; reject with `what` if it has not within `timeoutMs`. For state with
 * no event to await (a gauge, a broker's store): it polls, but never asserts on how long it took. The default
 * bound is a hang guard sized for a busy machine (two test runs on 2 cores), below vitest's 60 s test timeout.
 */
export async function until(check: () => boolean | Promise<boolean>, what: string, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}
