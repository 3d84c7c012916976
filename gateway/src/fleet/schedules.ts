import { randomBytes } from 'node:crypto';
import { normalizeDeviceId } from '@voxgate/protocol';
import type { Logger } from 'pino';
import { GatewayError } from '../errors.js';
import type { EventBus } from '../events/bus.js';
import type { Principal } from '../principal.js';
import type { Store } from '../store/store.js';
import { KEY_REVOKED, type KeyGrants } from './key-grants.js';
import type { SchedulesConfig } from './schedules-config.js';
import {
  SCHEDULE_CLAIMS,
  SCHEDULES,
  ScheduleClaim,
  StoredSchedule,
  viewOf,
  type Schedule,
  type ScheduleCall,
  type ScheduleJob,
  type ScheduleResult,
} from './schedules-record.js';
import { parseTiming, type RunClock, type Timing } from './schedules-timing.js';

export type { Schedule, ScheduleCall, ScheduleJob, ScheduleResult } from './schedules-record.js';

/**
 * What a schedule starts, behind a port: queued calls and fleet jobs (fleet/queued-calls, fleet/jobs) in the
 * gateway; anything in tests. Each answers once the call or job has been accepted, not when it has finished.
 */
export interface ScheduleTargets {
  startCall(deviceId: string, tool: string, args: Record<string, unknown>, principal?: Principal): Promise<{ callId: string }>;
  startJob(body: ScheduleJob, principal?: Principal): Promise<{ jobId: string }>;
}

/** Time and timers, injected so tests move the clock by hand. */
export interface SchedulerClock {
  now(): number;
  setTimer(fn: () => void, ms: number): unknown;
  clearTimer(handle: unknown): void;
}

export const systemClock: SchedulerClock = {
  now: Date.now,
  setTimer: (fn, ms) => setTimeout(fn, ms).unref(),
  clearTimer: (h) => clearTimeout(h as NodeJS.Timeout),
};

export interface NewSchedule extends Timing {
  call?: ScheduleCall | undefined;
  job?: ScheduleJob | undefined;
}

export interface SchedulerOptions {
  store: Store;
  targets: ScheduleTargets;
  bus: Pick<EventBus, 'publish'>;
  log: Logger;
  config: SchedulesConfig;
  /** Names this instance in its claims (the cluster's instance id). */
  instanceId?: string | undefined;
  clock?: SchedulerClock;
  /** The API keys configured now: a schedule whose key is gone starts nothing more (key-grants.ts). */
  grants?: KeyGrants | undefined;
}

/** The timer never sleeps longer than this, so a wall clock that jumps (NTP, a suspended VM) is caught within a minute. */
const MAX_SLEEP_MS = 60_000;
/** Due runs handled at once in a tick. */
const RUNS_AT_ONCE = 8;
/** After the store failed, due runs are tried again this much later (not in a tight loop). */
const RETRY_MS = 5_000;
/** Claims are pruned at most this often (a list of the claims collection). */
const PRUNE_EVERY_MS = 10 * 60_000;
/** A schedule's call or job, as JSON: every schedule is held in memory on every instance. */
export const MAX_TARGET_BYTES = 8 * 1024;

interface Entry {
  s: StoredSchedule;
  clock: RunClock;
}

const iso = (t: number | null): string | null => (t === null ? null : new Date(t).toISOString());
const invalid = (detail: string) => new GatewayError('INVALID_REQUEST', detail);

/**
 * Cron and one-off schedules that start a call or a job (docs/fleet.md "Schedules"). Kept in the store
 * (collection `schedules`) and in memory; one timer for the earliest due schedule, not one per schedule.
 * Each run is claimed in the store (put-if-absent `<id>@<run time>`) before it fires, so with many
 * instances over a shared store exactly one fires it; the winner writes the schedule's lastRun/lastResult,
 * the others hear of it through the store's change feed.
 *
 * Missed runs (the gateway was down or stalled): the latest due run fires once if it is at most
 * `graceMs` late; earlier ones are dropped. If even the latest is older, nothing fires and lastResult is
 * `{skipped: true}`.
 */
