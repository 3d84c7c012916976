import { randomBytes } from 'node:crypto';
import type { Logger } from 'pino';
import type { Metrics } from '../metrics.js';
import { boundChild, type BoundCounter } from '../metrics-bound.js';
import { ThrottledLog } from '../throttle/throttled-log.js';
import { KeyedTokenBucket, type RateLimit } from '../throttle/token-bucket.js';

export const EVENT_TYPES = [
  'device.online',
  'device.ready',
  'device.offline',
  'device.tools_changed',
  'device.catalog_incomplete',
  'device.notification',
  'device.message',
  'device.photo',
  // A device's conversation (voice.mode "converse"): what was heard, tools run, what was answered and how fast.
  'voice.transcript',
  'voice.tool',
  'voice.reply',
  // Queued calls and fleet jobs (fleet/): a call's state changed; a job's counts (deviceId "").
  'call.state',
  'job.progress',
  // A schedule started its call or job (fleet/schedules.ts); deviceId is the call's device, "" for a job.
  'schedule.fired',
] as const;
export type EventType = (typeof EVENT_TYPES)[number];

/** Event types whose rate a device controls; they are rate-limited per device. */
const DEVICE_DRIVEN: ReadonlySet<EventType> = new Set(['device.message', 'device.notification', 'device.photo', 'device.tools_changed']);

export interface GatewayEvent {
  /** `<boot>-<seq>`: unique across restarts (boot epoch), increasing within a boot. SSE `id`, what `Last-Event-ID` names. */
  id: string;
  type: EventType;
  deviceId: string;
  at: string;
  data: Record<string, unknown>;
  /**
   * The tenant the event belongs to, recorded when it was published: its device's tenant then (a queued call's
   * `call.state`: the tenant of the key that queued the call); absent for none (operators only). A tenant's key sees
   * an event only if it was published under that tenant, so a device moved to another tenant takes none of its past
   * with it (api/device-scope.ts eventVisibility). Never on the wire: `eventJson` leaves it out.
   */
  tenant?: string | undefined;
}

/** What a publisher may say of an event beyond its type, device and data. */
export interface PublishOptions {
  /** An event relayed from another instance keeps that instance's id and time. */
  id?: string | undefined;
  at?: string | undefined;
  /** Whose event it is: a tenant, or null for none; absent: its device's tenant now (EventBusOptions.tenantOf). */
  tenant?: string | null | undefined;
}

export type EventListener = (e: GatewayEvent) => void;

/** What a client resuming after `Last-Event-ID` gets: the events it missed, or the news that it must resync. */
export type Replay = { events: GatewayEvent[] } | { resync: 'unknown_id' | 'expired' };

/**
 * Resolves a `Last-Event-ID` this bus cannot (another instance's id, or older than the ring): with the
 * cluster on, the JetStream event stream. Undefined when it cannot either.
 */
export interface ReplaySource {
  replay(lastId: string): Promise<Replay | undefined>;
}

export interface EventBusOptions {
  /** Events kept for `Last-Event-ID` replay. */
  bufferSize: number;
  metrics?: Metrics;
  log?: Logger;
  /** device.message and device.notification per device; beyond it events are dropped and counted. */
  deviceRate?: RateLimit;
  /** Where a `Last-Event-ID` this bus does not hold is looked up (the cluster's event stream). */
  replaySource?: ReplaySource | undefined;
  /** The boot epoch (tests); default: this start's time in base 36 plus 16 random bits. */
  boot?: string;
  /** Each device's tenant (devices/tenants.ts), recorded on every event as it is published. Unset: no event has one. */
  tenantOf?: ((deviceId: string) => string | undefined) | undefined;
}

/**
 * One bus for every device event. Keeps the last `bufferSize` events in a ring so SSE clients can
 * resume with `Last-Event-ID`. Listeners run synchronously and must not throw; one that does is logged,
 * never allowed to stop delivery to the others.
 */
/** Devices whose event budgets are kept at once (offline ones are forgotten at once): past it, the least recent starts afresh. */
const MAX_RATED_DEVICES = 100_000;

export class EventBus {
  /** Prefix of every id of this start, so an id from an earlier start is never mistaken for one of ours. */
  readonly boot: string;
  private seq = 0;
  private readonly bufferSize: number;
  private readonly ring: Array<GatewayEvent | undefined>;
  private readonly listeners = new Set<EventListener>();
  private readonly limiter: KeyedTokenBucket | undefined;
  private readonly dropLog: ThrottledLog | undefined;
  /** voxgate_events_total's child per type, bound on first use (no label hash per event). */
  private readonly counted = new Map<EventType, BoundCounter>();
  /** The last `at` made, and its millisecond: events of the same millisecond (a fleet dialling in) share it. */
  private atMs = NaN;
  private atText = '';

