import { z } from 'zod';

/** The store collections: one document per schedule, and one claim per run fired (`<id>@<run time>`). */
export const SCHEDULES = 'schedules';
export const SCHEDULE_CLAIMS = 'schedule-claims';

const Args = z.record(z.string(), z.unknown());

/** A call a schedule starts: one tool on one device. */
export const ScheduleCall = z.object({ device: z.string(), tool: z.string(), arguments: Args.optional() });
export type ScheduleCall = z.infer<typeof ScheduleCall>;

/** A job a schedule starts: the POST /v1/jobs body, checked by the HTTP side before it is kept. */
export type ScheduleJob = Record<string, unknown>;

/** What the last run did: started a call or a job, failed to (`error`), or was skipped by the missed-run rule. */
export const ScheduleResult = z.object({
  callId: z.string().optional(),
  jobId: z.string().optional(),
  error: z.object({ code: z.string(), message: z.string() }).optional(),
  skipped: z.literal(true).optional(),
});
export type ScheduleResult = z.infer<typeof ScheduleResult>;

/** What callers see (FLEET-API.md "Schedule"). */
export interface Schedule {
  id: string;
  cron?: string;
  timeZone?: string;
  at?: string;
  call?: ScheduleCall;
  job?: ScheduleJob;
  paused: boolean;
  /** ISO time of the next run; null once a one-off has run, while paused, or when a cron never matches again. */
  nextRun: string | null;
  /** ISO time of the last run handled (fired or skipped); the run's own time, not when it was handled. */
  lastRun: string | null;
  lastResult?: ScheduleResult;
  createdAt: string;
}

/** The document in the store: the schedule, and who made it (its calls and jobs start as that caller). */
export const StoredSchedule = z.object({
  id: z.string().min(1).max(64),
  cron: z.string().optional(),
  timeZone: z.string().optional(),
  at: z.string().optional(),
  call: ScheduleCall.optional(),
  job: Args.optional(),
  paused: z.boolean(),
  nextRun: z.string().nullable(),
  lastRun: z.string().nullable(),
  lastResult: ScheduleResult.optional(),
  createdAt: z.string(),
  owner: z.object({ tenant: z.string().optional(), principal: z.string().optional() }).optional(),
});
export type StoredSchedule = z.infer<typeof StoredSchedule>;

export function viewOf(s: StoredSchedule): Schedule {
  const { owner: _owner, ...rest } = s;
  return rest as Schedule;
}

/** A run's claim: which instance handled it and when (claims older than the retention are pruned). */
export const ScheduleClaim = z.object({ by: z.string(), at: z.number() });
