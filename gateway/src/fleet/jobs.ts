import type { Logger } from 'pino';
import { z } from 'zod';
import { upperBound } from '../devices/sorted-ids.js';
import { GatewayError } from '../errors.js';
import type { EventBus } from '../events/bus.js';
import type { Store } from '../store/store.js';
import type { DeliveryGate } from './call-delivery.js';
import type { FleetConfig } from './config.js';
import { KEY_REVOKED, type KeyGrants } from './key-grants.js';
import type { DeviceSelector } from './ports.js';
import type { QueuedCalls } from './queued-calls.js';
import { JobSchema, newId, zeroCounts, type CallError, type CallState, type Job, type JobFilter, type JobState, type QueuedCall } from './types.js';

/** The store collection of jobs, one document per job (key = job id). */
export const JOBS_COLLECTION = 'jobs';
/** With a shared store: put-if-absent claims (key = job id) so exactly one instance ends each job. */
export const JOB_ENDS_COLLECTION = 'job-ends';

export interface NewJob {
  tool: string;
  arguments: Record<string, unknown>;
  filter: JobFilter;
  concurrency: number;
  ratePerSecond?: number | undefined;
  abortOverPercent?: number | undefined;
  ttlMs?: number | undefined;
  /** The principal of the API key that starts it: it runs only while that key is configured as an operator's (key-grants.ts). */
  principal?: string | undefined;
}

export interface JobsDeps {
  store: Store;
  bus: Pick<EventBus, 'publish'>;
  log: Logger;
  calls: QueuedCalls;
  selector: DeviceSelector;
  settings: Pick<FleetConfig, 'keepJobs' | 'maxRunningJobs' | 'abortMinFinished' | 'progressIntervalMs' | 'defaultTtlMs' | 'maxTtlMs'>;
  now?: () => number;
  /** Other instances share the store: every instance judges on every change, and a claim decides who ends a job. */
  shared?: boolean;
  /** The API keys configured now: a job whose key is gone sends no more calls (key-grants.ts). */
  grants?: KeyGrants | undefined;
}

const JobStateOf = z.object({ state: z.enum(['succeeded', 'failed', 'aborted', 'cancelled']) });

/** What a running job needs besides its document: its rollout state. */
interface Rollout {
  /** Calls admitted but not yet `sent` (so two devices draining at once cannot both take the last place). */
  reserved: number;
  /** When the next call may start (ratePerSecond). */
  nextAt: number;
  /** Devices whose next call waits for a place in this job's rollout. */
  waiting: Set<string>;
  timer: NodeJS.Timeout | undefined;
}

/**
 * Fleet jobs: one tool with its arguments on every device a filter selects, as one queued call per device
 * (offline devices included: their calls wait like any other). The rollout is this class as the delivery's
 * gate: at most `concurrency` calls of a job sent at once, at most `ratePerSecond` started, and the job is
 * aborted (its queued calls cancelled) when more than `abortOverPercent` of its judged calls failed.
 *
 * Counts follow every call change, this instance's and (shared store) the others'; `job.progress` events are
 * told by the instance whose change caused them. With a shared store every instance judges on every change
 * (the last two calls may finish on two instances, each before it hears of the other's), and the one whose
 * put-if-absent claim wins ends the job (or aborts it).
 */
export class Jobs implements DeliveryGate {
  private readonly jobs = new Map<string, Job>();
  /** Per job: its call ids, sorted. */
  private readonly callsOf = new Map<string, string[]>();
  private readonly rollouts = new Map<string, Rollout>();
  /** Jobs whose calls are being queued: not judged until all are. */
  private readonly creating = new Set<string>();
  private readonly lastProgress = new Map<string, number>();
  private readonly progressTimers = new Map<string, NodeJS.Timeout>();
  private offCalls: (() => void) | undefined;
  private kickDevice: (deviceId: string) => void = () => undefined;
  private readonly now: () => number;

  constructor(private readonly d: JobsDeps) {
    this.now = d.now ?? Date.now;
  }

  /** The delivery this gate releases devices to (set once both exist). */
  useDelivery(kick: (deviceId: string) => void): void {
    this.kickDevice = kick;
  }

