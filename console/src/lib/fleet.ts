/**
 * The fleet forms' input turned into request bodies (FLEET-API.md), checked before they are sent so a
 * person sees what is wrong next to the field. The gateway checks everything again. No DOM: unit-tested in Node.
 */
import type { JobBody, JobCounts, JobFilter, ScheduleBody } from './fleet-types.js';

export type Checked<T> = { ok: true; value: T } | { ok: false; message: string };

const TAG = /^[A-Za-z0-9_.:-]{1,32}$/;
const MAX_TAGS = 32;

/** "kitchen, speaker" → ["kitchen", "speaker"]: comma or space separated, each once, the contract's alphabet. */
export function parseTags(text: string): Checked<string[]> {
  const tags = [...new Set(text.split(/[\s,]+/).filter(Boolean))];
  const bad = tags.find((t) => !TAG.test(t));
  if (bad !== undefined) return { ok: false, message: `tag "${bad.slice(0, 40)}": 1-32 letters, digits, _ . : -` };
  if (tags.length > MAX_TAGS) return { ok: false, message: `at most ${MAX_TAGS} tags` };
  return { ok: true, value: tags };
}

/** A device's name/room/tags form to a PATCH body: empty text clears (null). */
export function metaPatch(form: { name: string; room: string; tags: string }): Checked<{ name: string | null; room: string | null; tags: string[] }> {
  const name = form.name.trim();
  const room = form.room.trim();
  if (name.length > 64) return { ok: false, message: 'name: at most 64 characters' };
  if (room.length > 64) return { ok: false, message: 'room: at most 64 characters' };
  const tags = parseTags(form.tags);
  if (!tags.ok) return tags;
  return { ok: true, value: { name: name || null, room: room || null, tags: tags.value } };
}

/** A JSON object typed in a text area (empty: no arguments). */
export function parseArgs(text: string): Checked<Record<string, unknown>> {
  if (!text.trim()) return { ok: true, value: {} };
  try {
    const v = JSON.parse(text) as unknown;
    if (typeof v === 'object' && v !== null && !Array.isArray(v)) return { ok: true, value: v as Record<string, unknown> };
    return { ok: false, message: 'arguments: a JSON object, like {"volume": 40}' };
  } catch {
    return { ok: false, message: 'arguments: not valid JSON' };
  }
}

export interface JobForm {
  tool: string;
  arguments: string;
  tags: string;
  room: string;
  firmware: string;
  board: string;
  ids: string;
  concurrency: string;
  ratePerSecond: string;
  abortOverPercent: string;
  ttlSeconds: string;
}
export const EMPTY_JOB_FORM: JobForm = {
  tool: '',
  arguments: '',
  tags: '',
  room: '',
  firmware: '',
  board: '',
  ids: '',
  concurrency: '10',
  ratePerSecond: '',
  abortOverPercent: '',
  ttlSeconds: '',
};

/** A number field: empty is "not given"; else above 0 (or from 0 with `zero`), at most `max`. */
function positive(text: string, name: string, o: { integer?: boolean; max?: number; zero?: boolean } = {}): Checked<number | undefined> {
  if (!text.trim()) return { ok: true, value: undefined };
  const n = Number(text);
  if (!Number.isFinite(n) || n < 0 || (n === 0 && !o.zero) || (o.integer && !Number.isInteger(n)) || (o.max !== undefined && n > o.max))
    return {
      ok: false,
      message: `${name}: ${o.integer ? 'a whole number' : 'a number'} ${o.zero ? 'from 0' : 'above 0'}${o.max !== undefined ? ` and at most ${o.max}` : ''}`,
    };
  return { ok: true, value: n };
}

