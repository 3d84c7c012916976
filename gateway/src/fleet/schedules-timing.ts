import { Cron } from 'croner';
import { LRUCache } from 'lru-cache';
import { GatewayError } from '../errors.js';

/** When a schedule runs: a cron expression in a time zone, or one time (`at`). */
export interface Timing {
  cron?: string | undefined;
  timeZone?: string | undefined;
  at?: string | undefined;
}

/** What the rest of the scheduler asks of a timing, once it has been checked. */
export interface RunClock {
  /** The first run strictly after `after`, or null when there is none (a one-off, or a cron that never matches again). */
  nextAfter(after: number): number | null;
  /** The latest run at or before `t`, for a cron (the missed-run rule fires that one); a one-off's own time. */
  latestAtOrBefore(t: number): number | null;
  /** A one-off's time; undefined for a cron. */
  once?: number;
}

export const MAX_CRON_LENGTH = 128;

/**
 * Parsed crons by time zone and expression. A croner Cron holds ~80 KB (a table of every year) and takes
 * a fraction of a millisecond to build: schedules keep only their text and share the few parsed ones.
 */
const parsed = new LRUCache<string, Cron>({ max: 64 });

const invalid = (detail: string) => new GatewayError('INVALID_REQUEST', detail);

/**
 * A schedule's timing checked, or a 400 naming what is wrong. Crons have five fields (minute hour
 * day-of-month month day-of-week, or a nickname such as @daily): a seconds field is refused, so no schedule
 * runs more than once a minute. `timeZone` is an IANA name (default UTC) and goes with `cron` only; `at` is
 * ISO 8601 with its offset (`Z` or `±hh:mm`), so it names one instant without a zone.
 */
export function parseTiming(t: Timing): RunClock {
  if ((t.cron === undefined) === (t.at === undefined)) throw invalid('give exactly one of "cron" (repeating) or "at" (once)');
  if (t.at !== undefined) {
    if (t.timeZone !== undefined) throw invalid('"timeZone" goes with "cron"; give "at" with its offset instead (e.g. 2027-01-23T08:00:00+01:00)');
    const at = parseInstant(t.at);
    return { once: at, nextAfter: (after) => (at > after ? at : null), latestAtOrBefore: (x) => (at <= x ? at : null) };
  }
  const timeZone = t.timeZone ?? 'UTC';
  checkTimeZone(timeZone);
  const expr = t.cron!;
  if (cronOf(expr, timeZone).nextRun() === null) throw invalid(`cron "${expr}" never runs (no date matches it)`);
  return {
    nextAfter: (after) => cronOf(expr, timeZone).nextRun(new Date(after))?.getTime() ?? null,
    // previousRuns leaves out a run exactly at its reference: one millisecond later takes it in.
    latestAtOrBefore: (x) =>
      cronOf(expr, timeZone)
        .previousRuns(1, new Date(x + 1))[0]
        ?.getTime() ?? null,
  };
}

function cronOf(expr: string, timeZone: string): Cron {
  const key = `${timeZone}\u0000${expr}`;
  let cron = parsed.get(key);
  if (!cron) parsed.set(key, (cron = parseCron(expr, timeZone)));
  return cron;
}

function parseCron(expr: string, timeZone: string): Cron {
  if (expr.length > MAX_CRON_LENGTH) throw invalid(`cron is longer than ${MAX_CRON_LENGTH} characters`);
  try {
    // No callback: croner only computes dates here, it starts no timer.
    return new Cron(expr.trim(), { timezone: timeZone, mode: '5-part' });
  } catch (e) {
    const why = e instanceof Error ? e.message.replace(/^CronPattern: /, '') : String(e);
    throw invalid(`cron "${expr}" is not a five-field cron expression (minute hour day-of-month month day-of-week): ${why}`);
  }
}

function checkTimeZone(timeZone: string): void {
  if (timeZone.length > 64) throw invalid('timeZone is longer than 64 characters');
  try {
    new Intl.DateTimeFormat('en-US', { timeZone });
  } catch {
    throw invalid(`timeZone "${timeZone}" is not an IANA time zone (e.g. Europe/Paris, America/New_York, UTC)`);
  }
}

const ISO_INSTANT = /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2})(?::(\d{2})(?:\.\d{1,9})?)?(Z|([+-])(\d{2}):(\d{2}))$/i;

/** ISO 8601 with an offset, as epoch ms; a date that does not exist (Feb 30, 24:00) is refused, not rolled over. */
function parseInstant(s: string): number {
  const m = ISO_INSTANT.exec(s);
  const ms = m ? Date.parse(s) : NaN;
  if (!m || Number.isNaN(ms))
    throw invalid(`at "${s.slice(0, 64)}" is not an ISO 8601 time with an offset, e.g. 2027-01-23T08:00:00Z or 2027-01-23T09:00:00+01:00`);
  const offsetMin = m[7]!.toUpperCase() === 'Z' ? 0 : (m[8] === '-' ? -1 : 1) * (Number(m[9]) * 60 + Number(m[10]));
  const local = new Date(ms + offsetMin * 60_000);
  const same =
    local.getUTCFullYear() === Number(m[1]) &&
    local.getUTCMonth() + 1 === Number(m[2]) &&
    local.getUTCDate() === Number(m[3]) &&
    local.getUTCHours() === Number(m[4]) &&
    local.getUTCMinutes() === Number(m[5]);
  if (!same) throw invalid(`at "${s}" names a date or time that does not exist`);
  return ms;
}