export class Scheduler {
  private readonly entries = new Map<string, Entry>();
  private readonly clock: SchedulerClock;
  private readonly log: Logger;
  private timer: unknown;
  private ticking: Promise<void> | undefined;
  private wakeAgain = false;
  private lastPrune = Number.NEGATIVE_INFINITY;
  private retryAt = 0;
  private closed = false;
  private offChange: (() => void) | undefined;
  /** Creates past the bound check whose put has not returned: they hold a slot, or N at once all passed it. */
  private reserved = 0;

  private constructor(private readonly o: SchedulerOptions) {
    this.clock = o.clock ?? systemClock;
    this.log = o.log.child({ component: 'schedules' });
  }

  /** Load the kept schedules and arm the timer: runs missed while down are handled on the first tick. */
  static async open(o: SchedulerOptions): Promise<Scheduler> {
    const s = new Scheduler(o);
    for (const { key, value } of await o.store.list(SCHEDULES)) s.adopt(key, value);
    await s.settleRevoked();
    s.offChange = o.store.onChange?.(SCHEDULES, (c) => {
      if (c.value === undefined) s.entries.delete(c.key);
      else s.adopt(c.key, c.value);
      s.arm();
    });
    s.wake();
    return s;
  }

  /**
   * Schedules whose API key was removed (or moved to another tenant) while the gateway was down are paused now, their
   * last result saying why, rather than left showing a next run that will never start anything.
   */
  private async settleRevoked(): Promise<void> {
    for (const [id, e] of this.entries) {
      const message = e.s.paused ? undefined : this.o.grants?.revoked(e.s.owner);
      // Read again: in a cluster another instance may have written it (a run, a pause) since the list.
      const current = message === undefined ? undefined : await this.fresh(id);
      if (message === undefined || !current || current.paused) continue;
      const s = revokedSchedule(current, message);
      await this.o.store.put(SCHEDULES, id, s);
      this.entries.set(id, { s, clock: e.clock });
      this.o.grants!.note('schedule', e.s.owner ?? {}, { scheduleId: id });
    }
  }

  /** Take a document from the store (at start, or another instance's write); one that does not read is left out. */
  private adopt(key: string, value: unknown): void {
    const parsed = StoredSchedule.safeParse(value);
    if (!parsed.success || parsed.data.id !== key) return void this.log.warn({ key }, 'unreadable schedule in the store ignored');
    try {
      this.entries.set(key, { s: parsed.data, clock: parseTiming(parsed.data) });
    } catch (e) {
      // A time zone the runtime no longer knows, say: kept in the store, but it cannot run here.
      this.log.warn({ scheduleId: key, err: e }, 'schedule whose timing no longer parses ignored');
    }
  }

  get size(): number {
    return this.entries.size;
  }

  /** The caller's schedules (a tenant's key sees its tenant's only), oldest first. */
  list(tenant?: string): Schedule[] {
    return [...this.entries.values()]
      .filter((e) => visibleTo(e.s, tenant))
      .map((e) => viewOf(e.s))
      .sort((a, b) => (a.createdAt === b.createdAt ? (a.id < b.id ? -1 : 1) : a.createdAt < b.createdAt ? -1 : 1));
  }

  get(id: string, tenant?: string): Schedule {
    return viewOf(this.entry(id, tenant).s);
  }

