import { z } from 'zod';
import { documented, Ms } from '../config/fields.js';

/** Schedules (docs/fleet.md "Schedules"): their bound, the missed-run rule's grace window, how long run claims are kept. */
export const SchedulesSlice = z.strictObject({
  /** Beyond it, POST /v1/schedules answers 400: every schedule is held in memory on every instance. */
  maxSchedules: documented(z.coerce.number().int().min(1).max(100_000).default(10_000), 'schedules kept at most'),
  /** A run missed by at most this long (the gateway was down, or busy) still fires, once; older runs are skipped. */
  graceMs: documented(Ms(300_000, 86_400_000), 'a run missed by at most this long still fires once at start; older ones are skipped'),
  /** A fired run's claim (`<id>@<run time>`) is kept this long so no other instance fires it again; then pruned. */
  claimRetentionMs: documented(Ms(3_600_000, 7 * 86_400_000), 'how long the record that an instance fired a run is kept'),
});
export type SchedulesConfig = z.infer<typeof SchedulesSlice>;
