import { z } from 'zod';
import { SchedulesSlice } from './schedules-config.js';
import { documented, env, Ms } from '../config/fields.js';

const DAY_MS = 86_400_000;

/** Bytes the queued calls hold (in memory, and read whole at start): from 1 KiB to 16 GiB. */
const StoreBytes = z.coerce
  .number()
  .int()
  .min(1024)
  .max(16 * 1024 * 1024 * 1024);

/** Queued calls and fleet jobs (docs/fleet.md): how many wait, for how long, and how long finished ones are kept. */
export const FleetSlice = z.strictObject({
  /** Calls waiting or running per device; one more is 429 QUEUE_FULL. */
  maxQueuedPerDevice: env(
    'GATEWAY_FLEET_MAX_QUEUED_PER_DEVICE',
    z.coerce.number().int().min(1).max(10_000).default(100),
    'queued calls per device (waiting or sent); beyond, 429',
  ),
  maxQueuedTotal: env('GATEWAY_FLEET_MAX_QUEUED_TOTAL', z.coerce.number().int().min(1).max(10_000_000).default(100_000), '… and in total'),
  /** Unfinished calls queued by the keys of one tenant: one tenant cannot fill the total that every tenant shares. */
  maxQueuedPerTenant: documented(
    z.coerce.number().int().min(1).max(10_000_000).default(25_000),
    "… and by one tenant's keys (the total is shared by every tenant and the operators)",
  ),
  /**
   * Bytes of JSON arguments the unfinished calls hold in all (each is at most maxArgumentsBytes), and those queued by one
   * tenant's keys: every call is held in memory and read whole at start, and the counts alone allowed 100 000 × 16 KiB.
   */
  maxQueuedBytes: documented(StoreBytes.default(64 * 1024 * 1024), 'bytes of JSON arguments the unfinished queued calls hold in all; beyond, 429'),
  maxQueuedBytesPerTenant: documented(StoreBytes.optional(), "… and those queued by one tenant's keys", 'a quarter of `maxQueuedBytes`'),
  /** A queued call not delivered within its ttlMs is `expired`; this is the ttlMs when the caller gives none. */
  defaultTtlMs: env('GATEWAY_FLEET_DEFAULT_TTL_MS', Ms(DAY_MS, 30 * DAY_MS), 'how long a queued call waits for its device when the caller gives no `ttlMs`'),
  maxTtlMs: documented(Ms(7 * DAY_MS, 30 * DAY_MS), "cap on a caller's `ttlMs`"),
  /** Finished calls kept for GET: past either bound the oldest go. */
  keepFinished: env(
    'GATEWAY_FLEET_KEEP_FINISHED',
    z.coerce.number().int().min(0).max(10_000_000).default(10_000),
    'finished calls kept (oldest forgotten first)',
  ),
  keepFinishedMs: documented(Ms(7 * DAY_MS, 365 * DAY_MS), '… and for at most this long'),
  /** Bytes of arguments and results the finished calls kept hold in all: past it the oldest are forgotten. */
  keepFinishedBytes: documented(StoreBytes.default(64 * 1024 * 1024), '… and their JSON arguments and results in bytes'),
  /** Finished jobs kept (their counts; their calls follow the calls' own bounds). */
  keepJobs: documented(z.coerce.number().int().min(0).max(100_000).default(1000), 'finished jobs kept (oldest forgotten first)'),
  /** Jobs running at once; one more is 429. */
  maxRunningJobs: documented(z.coerce.number().int().min(1).max(10_000).default(100), 'jobs running at once'),
  /** A job's `abortOverPercent` is judged once this many of its calls have finished (or all of them, when fewer). */
  abortMinFinished: documented(z.coerce.number().int().min(1).max(100_000).default(10), "finished calls before a job's `abortOverPercent` is judged"),
  /** Bytes of a call's JSON arguments; and of a result kept (a larger one is kept as a note of its size). */
  maxArgumentsBytes: documented(
    z.coerce
      .number()
      .int()
      .min(2)
      .max(1024 * 1024)
      .default(16 * 1024),
    "bytes of a queued call's JSON arguments",
  ),
  maxResultBytes: documented(
    z.coerce
      .number()
      .int()
      .min(256)
      .max(1024 * 1024)
      .default(16 * 1024),
    'bytes of a result kept with a finished call (larger: replaced by its size)',
  ),
  /** How often expiry, interrupted deliveries and retention are swept. */
  sweepIntervalMs: documented(Ms(5_000, 600_000), 'how often expired calls and retention are swept'),
  /** `job.progress` events per job at most this often (plus one when it ends). */
  progressIntervalMs: documented(Ms(250, 60_000), '`job.progress` events at most this often per job (plus one at the end)'),
  /** Cron and one-off schedules (fleet/schedules.ts). */
  schedules: SchedulesSlice.prefault({}),
});
export type FleetConfig = z.infer<typeof FleetSlice>;