  async create(input: NewSchedule, owner?: Principal): Promise<Schedule> {
    if (this.closed) throw new GatewayError('SHUTTING_DOWN', 'the gateway is shutting down');
    if ((input.call === undefined) === (input.job === undefined)) throw invalid('give exactly one of "call" (one tool on one device) or "job" (a fleet job)');
    const clock = parseTiming(input);
    const call = input.call && { ...input.call, device: checkedDevice(input.call.device) };
    const target = call ?? input.job;
    if (Buffer.byteLength(JSON.stringify(target)) > MAX_TARGET_BYTES)
      throw invalid(`the schedule's ${call ? 'call' : 'job'} is over ${MAX_TARGET_BYTES} bytes as JSON`);
    if (this.entries.size + this.reserved >= this.o.config.maxSchedules)
      throw invalid(`there are already ${this.o.config.maxSchedules} schedules (schedules.maxSchedules); delete some first`);
    const now = this.clock.now();
    if (clock.once !== undefined && clock.once < now - this.o.config.graceMs)
      throw invalid(`at ${input.at} is past by more than the grace window (${this.o.config.graceMs} ms): it would never run`);
    const nextRun = clock.once ?? clock.nextAfter(now);
    const s: StoredSchedule = {
      id: `sch_${randomBytes(12).toString('base64url')}`,
      ...(input.cron !== undefined ? { cron: input.cron.trim(), timeZone: input.timeZone ?? 'UTC' } : { at: input.at! }),
      ...(call ? { call } : { job: input.job! }),
      paused: false,
      nextRun: iso(nextRun),
      lastRun: null,
      createdAt: new Date(now).toISOString(),
      ...(owner && (owner.tenant !== undefined || owner.principal !== undefined) ? { owner: definedOnly(owner) } : {}),
    };
    this.reserved++;
    try {
      await this.o.store.put(SCHEDULES, s.id, s);
    } finally {
      this.reserved--;
    }
    this.entries.set(s.id, { s, clock });
    this.arm();
    this.log.info({ scheduleId: s.id, cron: s.cron, timeZone: s.timeZone, at: s.at, nextRun: s.nextRun }, 'schedule created');
    return viewOf(s);
  }

  /**
   * Pause, or resume. Paused, nothing runs and nextRun is null. A cron resumes at its next run after now
   * (what fell due while paused is not made up); a one-off not yet run resumes at its time, so one that
   * fell due while paused follows the missed-run rule.
   */
  async setPaused(id: string, paused: boolean, tenant?: string): Promise<Schedule> {
    const e = this.entry(id, tenant);
    const current = await this.fresh(id);
    if (!current) {
      // Deleted by another instance, whose news has not arrived yet.
      this.entries.delete(id);
      throw new GatewayError('NOT_FOUND', `no schedule ${id.slice(0, 64)}`);
    }
    let nextRun: string | null = null;
    if (!paused) nextRun = e.clock.once === undefined ? iso(e.clock.nextAfter(this.clock.now())) : current.lastRun === null ? iso(e.clock.once) : null;
    const s = { ...current, paused, nextRun };
    await this.o.store.put(SCHEDULES, id, s);
    if (this.entries.has(id)) this.entries.set(id, { s, clock: e.clock });
    this.arm();
    return viewOf(s);
  }

  async delete(id: string, tenant?: string): Promise<void> {
    this.entry(id, tenant);
    this.entries.delete(id);
    await this.o.store.delete(SCHEDULES, id);
    this.arm();
  }

  /** Resolves once no tick is running (tests: after they fire the timer). */
  async idle(): Promise<void> {
    while (this.ticking) await this.ticking;
  }

  async close(): Promise<void> {
    this.closed = true;
    this.offChange?.();
    if (this.timer !== undefined) this.clock.clearTimer(this.timer);
    this.timer = undefined;
    await this.idle();
  }

  private entry(id: string, tenant: string | undefined): Entry {
    const e = this.entries.get(id);
    if (!e || !visibleTo(e.s, tenant)) throw new GatewayError('NOT_FOUND', `no schedule ${id.slice(0, 64)}`);
    return e;
  }

  /** The document as the store has it now (another instance may have written since), or undefined when deleted. */
  private async fresh(id: string): Promise<StoredSchedule | undefined> {
    const parsed = StoredSchedule.safeParse(await this.o.store.get(SCHEDULES, id));
    return parsed.success ? parsed.data : undefined;
  }