  constructor(private readonly o: EventBusOptions) {
    this.bufferSize = o.bufferSize;
    this.ring = new Array<GatewayEvent | undefined>(o.bufferSize);
    this.boot = o.boot ?? `${Date.now().toString(36)}${randomBytes(2).toString('hex')}`;
    this.limiter = o.deviceRate ? new KeyedTokenBucket(o.deviceRate, { maxKeys: MAX_RATED_DEVICES }) : undefined;
    this.dropLog = o.log && new ThrottledLog(o.log, 'warn', { linesPerWindow: 1, windowMs: 60_000, maxKeys: MAX_RATED_DEVICES });
  }

  /** Publish to every listener; undefined when a device-driven event is over its device's rate (dropped). */
  publish(type: EventType, deviceId: string, data: Record<string, unknown> = {}, o?: PublishOptions): GatewayEvent | undefined {
    if (this.limiter) {
      if (type === 'device.offline') {
        this.limiter.forget(deviceId);
        this.dropLog?.forget(deviceId);
      } else if (DEVICE_DRIVEN.has(type) && !this.admit(type, deviceId)) return undefined;
    }
    // An event relayed from another instance keeps that instance's id, so its id means the same everywhere.
    ++this.seq;
    const tenant = o?.tenant === undefined ? this.o.tenantOf?.(deviceId) : (o.tenant ?? undefined);
    const e: GatewayEvent = { id: o?.id ?? `${this.boot}-${this.seq}`, type, deviceId, at: o?.at ?? this.now(), data, tenant };
    if (this.bufferSize > 0) this.ring[this.seq % this.bufferSize] = e;
    if (this.o.metrics) this.countOf(type, this.o.metrics).inc();
    for (const l of this.listeners) {
      try {
        l(e);
      } catch (err) {
        this.o.log?.error({ err }, 'event listener failed');
      }
    }
    return e;
  }

  /** Now as an ISO time (`toISOString` costs ~1–2 µs; one per millisecond). */
  private now(): string {
    const ms = Date.now();
    if (ms !== this.atMs) {
      this.atMs = ms;
      this.atText = new Date(ms).toISOString();
    }
    return this.atText;
  }

  private countOf(type: EventType, metrics: Metrics): BoundCounter {
    let c = this.counted.get(type);
    if (!c) this.counted.set(type, (c = boundChild(metrics.events, 'type', type)));
    return c;
  }

  private admit(type: EventType, deviceId: string): boolean {
    const a = this.limiter!.take(deviceId);
    if (a.ok) return true;
    this.o.metrics?.eventsDropped.inc({ reason: 'device_rate' });
    this.dropLog?.write({ deviceId, type }, 'device events over the per-device rate are dropped (one line per minute per device)', deviceId);
    return false;
  }

  subscribe(listener: EventListener): () => boolean {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** The buffered events after `lastId`, oldest first; or resync when `lastId` is not ours or fell out of the buffer. */
  since(lastId: string): Replay {
    const m = /^([0-9a-z]{1,32})-(\d{1,15})$/.exec(lastId);
    const last = m && m[1] === this.boot ? Number(m[2]) : NaN;
    if (!Number.isSafeInteger(last) || last > this.seq) return { resync: 'unknown_id' };
    const oldest = Math.max(this.seq - this.bufferSize + 1, 1);
    if (last + 1 < oldest) return { resync: 'expired' };
    const events: GatewayEvent[] = [];
    for (let s = last + 1; s <= this.seq; s++) {
      const e = this.ring[s % this.bufferSize];
      if (e) events.push(e);
    }
    return { events };
  }

  /** `since`, else what the replay source finds (the events after another instance's id), else the resync. */
  async replay(lastId: string): Promise<Replay> {
    const local = this.since(lastId);
    const remote = this.o.replaySource;
    if (!('resync' in local) || !remote) return local;
    return (await remote.replay(lastId).catch(() => undefined)) ?? local;
  }

  /** The id of the last event published (`<boot>-0` before the first). */
  get lastId(): string {
    return `${this.boot}-${this.seq}`;
  }
}

const json = new WeakMap<GatewayEvent, string>();
const sse = new WeakMap<GatewayEvent, string>();

/** The event as JSON, serialized once however many readers it has; never throws. */
export function eventJson(e: GatewayEvent): string {
  let s = json.get(e);
  if (s === undefined) {
    // The wire's fields only: the event's tenant is the gateway's to know.
    const { id, type, deviceId, at } = e;
    try {
      s = JSON.stringify({ id, type, deviceId, at, data: e.data });
    } catch {
      // Device data that cannot be serialized (too deep, a cycle) must never break the fan-out.
      s = JSON.stringify({ id, type, deviceId, at, data: { unserializable: true } });
    }
    json.set(e, s);
  }
  return s;
}

/** The event as one SSE frame, built once and shared by every stream. */
export function sseFrame(e: GatewayEvent): string {
  let s = sse.get(e);
  if (s === undefined) {
    s = `id: ${e.id}\nevent: ${e.type}\ndata: ${eventJson(e)}\n\n`;
    sse.set(e, s);
  }
  return s;
}
