import { randomBytes } from 'node:crypto';
import { z } from 'zod';

/** A queued call's life: `queued → sent → succeeded | failed`, or `expired` / `cancelled` before it was sent. */
export const CALL_STATES = ['queued', 'sent', 'succeeded', 'failed', 'expired', 'cancelled'] as const;
export type CallState = (typeof CALL_STATES)[number];
export const FINISHED: ReadonlySet<CallState> = new Set(['succeeded', 'failed', 'expired', 'cancelled']);
export const isFinished = (s: CallState): boolean => FINISHED.has(s);
/**
 * Which state may follow which: a finished call never changes; `sent → queued` puts back a call the device never got;
 * `queued → failed` is a call whose send claim outlived its holder (send-claims.ts): it may have been sent.
 */
export const NEXT_CALL_STATE: Record<CallState, readonly CallState[]> = {
  queued: ['sent', 'expired', 'cancelled', 'failed'],
  sent: ['queued', 'succeeded', 'failed'],
  succeeded: [],
  failed: [],
  expired: [],
  cancelled: [],
};
const RANK: Record<CallState, number> = { queued: 0, sent: 1, succeeded: 2, failed: 2, expired: 2, cancelled: 2 };
/**
 * A write of a call that arrives after what it would undo (a shared store's watch can deliver an instance its own
 * older write late): a finished call never becomes unfinished, and a call moves back (`sent → queued`, put back)
 * only by a write made after the state it undoes.
 */
export const isStale = (c: Pick<QueuedCall, 'state' | 'updatedAt'>, held: Pick<QueuedCall, 'state' | 'updatedAt'>): boolean =>
  (isFinished(held.state) && !isFinished(c.state)) || (RANK[c.state] < RANK[held.state] && c.updatedAt <= held.updatedAt);

export const CallResultSchema = z.object({
  content: z.array(z.record(z.string(), z.unknown())),
  isError: z.boolean(),
  structuredContent: z.record(z.string(), z.unknown()).optional(),
  durationMs: z.number(),
});
export type CallResult = z.infer<typeof CallResultSchema>;

export const CallErrorSchema = z.object({ code: z.string().max(64), message: z.string().max(4096) });
export type CallError = z.infer<typeof CallErrorSchema>;

/**
 * One queued call as it is stored (collection `calls`, key = id) and served. `sentAt` (internal) says when
 * it went out: a `sent` call whose sender died is judged by it (see queued-calls.ts, `interrupted`).
 */
export const QueuedCallSchema = z.object({
  id: z.string().max(64),
  deviceId: z.string().max(64),
  tool: z.string().min(1).max(128),
  arguments: z.record(z.string(), z.unknown()),
  state: z.enum(CALL_STATES),
  createdAt: z.string(),
  updatedAt: z.string(),
  expiresAt: z.string(),
  jobId: z.string().max(64).optional(),
  /** The tenant of the API key that queued the call (absent: an operator's key, a job or a schedule). */
  tenant: z.string().max(128).optional(),
  /**
   * The API key that queued it, by its principal (a fingerprint, never the key; fleet/key-grants.ts): not sent once
   * that key is removed or moved to another tenant. Absent: no key (the operator's own paths, a job's call: the job
   * holds it), or a call stored before this was kept.
   */
  principal: z.string().max(64).optional(),
  result: CallResultSchema.optional(),
  error: CallErrorSchema.optional(),
  sentAt: z.string().optional(),
});
export type QueuedCall = z.infer<typeof QueuedCallSchema>;

/** What callers see: the stored document without the internal fields. */
export function publicCall(c: QueuedCall): Omit<QueuedCall, 'sentAt' | 'tenant' | 'principal'> {
  const { sentAt: _s, tenant: _t, principal: _p, ...rest } = c;
  return rest;
}

export const JOB_STATES = ['running', 'succeeded', 'failed', 'aborted', 'cancelled'] as const;
export type JobState = (typeof JOB_STATES)[number];

const TAG = z.string().regex(/^[A-Za-z0-9_.:-]{1,32}$/, 'a tag is 1-32 of A-Z a-z 0-9 _ . : -');
/** Which devices a job reaches: every field given must match (tags: all of them). No field: refused. */
export const JobFilterSchema = z
  .object({
    tags: z.array(TAG).min(1).max(32).optional(),
    room: z.string().min(1).max(64).optional(),
    firmware: z.string().min(1).max(64).optional(),
    board: z.string().min(1).max(64).optional(),
    // At most 10 000: the job keeps its filter in one document (a NATS KV value is at most 1 MiB).
    ids: z.array(z.string().min(1).max(64)).min(1).max(10_000).optional(),
  })
  .strict();
export type JobFilter = z.infer<typeof JobFilterSchema>;

export type CallCounts = Record<CallState, number>;
export const zeroCounts = (): CallCounts => ({ queued: 0, sent: 0, succeeded: 0, failed: 0, expired: 0, cancelled: 0 });
const CountsSchema = z.object(Object.fromEntries(CALL_STATES.map((s) => [s, z.number().int().min(0)])) as Record<CallState, z.ZodNumber>);

export const JobSchema = z.object({
  id: z.string().max(64),
  tool: z.string().min(1).max(128),
  arguments: z.record(z.string(), z.unknown()),
  filter: JobFilterSchema,
  concurrency: z.number().int().min(1),
  ratePerSecond: z.number().min(0.001).optional(),
  abortOverPercent: z.number().min(0).max(100).optional(),
  ttlMs: z.number().int().min(1),
  state: z.enum(JOB_STATES),
  createdAt: z.string(),
  updatedAt: z.string(),
  counts: CountsSchema,
  total: z.number().int().min(0),
  /** Why the job ended without running all its calls, when a code says it better than the state (KEY_REVOKED). */
  error: CallErrorSchema.optional(),
  /** (internal) The principal of the API key that started it (see QueuedCall.principal); jobs are for operator keys. */
  principal: z.string().max(64).optional(),
});
export type Job = z.infer<typeof JobSchema>;
/** A job as callers see it: without its key's principal. */
export const JobOutSchema = JobSchema.omit({ principal: true });
export function publicJob(j: Job): Omit<Job, 'principal'> {
  const { principal: _p, ...rest } = j;
  return rest;
}

let seq = 0;
/**
 * `<prefix>_<ms base36, 9><counter base36, 4><random hex, 6>`: ids of one process sort in creation order,
 * which is the order a device's calls are delivered in; the random part keeps instances apart.
 */
export function newId(prefix: 'call' | 'job', now = Date.now()): string {
  seq = (seq + 1) % 36 ** 4;
  return `${prefix}_${now.toString(36).padStart(9, '0')}${seq.toString(36).padStart(4, '0')}${randomBytes(3).toString('hex')}`;
}