  /** Whether the retention of finished calls must keep this one (its job still runs: its counts need it). */
  retains(c: QueuedCall): boolean {
    return c.jobId !== undefined && this.jobs.get(c.jobId)?.state === 'running';
  }

  /** Read the jobs from the store; call after the calls are loaded, before delivery starts. */
  async load(): Promise<void> {
    let skipped = 0;
    for (const { key, value } of await this.d.store.list(JOBS_COLLECTION)) {
      const parsed = JobSchema.safeParse(value);
      if (parsed.success && parsed.data.id === key) this.jobs.set(key, parsed.data);
      else skipped++;
    }
    // Skipped, not fatal for the start (a job's calls then run without its rollout); the count says how many.
    if (skipped) this.d.log.warn({ skipped }, 'unreadable jobs in the store were skipped');
    for (const c of this.d.calls.all()) if (c.jobId !== undefined && this.jobs.has(c.jobId)) this.addCall(c.jobId, c.id);
    for (const job of this.jobs.values()) {
      if (job.state !== 'running') continue;
      job.counts = this.recount(job.id);
      this.rollouts.set(job.id, this.newRollout());
    }
    this.d.store.onChange?.(JOBS_COLLECTION, (c) => this.applyRemote(c.key, c.value));
    this.offCalls = this.d.calls.onChange((c, previous, local) => this.onCall(c, previous, local));
    // A job whose key was removed while this process was down is cancelled now, before any of its calls goes out.
    for (const job of [...this.jobs.values()]) {
      const revoked = job.state === 'running' ? this.d.grants?.revoked(job) : undefined;
      if (revoked !== undefined) await this.revoke(job, revoked);
    }
    // A job whose last call finished while this process was down ends now.
    for (const job of [...this.jobs.values()]) if (job.state === 'running') await this.judge(job);
  }

  close(): void {
    this.offCalls?.();
    for (const r of this.rollouts.values()) clearTimeout(r.timer);
    for (const t of this.progressTimers.values()) clearTimeout(t);
  }

  get(id: string): Job | undefined {
    return this.jobs.get(id);
  }

  /** Jobs, newest first, after the job id `after`. */
  list(o: { limit: number; after?: string | undefined }): { jobs: Job[]; next: string | undefined } {
    const all = [...this.jobs.keys()].sort().reverse();
    const start = o.after === undefined ? 0 : all.findIndex((id) => id < o.after!);
    const ids = start < 0 ? [] : all.slice(start, start + o.limit);
    const jobs = ids.map((id) => this.jobs.get(id)!);
    return { jobs, next: jobs.length === o.limit && start + o.limit < all.length ? ids[ids.length - 1] : undefined };
  }

  /** One page of a job's per-device calls, in call order, after the call id `after`. */
  devices(jobId: string, o: { state?: CallState | undefined; limit: number; after?: string | undefined }): { calls: QueuedCall[]; next: string | undefined } {
    const ids = this.callsOf.get(jobId) ?? [];
    const out: QueuedCall[] = [];
    let i = o.after === undefined ? 0 : upperBound(ids, o.after);
    for (; i < ids.length && out.length < o.limit; i++) {
      const c = this.d.calls.get(ids[i]!);
      if (c && (o.state === undefined || c.state === o.state)) out.push(c);
    }
    return { calls: out, next: out.length === o.limit && i < ids.length ? out[out.length - 1]!.id : undefined };
  }

