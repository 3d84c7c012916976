/** How many run at once, how many may wait (in all, and per share), and for how long. */
export interface GateLimits {
  maxConcurrent: number;
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
 * many the flooding tenant has queued. Slots in flight are not split by share: an idle gateway lets one tenant use
 * them all, and every slot it frees is offered to the others first.
 *
 * A waiter whose signal aborts leaves the queue at once and never takes a slot; a waiter that was granted a slot
 * after its signal aborted (both in one tick) hands the slot straight back.
 */
export class FairGate {
  private active = 0;
  private waitingCount = 0;
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
    if (this.active < this.limits.maxConcurrent && this.waitingCount === 0) return Promise.resolve(this.take());
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
          const slot = this.take();
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

  private take(): GateSlot {
    this.active++;
    this.onChange(this.active, this.waitingCount);
    let held = true;
    return {
      release: () => {
        if (!held) return;
        held = false;
        this.active--;
        this.next();
        this.onChange(this.active, this.waitingCount);
      },
    };
  }

  /** Free slots go to the shares in turn: the first share in the map is served and moves to the end. */
  private next(): void {
    while (this.active < this.limits.maxConcurrent && this.waitingCount > 0) {
      const [share, queue] = this.queues.entries().next().value as [string, Waiter[]];
      const waiter = queue.shift()!;
      this.queues.delete(share);
      if (queue.length) this.queues.set(share, queue);
      this.waitingCount--;
      waiter.grant();
    }
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
