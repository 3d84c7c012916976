import { GatewayError } from '../errors.js';
import type { CallContext, Peer } from './upstream/base.js';

interface InFlight {
  stop(): void;
  server: string | undefined;
  peer: Peer | undefined;
}

export const shuttingDown = () => new GatewayError('SHUTTING_DOWN', 'The gateway is shutting down; try again when it is back');

/**
 * What stops one call: its caller's abort or shutdown. Work that can listen to it directly (the tools/call lane) does;
 * an AbortSignal is made only when some work reads `signal` (issue 21: an AbortController per call, and a listener
 * on its signal, were ~4 % of /mcp's busy time). Listeners run at the abort, in order, as an AbortSignal's do.
 */
export class CallStop {
  aborted = false;
  reason: unknown = undefined;
  private listeners: Array<() => void> | undefined;
  private controller: AbortController | undefined;

  /** An AbortSignal that follows this stop (made on first use). */
  get signal(): AbortSignal {
    if (!this.controller) {
      this.controller = new AbortController();
      if (this.aborted) this.controller.abort(this.reason);
    }
    return this.controller.signal;
  }

  addEventListener(_type: 'abort', fn: () => void): void {
    if (!this.aborted) (this.listeners ??= []).push(fn);
  }

  removeEventListener(_type: 'abort', fn: () => void): void {
    const i = this.listeners?.indexOf(fn) ?? -1;
    if (i >= 0) this.listeners!.splice(i, 1);
  }

  abort(reason: unknown): void {
    if (this.aborted) return;
    this.aborted = true;
    this.reason = reason;
    this.controller?.abort(reason);
    const listeners = this.listeners;
    this.listeners = undefined;
    if (!listeners) return;
    for (const fn of listeners)
      try {
        fn();
      } catch (e) {
        // As an AbortSignal's listener that throws: reported as uncaught, the other listeners still run.
        process.nextTick(() => {
          throw e;
        });
      }
  }
}

/**
 * The context a call's work gets: the caller's fields, its stop, and `signal` made from the stop when first read.
 * A class, not `{ ...ctx, stop, get signal() {} }`: in Node 20's V8 such a literal gets a map of its own per call (a
 * key added after a spread) and a new getter closure and accessor pair, ~3 µs and an object every later read misses
 * its inline caches on (issue 21, `mcpc1c`). Here every context shares one map. `signal` is the prototype's: the
 * caller's own signal, copied in by `Object.assign`, lands in the setter, which drops it (the stop follows it).
 */
class StoppedContext {
  stop!: CallStop;
  get signal(): AbortSignal {
    return this.stop.signal;
  }
  set signal(_callers: AbortSignal | undefined) {
    // The caller's signal aborts the stop (CallsInFlight.track); work reads the stop's.
  }
}

export function withStop<C extends CallContext>(ctx: C, stop: CallStop): C {
  const out = Object.assign(new StoppedContext(), ctx);
  out.stop = stop;
  return out as unknown as C;
}

/**
 * The calls in flight, so that shutdown can answer each one (SHUTTING_DOWN) and tell its upstream to
 * cancel, and so that a server's request to its client finds the caller it belongs to.
 */
export class CallsInFlight {
  private readonly calls = new Set<InFlight>();
  private draining = false;

  /**
   * Run `work` with a stop that the caller's signal or shutdown aborts; shutdown also settles it at once.
   * One promise of its own per call (issue 21: no race against a "stopped" promise, no async frame).
   */
  track<T>(ctx: CallContext, server: string | undefined, work: (stop: CallStop) => Promise<T>): Promise<T> {
    if (this.draining) return Promise.reject(shuttingDown());
    const stop = new CallStop();
    const caller = ctx.signal;
    const onCallerAbort = caller ? () => stop.abort(caller.reason) : undefined;
    // No `once`: Node 20 wraps a once-listener of an AbortSignal in a closure and a registry entry, ~40 % of this
    // listener's cost (issue 21); `finish` removes it, and an abort fires at most once anyway.
    if (caller && onCallerAbort) caller.addEventListener('abort', onCallerAbort);
    return new Promise<T>((resolve, reject) => {
      const finish = () => {
        this.calls.delete(entry);
        if (caller && onCallerAbort) caller.removeEventListener('abort', onCallerAbort);
      };
      const entry: InFlight = {
        stop: () => {
          finish();
          reject(shuttingDown());
          stop.abort(shuttingDown());
        },
        server,
        peer: ctx.peer,
      };
      this.calls.add(entry);
      let run: Promise<T>;
      try {
        run = work(stop);
      } catch (e) {
        finish();
        return reject(e as Error);
      }
      run.then(
        (v) => (finish(), resolve(v)),
        (e: unknown) => (finish(), reject(e as Error)),
      );
    });
  }

  /**
   * Every call in flight, and every call from now on, answers SHUTTING_DOWN. Resolves once those answers
   * are handed to the callers' handlers, so they are written before connections close.
   */
  async drain(): Promise<void> {
    this.draining = true;
    for (const c of [...this.calls]) c.stop();
    // One macrotask turn: the rejections settled above reach the HTTP and /mcp handlers in the microtasks
    // before it, and they write their responses there.
    await new Promise<void>((resolve) => setImmediate(resolve));
  }

  /**
   * The callers (by identity) with a call running on `server` right now, and one peer of each. A call whose
   * caller cannot be asked (the HTTP API, the assistant) counts as a caller of its own, with no peer: a
   * server's request during it may be that call's, so it must not go to another caller that can answer.
   */
  peersOn(server: string): Map<object, Peer | undefined> {
    const peers = new Map<object, Peer | undefined>();
    for (const c of this.calls) {
      if (c.server !== server) continue;
      if (!c.peer) peers.set(c, undefined);
      else if (!peers.has(c.peer.key)) peers.set(c.peer.key, c.peer);
    }
    return peers;
  }
}