  /** Start a job: select the devices, queue one call for each, answer at once (202). */
  async create(n: NewJob): Promise<Job> {
    const running = [...this.jobs.values()].filter((j) => j.state === 'running').length;
    if (running >= this.d.settings.maxRunningJobs)
      throw new GatewayError('TOO_MANY_JOBS', `${running} jobs are running (at most ${this.d.settings.maxRunningJobs}); wait for one to end or cancel one`, {
        retryAfterSeconds: 10,
      });
    const argumentBytes = this.d.calls.checkArguments(n.arguments);
    const deviceIds = [...new Set(await this.d.selector.select(n.filter))].sort();
    this.d.calls.checkRoom(deviceIds.length, deviceIds.length * argumentBytes);
    const now = this.now();
    const at = new Date(now).toISOString();
    const ttlMs = Math.min(n.ttlMs ?? this.d.settings.defaultTtlMs, this.d.settings.maxTtlMs);
    const job: Job = {
      id: newId('job', now),
      tool: n.tool,
      arguments: n.arguments,
      filter: n.filter,
      concurrency: n.concurrency,
      ...(n.ratePerSecond !== undefined ? { ratePerSecond: n.ratePerSecond } : {}),
      ...(n.abortOverPercent !== undefined ? { abortOverPercent: n.abortOverPercent } : {}),
      ttlMs,
      state: 'running',
      createdAt: at,
      updatedAt: at,
      counts: zeroCounts(),
      total: deviceIds.length,
      ...(n.principal !== undefined ? { principal: n.principal } : {}),
    };
    // A device whose own queue is full gets its call failed at once, not the whole job refused.
    const calls = deviceIds.map((deviceId) => {
      const draft = this.d.calls.draft({ deviceId, tool: n.tool, arguments: n.arguments, ttlMs, jobId: job.id });
      const full = this.d.calls.queueFull(deviceId);
      return full ? { ...draft, state: 'failed' as const, error: { code: full.code, message: full.message } } : draft;
    });
    this.jobs.set(job.id, job);
    this.rollouts.set(job.id, this.newRollout());
    for (const c of calls) this.addCall(job.id, c.id);
    this.creating.add(job.id);
    try {
      await this.d.store.put(JOBS_COLLECTION, job.id, job);
      await this.d.calls.enqueueMany(calls);
    } finally {
      this.creating.delete(job.id);
    }
    await this.judge(job);
    if (job.state === 'running') this.progress(job, true);
    this.forgetOldJobs();
    return job;
  }

  /** POST /v1/jobs/{id}/cancel: its queued calls are cancelled (sent ones finish). A finished job is answered as it is. */
  async cancel(id: string): Promise<Job> {
    const job = this.jobs.get(id);
    if (!job) throw new GatewayError('NOT_FOUND', `no job ${id.slice(0, 64)}`);
    if (job.state === 'running') await this.stop(job, 'cancelled');
    return job;
  }

  admit(c: QueuedCall): boolean {
    const job = c.jobId === undefined ? undefined : this.jobs.get(c.jobId);
    if (!job) return true;
    // Aborted or cancelled: its queued calls are being cancelled; none may slip out meanwhile.
    const r = this.rollouts.get(job.id);
    if (job.state !== 'running' || !r) return false;
    // Its key was removed (a cluster peer with another key list started it, say): no more of its calls go out.
    const revoked = this.d.grants?.revoked(job);
    if (revoked !== undefined) {
      void this.revoke(job, revoked).catch((err: unknown) => this.d.log.error({ err, jobId: job.id }, 'job bookkeeping failed'));
      return false;
    }
    const now = this.now();
    if (job.counts.sent + r.reserved >= job.concurrency || now < r.nextAt) {
      r.waiting.add(c.deviceId);
      if (now < r.nextAt) this.wakeAt(job, r, r.nextAt);
      return false;
    }
    r.reserved++;
    if (job.ratePerSecond !== undefined) r.nextAt = Math.max(now, r.nextAt) + 1000 / job.ratePerSecond;
    return true;
  }

  unadmit(c: QueuedCall): void {
    const r = c.jobId === undefined ? undefined : this.rollouts.get(c.jobId);
    if (r && r.reserved > 0) r.reserved--;
  }