/** The job form to a POST /v1/jobs body. A filter that selects nothing named is refused: it would mean every device. */
export function jobBody(f: JobForm): Checked<JobBody> {
  const tool = f.tool.trim();
  if (!tool) return { ok: false, message: 'tool: required (the device tool to run, e.g. self.audio_speaker.set_volume)' };
  const args = parseArgs(f.arguments);
  if (!args.ok) return args;
  const filter: JobFilter = {};
  const tags = parseTags(f.tags);
  if (!tags.ok) return tags;
  if (tags.value.length) filter.tags = tags.value;
  for (const k of ['room', 'firmware', 'board'] as const) if (f[k].trim()) filter[k] = f[k].trim();
  const ids = f.ids.split(/[\s,]+/).filter(Boolean);
  if (ids.length) filter.ids = [...new Set(ids)];
  if (Object.keys(filter).length === 0) return { ok: false, message: 'filter: name at least one of tags, room, firmware, board or device ids' };
  const body: JobBody = { tool, filter };
  if (Object.keys(args.value).length) body.arguments = args.value;
  const checks: Array<[keyof JobBody, Checked<number | undefined>]> = [
    ['concurrency', positive(f.concurrency, 'concurrency', { integer: true, max: 10_000 })],
    ['ratePerSecond', positive(f.ratePerSecond, 'rate per second', { max: 10_000 })],
    ['abortOverPercent', positive(f.abortOverPercent, 'abort over %', { max: 100, zero: true })],
    ['ttlMs', positive(f.ttlSeconds, 'time to live', { max: 30 * 86_400 })],
  ];
  for (const [k, c] of checks) {
    if (!c.ok) return c;
    if (c.value !== undefined) (body as unknown as Record<string, number>)[k] = k === 'ttlMs' ? Math.round(c.value * 1000) : c.value;
  }
  return { ok: true, value: body };
}

export interface ScheduleForm {
  when: 'cron' | 'at';
  cron: string;
  timeZone: string;
  /** A datetime-local value (the browser's local time) or an ISO 8601 string. */
  at: string;
  target: 'call' | 'job';
  device: string;
  tool: string;
  arguments: string;
  job: JobForm;
}

/** The schedule form to a POST /v1/schedules body: exactly one of cron/at, exactly one of call/job. */
export function scheduleBody(f: ScheduleForm): Checked<ScheduleBody> {
  const body: ScheduleBody = {};
  if (f.when === 'cron') {
    const cron = f.cron.trim().replace(/\s+/g, ' ');
    if (!cron) return { ok: false, message: 'cron: required, e.g. "0 7 * * 1-5" (07:00 on weekdays)' };
    if (cron.split(' ').length < 5 || cron.split(' ').length > 6)
      return { ok: false, message: 'cron: five fields (minute hour day month weekday), or six with seconds' };
    body.cron = cron;
    if (f.timeZone.trim()) body.timeZone = f.timeZone.trim();
  } else {
    const t = Date.parse(f.at);
    if (!f.at.trim() || !Number.isFinite(t)) return { ok: false, message: 'at: a date and time' };
    body.at = new Date(t).toISOString();
  }
  if (f.target === 'call') {
    const device = f.device.trim();
    const tool = f.tool.trim();
    if (!device || !tool) return { ok: false, message: 'call: a device id and a tool' };
    const args = parseArgs(f.arguments);
    if (!args.ok) return args;
    body.call = { device, tool, ...(Object.keys(args.value).length ? { arguments: args.value } : {}) };
  } else {
    const job = jobBody(f.job);
    if (!job.ok) return job;
    body.job = job.value;
  }
  return { ok: true, value: body };
}

/** Finished / total, for a job's progress bar. */
export function jobProgress(counts: JobCounts, total: number): { done: number; percent: number } {
  const done = counts.succeeded + counts.failed + counts.expired + counts.cancelled;
  return { done, percent: total > 0 ? Math.min(100, Math.round((done / total) * 100)) : 0 };
}

/** The browser's own time zone, the default for a new schedule. */
export function localTimeZone(): string {
  try {
    return Intl.DateTimeFormat().resolvedOptions().timeZone;
  } catch {
    return 'UTC';
  }
}
