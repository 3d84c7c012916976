/**
 * When the store copies its WAL back into the database (a checkpoint): once writes have stopped, not in the middle of
 * them. A checkpoint blocks the event loop (every page changed since the last one written again, two fsyncs: ~85 ms
 * for 4 000 pages here), and SQLite's own runs inside whichever commit crosses its threshold: while a fleet dials in
 * or comes back from an outage, the moment every device waits on the gateway. Ticked at a fixed interval with the
 * connection's count of changed rows (`total_changes()`): a tick that sees the count move means writes in that
 * interval; the first tick after it that sees none checkpoints. SQLite's own checkpoint stays as the backstop for a
 * store that is never quiet (sqlite-store.ts WAL_CHECKPOINT_PAGES).
 */
export class QuietCheckpoint {
  /** Changes not yet checkpointed. */
  private pending = false;

  constructor(private changes: number) {}

  /** True when the store should checkpoint now: something was written, and nothing since the last tick. */
  tick(changes: number): boolean {
    if (changes !== this.changes) {
      this.changes = changes;
      this.pending = true;
      return false;
    }
    const due = this.pending;
    this.pending = false;
    return due;
  }
}