  private onCall(c: QueuedCall, previous: CallState | undefined, local: boolean): void {
    const job = c.jobId === undefined ? undefined : this.jobs.get(c.jobId);
    if (!job) return;
    if (previous === undefined && !local) this.addCall(job.id, c.id);
    // Shared store: changes of a call can reach here out of order or twice (a late echo of this instance's own
    // write): the counts are recounted from the calls, not moved by each change.
    if (this.d.shared) job.counts = this.recount(job.id);
    else {
      if (previous !== undefined) job.counts[previous] = Math.max(0, job.counts[previous] - 1);
      job.counts[c.state]++;
    }
    const r = this.rollouts.get(job.id);
    if (r && local && c.state === 'sent' && r.reserved > 0) r.reserved--;
    if (this.creating.has(job.id)) return;
    if (!local) {
      if (!this.d.shared || job.state !== 'running') return;
      // The rollout's places are the cluster's: one freed on another instance may be taken here.
      if (previous === 'sent') this.release(job);
      void this.judge(job).catch((err: unknown) => this.d.log.error({ err, jobId: job.id }, 'job bookkeeping failed'));
      return;
    }
    // Calls sent before an abort still finish: their counts are written and told too.
    if (job.state !== 'running') return this.progress(job, false);
    // A place in the rollout came free: let waiting devices try again.
    if (previous === 'sent') this.release(job);
    void this.judge(job)
      .then(() => this.progress(job, false))
      .catch((err: unknown) => this.d.log.error({ err, jobId: job.id }, 'job bookkeeping failed'));
  }

  /** Abort past the failure threshold; end once nothing is queued or sent. */
  private async judge(job: Job): Promise<void> {
    if (job.state !== 'running') return;
    const c = job.counts;
    if (job.abortOverPercent !== undefined) {
      const judged = c.succeeded + c.failed;
      if (judged >= Math.min(this.d.settings.abortMinFinished, job.total) && c.failed * 100 > job.abortOverPercent * judged) {
        this.d.log.warn({ jobId: job.id, failed: c.failed, judged, abortOverPercent: job.abortOverPercent }, 'job aborted: too many of its calls failed');
        return this.stop(job, 'aborted');
      }
    }
    if (c.queued + c.sent > 0) return;
    await this.end(job, c.failed + c.expired > 0 ? 'failed' : 'succeeded');
  }

  /** Aborted or cancelled: the state first (so the cancellations below cannot end it otherwise), then its queued calls. */
  private async stop(job: Job, state: 'aborted' | 'cancelled', error?: CallError): Promise<void> {
    if (job.state !== 'running') return;
    if (!(await this.end(job, state, false, error))) return;
    const patch = error ? { error } : {};
    for (const id of this.callsOf.get(job.id) ?? []) if (this.d.calls.get(id)?.state === 'queued') await this.d.calls.transition(id, 'cancelled', patch);
    this.progress(job, true);
  }

  /** Its API key was removed or given a tenant (key-grants.ts): cancelled, and its queued calls, with KEY_REVOKED. */
  private async revoke(job: Job, message: string): Promise<void> {
    if (job.state !== 'running') return;
    this.d.grants?.note('job', job, { jobId: job.id, tool: job.tool });
    await this.stop(job, 'cancelled', { code: KEY_REVOKED, message });
  }

  /** False when the job had ended already, or another instance won the claim to end it (its word follows through the store). */
  private async end(job: Job, state: Exclude<JobState, 'running'>, announce = true, error?: CallError): Promise<boolean> {
    if (job.state !== 'running') return false;
    if (this.d.shared && this.d.store.create && !(await this.d.store.create(JOB_ENDS_COLLECTION, job.id, { state, at: this.now() }))) {
      // Another instance ended it: its state is taken now (its job document, which says so too, may lag).
      const won = JobStateOf.safeParse(await this.d.store.get(JOB_ENDS_COLLECTION, job.id));
      if (won.success && job.state === 'running') this.settle(job, won.data.state);
      return false;
    }
    if (job.state !== 'running') return false;
    this.settle(job, state);
    if (error) job.error = error;
    if (announce) this.progress(job, true);
    else await this.write(job);
    this.forgetOldJobs();
    return true;
  }

  private settle(job: Job, state: Exclude<JobState, 'running'>): void {
    job.state = state;
    job.updatedAt = new Date(this.now()).toISOString();
    clearTimeout(this.rollouts.get(job.id)?.timer);
    this.rollouts.delete(job.id);
  }

