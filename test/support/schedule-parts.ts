/**
 * Parts for tests of the scheduler (fleet/schedules.ts) and its routes: a clock moved by hand, and targets
 * that record what schedules start.
 */
import { GatewayError } from '../../gateway/src/errors.js';
import type { Scheduler, SchedulerClock, ScheduleTargets } from '../../gateway/src/fleet/schedules.js';

/** Time that moves only when the test says; timers fire when their time has come. */
export class FakeClock implements SchedulerClock {
  private readonly timers = new Set<{ fn: () => void; at: number }>();
  constructor(public t: number) {}
  now = () => this.t;
  setTimer = (fn: () => void, ms: number) => {
    const h = { fn, at: this.t + ms };
    this.timers.add(h);
    return h;
  };
  clearTimer = (h: unknown) => void this.timers.delete(h as { fn: () => void; at: number });
  get pending(): number {
    return this.timers.size;
  }
  get nextAt(): number | undefined {
    return Math.min(...[...this.timers].map((h) => h.at));
  }
  /** Move to `t` (ISO or ms) and run every timer due on the way, letting each tick finish. */
  async moveTo(t: string | number, s: Scheduler): Promise<void> {
    const target = typeof t === 'string' ? Date.parse(t) : t;
    for (let guard = 0; guard < 10_000; guard++) {
      const due = [...this.timers].filter((h) => h.at <= target).sort((a, b) => a.at - b.at)[0];
      if (!due) break;
      this.timers.delete(due);
      this.t = Math.max(this.t, due.at);
      due.fn();
      await s.idle();
    }
    this.t = target;
    await s.idle();
  }
}

/** Records what schedules start; a device listed in `offline` refuses the call. */
export class Targets implements ScheduleTargets {
  calls: Array<{ deviceId: string; tool: string; args: Record<string, unknown>; tenant?: string | undefined }> = [];
  jobs: Array<Record<string, unknown>> = [];
  offline = new Set<string>();
  async startCall(deviceId: string, tool: string, args: Record<string, unknown>, principal?: { tenant?: string | undefined }) {
    if (this.offline.has(deviceId)) throw new GatewayError('DEVICE_OFFLINE', `device ${deviceId} is offline`);
    this.calls.push({ deviceId, tool, args, tenant: principal?.tenant });
    return { callId: `call-${this.calls.length}` };
  }
  async startJob(body: Record<string, unknown>) {
    this.jobs.push(body);
    return { jobId: `job-${this.jobs.length}` };
  }
}
