import type { Store } from '../store/store.js';

interface Pending {
  value: unknown;
  waiters: Array<{ resolve: () => void; reject: (e: unknown) => void }>;
}

/**
 * Writes to one collection, gathered: every put made in the same turn of the event loop goes out as one
 * `Store.putMany` (one SQLite transaction, one sync to disk, instead of ~9 ms of blocking sync per put), and each put's promise resolves once its document is
 * stored. The last value of a key wins. One batch is written at a time, so writes of a key stay in order.
 */
export class StoreWriter {
  private pending = new Map<string, Pending>();
  private running: Promise<void> | undefined;
  private scheduled = false;

  constructor(
    private readonly store: Store,
    private readonly collection: string,
  ) {}

  put(key: string, value: unknown): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      const p = this.pending.get(key);
      if (p) {
        p.value = value;
        p.waiters.push({ resolve, reject });
      } else this.pending.set(key, { value, waiters: [{ resolve, reject }] });
      this.schedule();
    });
  }

  /** Resolves once everything put so far is written (or failed). */
  async flushed(): Promise<void> {
    while (this.running || this.pending.size > 0 || this.scheduled) await (this.running ?? new Promise((r) => setImmediate(r)));
  }

  private schedule(): void {
    if (this.scheduled || this.running) return;
    this.scheduled = true;
    setImmediate(() => {
      this.scheduled = false;
      this.running = this.writeBatch().finally(() => {
        this.running = undefined;
        if (this.pending.size > 0) this.schedule();
      });
    });
  }

  private async writeBatch(): Promise<void> {
    const batch = this.pending;
    this.pending = new Map();
    const entries = [...batch].map(([key, p]) => ({ key, value: p.value }));
    try {
      await this.store.putMany(this.collection, entries);
      for (const p of batch.values()) for (const w of p.waiters) w.resolve();
    } catch (e) {
      for (const p of batch.values()) for (const w of p.waiters) w.reject(e);
    }
  }
}
