/** How many run at once, how many may wait (in all, and per share), and for how long. */
export interface GateLimits {
  maxConcurrent: number;
  /**
   * Slots one share may hold at once (default: all). Below `maxConcurrent`, the rest stay for the others: round-robin
   * orders only the waiters, so without it a share whose requests last longer than `maxWaitMs` (speech streamed at
   * real time, a long answer) held every slot and the others' waiters were refused however fair the queue was.
   */
  maxConcurrentPerShare?: number;
  maxWaiting: number;
  /** Waiters one share (a tenant) may have queued at once: the rest of the queue stays open to the others. */
  maxWaitingPerShare: number;
  maxWaitMs: number;
}

/** Why a request was not let through: the queue (or the share's part of it) was full, or its wait ran out. */
export type GateRefusal = 'queue_full' | 'tenant_queue_full' | 'wait_timeout';

export class GateRefused extends Error {
  constructor(readonly reason: GateRefusal) {
    super(
      reason === 'wait_timeout'
        ? 'waited too long for a free slot'
        : reason === 'tenant_queue_full'
          ? 'too many requests of this tenant are waiting'
          : 'too many requests are waiting',
    );
    this.name = 'GateRefused';
  }
}

/** A held slot; `release` frees it (once: later calls do nothing). */
export interface GateSlot {
  release(): void;
}

interface Waiter {
  share: string;
  grant(): void;
}

/**
 * A counting semaphore with a bounded wait queue, a wait timeout, and fairness between shares (tenants).
 *
 * Fairness, kept simple: each share has its own FIFO of waiters, capped at `maxWaitingPerShare`, and a freed slot
 * goes to the shares in turn (round-robin over the shares that have someone waiting), not to the oldest waiter
 * overall. So one tenant flooding the gate fills only its own part of the queue (its next request is refused, not
 * another tenant's), and a tenant with one waiter is served after at most one waiter of every other share, however
 * many the flooding tenant has queued. Slots in flight are split by share only as far as `maxConcurrentPerShare`
 * says: one tenant may use that many of an idle gateway's slots, and every slot it frees is offered to the others
 * first; a share at its cap waits while the others are served.
 *
 * A waiter whose signal aborts leaves the queue at once and never takes a slot; a waiter that was granted a slot
 * after its signal aborted (both in one tick) hands the slot straight back.
 */
export class FairGate {
  private active = 0;
  private waitingCount = 0;
  /** Share → slots it holds (absent: none). */
  private readonly activeByShare = new Map<string, number>();
  /** Share → its waiters, oldest first; the map's order is the round-robin order (a served share moves to the end). */
  private readonly queues = new Map<string, Waiter[]>();

  constructor(
    private readonly limits: GateLimits,
    /** Called after every change of the counts (metrics). */
    private readonly onChange: (inFlight: number, waiting: number) => void = () => undefined,
  ) {}

  get inFlight(): number {
    return this.active;
  }

  get waiting(): number {
    return this.waitingCount;
  }

  /** A slot now, or when one frees; rejects with GateRefused, or with the signal's reason when it aborts first. */
  acquire(share: string, signal?: AbortSignal): Promise<GateSlot> {
    if (signal?.aborted) return Promise.reject(abortReason(signal));
    // Free slots are never left while a waiter could take one (`next` runs on every release), so anyone still waiting
    // is of a share at its cap: a request of another share may take a free slot at once without passing them.
    if (this.active < this.limits.maxConcurrent && this.mayTake(share)) return Promise.resolve(this.take(share));
    const queue = this.queues.get(share);
    if ((queue?.length ?? 0) >= this.limits.maxWaitingPerShare) return Promise.reject(new GateRefused('tenant_queue_full'));
    if (this.waitingCount >= this.limits.maxWaiting) return Promise.reject(new GateRefused('queue_full'));
    return new Promise<GateSlot>((resolve, reject) => {
      const leave = (err: unknown): void => {
        clearTimeout(timer);
        signal?.removeEventListener('abort', onAbort);
        this.remove(waiter);
        reject(err);
      };
      const onAbort = (): void => leave(abortReason(signal!));
      const timer = setTimeout(() => leave(new GateRefused('wait_timeout')), this.limits.maxWaitMs);
      const waiter: Waiter = {
        share,
        grant: () => {
          clearTimeout(timer);
          signal?.removeEventListener('abort', onAbort);
          const slot = this.take(share);
          if (signal?.aborted) {
            slot.release();
            reject(abortReason(signal));
          } else resolve(slot);
        },
      };
      signal?.addEventListener('abort', onAbort, { once: true });
      if (queue) queue.push(waiter);
      else this.queues.set(share, [waiter]);
      this.waitingCount++;
      this.onChange(this.active, this.waitingCount);
    });
  }

  private mayTake(share: string): boolean {
    return (this.activeByShare.get(share) ?? 0) < (this.limits.maxConcurrentPerShare ?? this.limits.maxConcurrent);
  }

  private take(share: string): GateSlot {
    this.active++;
    this.activeByShare.set(share, (this.activeByShare.get(share) ?? 0) + 1);
    this.onChange(this.active, this.waitingCount);
    let held = true;
    return {
      release: () => {
        if (!held) return;
        held = false;
        this.active--;
        const n = this.activeByShare.get(share)! - 1;
        if (n > 0) this.activeByShare.set(share, n);
        else this.activeByShare.delete(share);
        this.next();
        this.onChange(this.active, this.waitingCount);
      },
    };
  }

  /**
   * Free slots go to the shares in turn: the first share in the map that is below its cap is served and moves to the
   * end (a share at its cap keeps its place).
   */
  private next(): void {
    while (this.active < this.limits.maxConcurrent && this.waitingCount > 0) {
      const served = this.firstServable();
      if (!served) return;
      const [share, queue] = served;
      const waiter = queue.shift()!;
      this.queues.delete(share);
      if (queue.length) this.queues.set(share, queue);
      this.waitingCount--;
      waiter.grant();
    }
  }

  private firstServable(): [string, Waiter[]] | undefined {
    for (const entry of this.queues) if (this.mayTake(entry[0])) return entry;
    return undefined;
  }

  private remove(waiter: Waiter): void {
    const queue = this.queues.get(waiter.share);
    const i = queue?.indexOf(waiter) ?? -1;
    if (i < 0) return;
    queue!.splice(i, 1);
    if (!queue!.length) this.queues.delete(waiter.share);
    this.waitingCount--;
    this.onChange(this.active, this.waitingCount);
  }
}

function abortReason(signal: AbortSignal): unknown {
  return signal.reason ?? new DOMException('The operation was aborted', 'AbortError');
}
