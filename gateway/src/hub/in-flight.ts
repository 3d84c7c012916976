import { GatewayError } from '../errors.js';
import type { CallContext, Peer } from './upstream/base.js';

interface InFlight {
  stop(): void;
  done: Promise<void>;
  server: string | undefined;
  peer: Peer | undefined;
}

export const shuttingDown = () => new GatewayError('SHUTTING_DOWN', 'The gateway is shutting down; try again when it is back');

/**
 * The calls in flight, so that shutdown can answer each one (SHUTTING_DOWN) and tell its upstream to
 * cancel, and so that a server's request to its client finds the caller it belongs to.
 */
export class CallsInFlight {
  private readonly calls = new Set<InFlight>();
  private draining = false;

  /** Run `work` with a signal that the caller's signal or shutdown aborts; shutdown also settles it at once. */
  async track<T>(ctx: CallContext, server: string | undefined, work: (signal: AbortSignal) => Promise<T>): Promise<T> {
    if (this.draining) throw shuttingDown();
    const abort = new AbortController();
    const onCallerAbort = () => abort.abort(ctx.signal?.reason);
    ctx.signal?.addEventListener('abort', onCallerAbort, { once: true });
    let stop!: (e: Error) => void;
    const stopped = new Promise<never>((_resolve, reject) => (stop = reject));
    const entry: InFlight = { stop: () => (stop(shuttingDown()), abort.abort(shuttingDown())), done: Promise.resolve(), server, peer: ctx.peer };
    const run = Promise.race([work(abort.signal), stopped]);
    entry.done = run.then(
      () => undefined,
      () => undefined,
    );
    this.calls.add(entry);
    try {
      return await run;
    } finally {
      this.calls.delete(entry);
      ctx.signal?.removeEventListener('abort', onCallerAbort);
    }
  }

  /**
   * Every call in flight, and every call from now on, answers SHUTTING_DOWN. Resolves once those answers
   * are handed to the callers' handlers, so they are written before connections close.
   */
  async drain(): Promise<void> {
    this.draining = true;
    const list = [...this.calls];
    for (const c of list) c.stop();
    await Promise.all(list.map((c) => c.done));
    // One macrotask turn: the HTTP and /mcp handlers write their responses in the microtasks after settling.
    await new Promise<void>((resolve) => setImmediate(resolve));
  }

  /** The callers (by identity) with a call running on `server` right now, and one peer of each. */
  peersOn(server: string): Map<object, Peer> {
    const peers = new Map<object, Peer>();
    for (const c of this.calls) if (c.server === server && c.peer && !peers.has(c.peer.key)) peers.set(c.peer.key, c.peer);
    return peers;
  }
}