  /** Kick as many waiting devices as there are places (they re-register if still refused). */
  private release(job: Job): void {
    const r = this.rollouts.get(job.id);
    if (!r) return;
    let places = job.concurrency - job.counts.sent - r.reserved;
    for (const id of r.waiting) {
      if (places-- <= 0) break;
      r.waiting.delete(id);
      this.kickDevice(id);
    }
  }

  private wakeAt(job: Job, r: Rollout, at: number): void {
    if (r.timer) return;
    r.timer = setTimeout(
      () => {
        r.timer = undefined;
        this.release(job);
      },
      Math.max(1, at - this.now()),
    );
    r.timer.unref();
  }

  /**
   * A `job.progress` event, with the job written (its counts) alongside: at most one per
   * progressIntervalMs per job (the last change of a burst is always told), and one when it ends.
   */
  private progress(job: Job, force: boolean): void {
    const emit = () => {
      this.lastProgress.set(job.id, this.now());
      const error = job.error ? { error: job.error } : {};
      this.d.bus.publish('job.progress', '', { jobId: job.id, state: job.state, counts: { ...job.counts }, total: job.total, ...error });
      void this.write(job);
    };
    if (force) return emit();
    if (this.progressTimers.has(job.id)) return;
    const wait = (this.lastProgress.get(job.id) ?? 0) + this.d.settings.progressIntervalMs - this.now();
    if (wait <= 0) return emit();
    const t = setTimeout(() => {
      this.progressTimers.delete(job.id);
      emit();
    }, wait);
    t.unref();
    this.progressTimers.set(job.id, t);
  }

  private async write(job: Job): Promise<void> {
    await this.d.store
      .put(JOBS_COLLECTION, job.id, job)
      .catch((err: unknown) => this.d.log.error({ err, jobId: job.id }, 'could not write a job to the store'));
  }

  /** Finished jobs past `keepJobs` are forgotten, oldest first (their calls follow the calls' own retention). */
  private forgetOldJobs(): void {
    const finished = [...this.jobs.values()].filter((j) => j.state !== 'running').sort((a, b) => (a.id < b.id ? -1 : 1));
    for (const j of finished.slice(0, Math.max(0, finished.length - this.d.settings.keepJobs))) {
      this.jobs.delete(j.id);
      this.callsOf.delete(j.id);
      this.lastProgress.delete(j.id);
      void this.d.store.delete(JOBS_COLLECTION, j.id).catch(() => undefined);
      if (this.d.shared) void this.d.store.delete(JOB_ENDS_COLLECTION, j.id).catch(() => undefined);
    }
  }

  private applyRemote(key: string, value: unknown): void {
    if (value === undefined) {
      this.jobs.delete(key);
      return;
    }
    const parsed = JobSchema.safeParse(value);
    if (!parsed.success || parsed.data.id !== key) return;
    const mine = this.jobs.get(key);
    if (!mine) {
      this.jobs.set(key, parsed.data);
      if (parsed.data.state === 'running') this.rollouts.set(key, this.newRollout());
      return;
    }
    // Counts are kept from the calls here; the state is what another instance decided.
    if (mine.state === 'running' && parsed.data.state !== 'running') {
      mine.state = parsed.data.state;
      if (parsed.data.error) mine.error = parsed.data.error;
      mine.updatedAt = parsed.data.updatedAt;
      clearTimeout(this.rollouts.get(key)?.timer);
      this.rollouts.delete(key);
    }
  }

  private recount(jobId: string): Job['counts'] {
    const counts = zeroCounts();
    for (const id of this.callsOf.get(jobId) ?? []) {
      const c = this.d.calls.get(id);
      if (c) counts[c.state]++;
    }
    return counts;
  }

  private addCall(jobId: string, callId: string): void {
    let ids = this.callsOf.get(jobId);
    if (!ids) this.callsOf.set(jobId, (ids = []));
    if (ids.length === 0 || ids[ids.length - 1]! < callId) ids.push(callId);
    else if (ids[upperBound(ids, callId) - 1] !== callId) ids.splice(upperBound(ids, callId), 0, callId);
  }

  private newRollout(): Rollout {
    return { reserved: 0, nextAt: 0, waiting: new Set(), timer: undefined };
  }
}