  /** One timer, for the earliest schedule due (or a minute, whichever is sooner); none when nothing is due. */
  private arm(): void {
    if (this.closed) return;
    if (this.timer !== undefined) this.clock.clearTimer(this.timer);
    this.timer = undefined;
    let earliest = Number.POSITIVE_INFINITY;
    for (const { s } of this.entries.values()) if (!s.paused && s.nextRun !== null) earliest = Math.min(earliest, Date.parse(s.nextRun));
    if (earliest === Number.POSITIVE_INFINITY) return;
    const now = this.clock.now();
    const delay = Math.max(0, this.retryAt - now, Math.min(MAX_SLEEP_MS, earliest - now));
    this.timer = this.clock.setTimer(() => this.wake(), delay);
  }

  private wake(): void {
    this.timer = undefined;
    if (this.closed) return;
    if (this.ticking) {
      this.wakeAgain = true;
      return;
    }
    this.ticking = this.tick()
      .catch((err: unknown) => this.log.error({ err }, 'schedule tick failed'))
      .finally(() => {
        this.ticking = undefined;
        if (this.wakeAgain) {
          this.wakeAgain = false;
          this.wake();
        } else this.arm();
      });
  }

  private async tick(): Promise<void> {
    const now = this.clock.now();
    let failed = 0;
    let firstError: unknown;
    const due = [...this.entries].filter(([, e]) => !e.s.paused && e.s.nextRun !== null && Date.parse(e.s.nextRun) <= now);
    // A few runs at once: over NATS each is a few round trips, which need not wait for one another.
    let taken = 0;
    const worker = async () => {
      for (let next = due[taken++]; next && !this.closed; next = due[taken++]) {
        try {
          await this.runDue(next[0], next[1], now);
        } catch (err) {
          // The store failed (a NATS outage, say): the run stays due and is tried again after a pause.
          failed++;
          firstError ??= err;
        }
        // The embedded store writes synchronously (fsync included): let sockets and HTTP in between runs.
        await new Promise<void>((resolve) => setImmediate(resolve));
      }
    };
    await Promise.all(Array.from({ length: Math.min(RUNS_AT_ONCE, due.length) }, worker));
    if (this.closed) return;
    if (failed > 0) {
      this.retryAt = now + RETRY_MS;
      this.log.warn({ err: firstError, failed }, `schedule runs could not be handled (the store failed); retried in ${RETRY_MS / 1000} s`);
    }
    if (now - this.lastPrune >= PRUNE_EVERY_MS) {
      this.lastPrune = now;
      await this.prune(now).catch((err: unknown) => this.log.warn({ err }, 'pruning schedule claims failed'));
    }
  }

  private async runDue(id: string, e: Entry, now: number): Promise<void> {
    const due = Date.parse(e.s.nextRun!);
    // The latest run at or before now: the one the missed-run rule considers (earlier ones are dropped).
    const runAt = Math.max(due, e.clock.latestAtOrBefore(now) ?? due);
    const fire = now - runAt <= this.o.config.graceMs;
    const next = e.s.cron !== undefined ? iso(e.clock.nextAfter(now)) : null;
    const claimed = await this.claim(`${id}@${new Date(runAt).toISOString()}`, now);
    const current = claimed ? await this.fresh(id) : undefined;
    // Lost the claim (another instance handled this run), deleted, paused, or already run: only move on here.
    if (!current || current.paused || (current.lastRun !== null && Date.parse(current.lastRun) >= runAt)) {
      const live = this.entries.get(id);
      if (live && live.s === e.s) this.entries.set(id, { s: current ?? { ...e.s, nextRun: next }, clock: e.clock });
      if (claimed && !current) this.entries.delete(id);
      return;
    }
    const revoked = this.o.grants?.revoked(current.owner);
    if (revoked !== undefined) this.o.grants!.note('schedule', current.owner ?? {}, { scheduleId: id, run: iso(runAt) });
    const lastResult: ScheduleResult = revoked !== undefined ? revokedResult(revoked) : fire ? await this.start(current) : { skipped: true };
    const s: StoredSchedule =
      revoked !== undefined ? { ...revokedSchedule(current, revoked), lastRun: iso(runAt) } : { ...current, lastRun: iso(runAt), lastResult, nextRun: next };
    // Deleted while its call was being started: the call stands, the schedule is not written back.
    if (!this.entries.has(id)) return;
    await this.o.store.put(SCHEDULES, id, s);
    this.entries.set(id, { s, clock: e.clock });
    if (fire || revoked !== undefined) this.o.bus.publish('schedule.fired', current.call?.device ?? '', { scheduleId: id, run: iso(runAt), ...lastResult });
    else this.log.warn({ scheduleId: id, run: iso(runAt), lateMs: now - runAt }, 'schedule run missed by more than the grace window: skipped');
  }

