import type { Logger } from 'pino';

/**
 * Listeners told once per event-loop turn however often the signal fires in it: a fleet reconnecting, or servers
 * restarting, is one notification, not one per device or server. A listener that throws is logged; the others are
 * still told.
 */
export class TickSignal {
  private readonly listeners = new Set<() => void>();
  private scheduled = false;
  private closed = false;

  constructor(
    private readonly log: Logger,
    /** Named in the line a throwing listener writes. */
    private readonly what: string,
  ) {}

  on(fn: () => void): () => void {
    this.listeners.add(fn);
    return () => this.listeners.delete(fn);
  }

  fire(): void {
    if (this.scheduled || this.closed) return;
    this.scheduled = true;
    setImmediate(() => {
      this.scheduled = false;
      if (this.closed) return;
      for (const l of this.listeners) {
        try {
          l();
        } catch (err) {
          this.log.error({ err }, `${this.what} listener failed`);
        }
      }
    });
  }

  /** No more notifications, none pending either. */
  close(): void {
    this.closed = true;
    this.listeners.clear();
  }
}
