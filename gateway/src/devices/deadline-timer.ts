/**
 * One timer for all of an owner's deadlines (a session's pending requests, or its queued calls). It is armed for
 * the earliest deadline and left running when what it was armed for settles first; when it fires, the owner
 * expires what is due and names its next deadline, if any. So a call costs a comparison here, where a timer per
 * call cost a `setTimeout` and a `clearTimeout`, each with a duration of its own: Node makes and drops a timer
 * list (and a priority-queue entry) per distinct duration, ~2 % of the gateway's busy time on one device
 * (docs/performance.md, `callc1`).
 */
/** What a deadline timer serves: `expireDue(now)` settles whatever is due at `now` and returns the earliest
 * deadline still pending, or Infinity. A method of the owner rather than a closure: one less object per device. */
export interface DeadlineOwner {
  expireDue(now: number): number;
}

export class DeadlineTimer {
  private timer: NodeJS.Timeout | undefined;
  /** When the armed timer fires (on the owner's clock); Infinity when none is armed. */
  private at = Infinity;

  /**
   * `clock`: the owner's deadlines' clock, in ms (Date.now, or performance.now where a wall-clock step must not
   * move a timeout).
   */
  constructor(
    private readonly owner: DeadlineOwner,
    private readonly clock: () => number = Date.now,
  ) {}

  /** Fire no later than `deadline` (on the owner's clock). */
  arm(deadline: number): void {
    if (deadline >= this.at) return;
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.at = deadline;
    // Unref'd: what is pending holds its own link open; the timer must not hold the process after it settled.
    this.timer = setTimeout(DeadlineTimer.fire, Math.max(1, deadline - this.clock()), this).unref();
  }

  /** Nothing is pending any more for good (the owner closed). */
  stop(): void {
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.timer = undefined;
    this.at = Infinity;
  }

  private static fire(t: DeadlineTimer): void {
    t.timer = undefined;
    t.at = Infinity;
    const next = t.owner.expireDue(t.clock());
    // A timer may fire a little before the wall clock reaches its deadline: what is not yet due gets its own.
    if (next !== Infinity) t.arm(next);
  }
}