  /** Put-if-absent in the store; a store without it (tests' doubles) gets read-then-write, enough for one instance. */
  private async claim(key: string, now: number): Promise<boolean> {
    const value = { by: this.o.instanceId ?? 'local', at: now };
    if (this.o.store.create) return this.o.store.create(SCHEDULE_CLAIMS, key, value);
    if ((await this.o.store.get(SCHEDULE_CLAIMS, key)) !== undefined) return false;
    await this.o.store.put(SCHEDULE_CLAIMS, key, value);
    return true;
  }

  /** Start the schedule's call or job; a refusal is the run's result, never thrown. */
  private async start(s: StoredSchedule): Promise<ScheduleResult> {
    try {
      if (s.call) return { callId: (await this.o.targets.startCall(s.call.device, s.call.tool, s.call.arguments ?? {}, s.owner)).callId };
      return { jobId: (await this.o.targets.startJob(s.job ?? {}, s.owner)).jobId };
    } catch (err) {
      const code = err instanceof GatewayError ? err.code : 'INTERNAL';
      if (code === 'INTERNAL') this.log.error({ err, scheduleId: s.id }, 'schedule could not start its call or job');
      return { error: { code, message: (err instanceof Error ? err.message : String(err)).slice(0, 1000) } };
    }
  }

  /** Claims older than the retention (at least the grace window plus a margin) go. */
  private async prune(now: number): Promise<void> {
    const keep = Math.max(this.o.config.claimRetentionMs, this.o.config.graceMs + PRUNE_EVERY_MS);
    for (const { key, value } of await this.o.store.list(SCHEDULE_CLAIMS)) {
      const c = ScheduleClaim.safeParse(value);
      if (!c.success || now - c.data.at > keep) await this.o.store.delete(SCHEDULE_CLAIMS, key);
    }
  }
}

const revokedResult = (message: string): ScheduleResult => ({ error: { code: KEY_REVOKED, message } });

/** Paused, with why: not deleted, so an operator can read it (resuming it is no way round: each run checks again). */
function revokedSchedule(s: StoredSchedule, message: string): StoredSchedule {
  return { ...s, paused: true, nextRun: null, lastResult: revokedResult(message) };
}

function visibleTo(s: StoredSchedule, tenant: string | undefined): boolean {
  return tenant === undefined || s.owner?.tenant === tenant;
}

function checkedDevice(raw: string): string {
  const id = normalizeDeviceId(raw);
  if (!id) throw invalid(`call.device "${raw.slice(0, 64)}" is not a device id; use a MAC such as aa:bb:cc:dd:ee:ff`);
  return id;
}

function definedOnly(p: Principal): { tenant?: string; principal?: string } {
  return { ...(p.tenant !== undefined ? { tenant: p.tenant } : {}), ...(p.principal !== undefined ? { principal: p.principal } : {}) };
}
