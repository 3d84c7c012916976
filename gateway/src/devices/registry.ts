import type { VisionCapability } from '@voxgate/protocol';
import type { Logger } from 'pino';
import { GatewayError } from '../errors.js';
import type { EventBus } from '../events/bus.js';
import type { Metrics } from '../metrics.js';
import { CLOSE_FORGOTTEN, CLOSE_REPLACED, CLOSE_TAKEOVER_REFUSED, type DeviceLink } from './link.js';
import type { SchemaValidators } from '../schemas/validators.js';
import type { DeviceHandle } from './device-handle.js';
import { matchesFilter, type DeviceFilter, type DevicePage, type DeviceSummary, type LocalDevices, type PageRequest, type ReadyDevice } from './directory.js';
import { NoVoiceHook } from './no-voice-hook.js';
import { recordFields } from './record-fields.js';
import type { DeviceRecords } from './records.js';
import { KeyedTokenBucket } from '../throttle/token-bucket.js';
import { badInputBudget } from './bad-input-log.js';
import { DeviceSession } from './session.js';
import { HELLO_RATE, type SessionHost, type SessionShared } from './session-shared.js';
import type { SessionSettings } from './settings.js';
import { SortedIds, upperBound } from './sorted-ids.js';
import type { ToolsPageCache } from './tools-page-cache.js';
import type { VoiceHook } from './voice-hook.js';

/** What the registry remembers of a device, online or not. */
interface DeviceRecord {
  id: string;
  clientId: string;
  transport: 'websocket' | 'mqtt';
  /** Increases with every connection; a close from an older epoch never marks a newer one offline. */
  epoch: number;
  session: DeviceSession | undefined;
  /**
   * While a session is live these are undefined and the session's own are read; they hold times once it closed.
   * Not 0: V8 then keeps small integers in these fields until the first device leaves, turns them into boxed-number
   * fields for every record made after that (+32 B per online device, in every gateway that has seen a disconnect or
   * restored its records) and throws away the optimized code that read records (docs/performance.md, "fleetjit").
   */
  connectedAt: number | undefined;
  lastSeenAt: number | undefined;
  catalogHash: string | undefined;
  server?: { name: string; version: string } | undefined;
  protocolVersion?: string | undefined;
  toolCount: number;
  /** The epoch whose session is ready (counted in devicesReady), if any. */
  readyEpoch?: number | undefined;
  /** What the current connection proved at authentication (see links/device-auth.ts). */
  credential: string;
}

export interface ConnectInfo {
  deviceId: string;
  clientId: string;
  link: DeviceLink;
  expectHello: boolean;
  /** What this connection proved at authentication; '' when device auth is open. */
  credential?: string;
}

export interface RegistryDeps {
  /** Offline devices remembered beyond this count are forgotten, least recently seen first. */
  maxKnownDevices?: number;
  log: Logger;
  bus: EventBus;
  metrics: Metrics;
  settings: SessionSettings;
  vision: (deviceId: string) => VisionCapability | undefined;
  /** Shared by every session of this gateway (see devices/tools-page-cache.ts, schemas/validators.ts). */
  pages: ToolsPageCache;
  validators: SchemaValidators;
  /** The voice relay, when voice.mode is "relay". */
  voice?: VoiceHook;
  /** The lasting records in the store (records.ts): told of connections, readiness and disconnects. */
  records?: DeviceRecords;
}

/** Presence for every device: who is connected now, over what, since when, and which session speaks for it. */
export class DeviceRegistry implements LocalDevices {
  private readonly records = new Map<string, DeviceRecord>();
  /** What every session asks of the registry: one object, not closures per device. */
  private readonly host: SessionHost = {
    vision: (deviceId) => this.d.vision(deviceId),
    previousHash: (s) => this.current(s)?.catalogHash,
    onReady: (s) => this.onReady(s),
    onClosed: (s) => this.onClosed(s),
  };
  /** What every session shares (session.ts): one object, not a deps object per device. */
  private readonly shared: SessionShared;
  /**
   * Every known device id, sorted: pages of the listing without sorting the fleet per request. New ids are merged in
   * when the order is next read (a listing), so a fleet dialling in pays no O(n) sorted insert per new device (~2 % of
   * the ready path's CPU at a few thousand).
   */
  private readonly known = new SortedIds();
  private epochs = 0;
  private readyCount = 0;
  /** When "known devices over the bound" was last logged (once a minute at most). */
  private overBoundLoggedAt = 0;

  constructor(private readonly d: RegistryDeps) {
    const { log, bus, metrics, settings, pages, validators } = d;
    // Bounded: a device evicted from it starts again with a full bucket (HELLO_RATE's burst, a handful of hellos).
    const hellos = new KeyedTokenBucket(HELLO_RATE, { maxKeys: 10_000 });
    const badInputLines = badInputBudget(log);
    this.shared = { log, bus, metrics, settings, pages, validators, host: this.host, voice: d.voice ?? new NoVoiceHook(log), hellos, badInputLines };
  }

  /**
   * List every recorded device not known here yet, offline, until it dials back (after a restart, and in a
   * cluster the devices the others recorded). A device forgotten elsewhere (DELETE there) goes here too.
   */
  restoreRecords(): void {
    const records = this.d.records;
    if (!records) return;
    for (const id of records.ids()) {
      const f = records.getFacts(id);
      if (!f || this.records.has(id)) continue;
      const { clientId, transport, connectedAt, lastSeen: lastSeenAt, toolCount } = f;
      // The same keys in the same order as `connect`'s record: one shape for every record (a restored one had its own,
      // and its `server` added afterwards), so the code reading records sees one.
      const r: DeviceRecord = {
        id,
        clientId,
        transport,
        epoch: 0,
        session: undefined,
        connectedAt,
        lastSeenAt,
        catalogHash: f.catalogHash ?? undefined,
        server: f.server || undefined,
        protocolVersion: undefined,
        toolCount,
        readyEpoch: undefined,
        credential: '',
      };
      this.records.set(id, r);
      this.known.add(id);
    }
    this.d.metrics.hot.devicesKnown.set(this.records.size);
    // Forgets begun here (forget, makeRoomFor) drop the entry first: one still here was forgotten on another instance.
    records.onForgotten((id) => {
      const r = this.records.get(id);
      if (r) this.drop(r, 'forgotten on another gateway instance');
    });
  }

  /**
   * Forget a device (DELETE /v1/devices/{id}): its records go, and a live connection is closed (otherwise
   * its traffic would record it again at once). False when the device is not known here.
   */
  async forget(deviceId: string): Promise<boolean> {
    const r = this.records.get(deviceId);
    if (r) this.drop(r, 'forgotten by an operator');
    const recorded = (await this.d.records?.forget(deviceId)) ?? false;
    return r !== undefined || recorded;
  }

  private drop(r: DeviceRecord, reason: string): void {
    const s = r.session;
    if (s) {
      r.session = undefined;
      // Its catalog's bytes go back now, not when the link has closed: a forgotten device makes room at once.
      this.d.settings.catalogs.release(s);
      s.failAll(() => new GatewayError('DEVICE_NOT_FOUND', `device ${r.id} was ${reason}`));
      s.close(CLOSE_FORGOTTEN, reason);
      // Published while the entry is still here (the cluster writes its presence offline from it); the
      // session's own close comes later and is a stale one by then.
      this.d.bus.publish('device.offline', r.id, { reason });
    }
    if (this.wasReady(r)) {
      this.readyCount--;
      r.readyEpoch = undefined;
      this.d.metrics.hot.devicesReady.set(this.readyCount);
    }
    this.records.delete(r.id);
    this.known.delete(r.id);
    this.d.metrics.hot.devicesKnown.set(this.records.size);
  }

  /** The device's live local session, or undefined. */
  find(deviceId: string): DeviceSession | undefined {
    const r = this.records.get(deviceId);
    return r?.session && r.session.state !== 'closed' ? r.session : undefined;
  }

  /** The live local session, or the reason there is none (DEVICE_NOT_FOUND, DEVICE_OFFLINE). */
  device(deviceId: string): DeviceHandle {
    return this.session(deviceId);
  }

  /**
   * A device connected: a newer connection replaces an older one (takeover), but only when it proved the
   * same credentials as the live one; otherwise the new one is closed and undefined returned.
   */
  connect(info: ConnectInfo): DeviceSession | undefined {
    const credential = info.credential ?? '';
    const prev = this.records.get(info.deviceId);
    const old = prev?.session;
    if (old && old.state !== 'closed' && prev.credential !== credential) {
      this.d.metrics.takeoversRefused.inc();
      this.d.log.warn(
        { deviceId: info.deviceId, transport: info.link.transport, remote: info.link.remoteAddress },
        'refused a takeover with other credentials than the live connection',
      );
      info.link.close(CLOSE_TAKEOVER_REFUSED, 'another connection holds this device');
      return undefined;
    }
    const epoch = ++this.epochs;
    const record: DeviceRecord = {
      id: info.deviceId,
      clientId: info.clientId,
      transport: info.link.transport,
      epoch,
      session: undefined,
      connectedAt: undefined,
      lastSeenAt: undefined,
      catalogHash: prev?.catalogHash,
      // Every field in the literal: one added later gave each record a property array (~40 B per device).
      server: prev?.server || undefined,
      protocolVersion: prev?.protocolVersion || undefined,
      toolCount: prev?.toolCount ?? 0,
      readyEpoch: undefined,
      credential,
    };
    const session = new DeviceSession(this.shared, { deviceId: info.deviceId, clientId: info.clientId, link: info.link, epoch }, info.expectHello);
    record.session = session;
    if (!prev) this.makeRoomFor(info.deviceId);
    this.records.set(info.deviceId, record);
    this.d.metrics.hot.devicesKnown.set(this.records.size);
    this.d.records?.admitted(info.deviceId, { clientId: info.clientId, transport: info.link.transport, at: session.connectedAt });
    if (prev && this.wasReady(prev)) {
      this.readyCount--;
      prev.readyEpoch = undefined;
      this.d.metrics.hot.devicesReady.set(this.readyCount);
    }
    if (old && old.state !== 'closed') {
      this.d.metrics.takeovers.inc();
      session.log.info({ previousEpoch: prev!.epoch }, 'a newer connection replaces the current one');
      old.failAll(() => new GatewayError('DEVICE_OFFLINE', `device ${info.deviceId} reconnected; the call was on the replaced connection`));
      old.close(CLOSE_REPLACED, 'replaced by a newer connection');
    }
    this.d.metrics.hot.connections[info.link.transport].inc();
    this.d.metrics.hot.devicesConnected[info.link.transport].inc();
    if (session.logs('info')) session.log.info({ clientId: info.clientId, remote: info.link.remoteAddress }, 'device connected');
    this.d.bus.publish('device.online', info.deviceId, { transport: info.link.transport, clientId: info.clientId });
    session.start();
    return session;
  }

  /** The record a session speaks for; undefined once a newer connection (or a forget) replaced it. */
  private current(s: DeviceSession): DeviceRecord | undefined {
    const r = this.records.get(s.deviceId);
    return r?.session === s ? r : undefined;
  }

  private onReady(s: DeviceSession): void {
    const record = this.current(s);
    if (!record || !s.catalog) return;
    if (!this.wasReady(record)) this.readyCount++;
    record.catalogHash = s.catalog.hash;
    record.toolCount = s.catalog.size;
    if (s.initialize) {
      record.server = serverOf(s.initialize.serverInfo);
      record.protocolVersion = s.initialize.protocolVersion;
    }
    record.readyEpoch = record.epoch;
    this.d.metrics.hot.devicesReady.set(this.readyCount);
    this.d.records?.ready(record.id, { catalogHash: s.catalog.hash, toolCount: s.catalog.size, server: record.server });
  }

  private wasReady(record: DeviceRecord): boolean {
    return record.readyEpoch !== undefined && record.readyEpoch === record.epoch;
  }

  private onClosed(s: DeviceSession): void {
    this.d.metrics.hot.devicesConnected[s.transport].dec();
    // Every closed session, stale ones too (replaced, forgotten): the budget counts what sessions hold, not records.
    this.d.settings.catalogs.release(s);
    const record = this.current(s);
    if (!record) {
      // A stale disconnect: a newer connection already speaks for this device (or it was forgotten).
      this.d.log.debug({ deviceId: s.deviceId }, 'stale disconnect ignored');
      return;
    }
    if (this.wasReady(record)) {
      this.readyCount--;
      record.readyEpoch = undefined;
      this.d.metrics.hot.devicesReady.set(this.readyCount);
    }
    record.session = undefined;
    record.connectedAt = s.connectedAt;
    record.lastSeenAt = Math.max(Date.now(), s.lastSeenAt);
    this.d.records?.closed(record.id, record.lastSeenAt);
    this.d.bus.publish('device.offline', record.id, { reason: s.closeReason ?? 'closed' });
  }

  /**
   * A new device id: index it for listing, and keep memory bounded under churn. Past the bound, forget 1% of
   * the offline devices: never-ready ones first (an id that connected but never finished initializing is
   * the cheap thing to forge), then the least recently seen. Online devices, and devices a person named
   * (name, room, tags, a tenant an operator set; not a rule's), are never forgotten this way:
   * past the bound with nothing else to forget, the count grows (voxgate_devices_known) and a warning says so.
   */
  private makeRoomFor(deviceId: string): void {
    this.known.add(deviceId);
    const max = this.d.maxKnownDevices ?? Infinity;
    if (this.records.size < max) return;
    const named = (id: string) => this.d.records?.isNamed(id) ?? false;
    const offline = [...this.records.values()]
      .filter((r) => !r.session && !named(r.id))
      .sort((a, b) => Number(everReady(a)) - Number(everReady(b)) || (a.lastSeenAt ?? 0) - (b.lastSeenAt ?? 0));
    const drop = offline.slice(0, Math.max(1, Math.ceil(max / 100)));
    if (drop.length === 0) {
      if (Date.now() - this.overBoundLoggedAt < 60_000) return;
      this.overBoundLoggedAt = Date.now();
      this.d.log.warn({ known: this.records.size, maxKnown: max }, 'known devices past devices.maxKnown: every one is online or named, none forgotten');
      return;
    }
    const neverReady = drop.filter((r) => !everReady(r)).length;
    for (const r of drop) {
      this.records.delete(r.id);
      void this.d.records?.forget(r.id).catch(() => undefined);
    }
    this.known.deleteAll(new Set(drop.map((r) => r.id)));
    if (neverReady > 0) this.d.metrics.devicesForgotten.inc({ kind: 'never_ready' }, neverReady);
    if (drop.length > neverReady) this.d.metrics.devicesForgotten.inc({ kind: 'offline' }, drop.length - neverReady);
    this.d.log.info({ forgotten: drop.length, neverReady, known: this.records.size }, 'forgot offline devices (never-ready first, then least recently seen)');
  }

  /** The live session, or the reason there is none (for API use; `find` is the normal "not here"). */
  session(deviceId: string): DeviceSession {
    const found = this.find(deviceId);
    if (found) return found;
    if (!this.records.has(deviceId)) throw new GatewayError('DEVICE_NOT_FOUND', `no device ${deviceId} has ever connected`);
    throw new GatewayError('DEVICE_OFFLINE', `device ${deviceId} is offline`);
  }

  /** The credential of the device's live connection, if it has one. */
  liveCredential(deviceId: string): string | undefined {
    const r = this.records.get(deviceId);
    return r?.session && r.session.state !== 'closed' ? r.credential : undefined;
  }

  get(deviceId: string): DeviceSummary | undefined {
    const r = this.records.get(deviceId);
    return r && summarize(r, this.d.records);
  }

  /**
   * One page of devices in id order, starting after the device id `after` (which may since have been
   * forgotten). `next` is the id to continue after, when there may be more.
   */
  page(filter: DeviceFilter, opts: PageRequest): DevicePage {
    const devices: DeviceSummary[] = [];
    const order = this.known.sorted();
    let i = opts.after === undefined ? 0 : upperBound(order, opts.after);
    for (; i < order.length && devices.length < opts.limit; i++) {
      const r = this.records.get(order[i]!);
      if (!r) continue;
      const d = summarize(r, this.d.records);
      if (matchesFilter(d, filter)) devices.push(d);
    }
    const more = devices.length === opts.limit && i < order.length;
    return { devices, next: more ? devices[devices.length - 1]!.id : undefined };
  }

  ids(): readonly string[] {
    return this.known.sorted();
  }

  ready(): ReadyDevice[] {
    const out: ReadyDevice[] = [];
    for (const r of this.records.values()) if (r.session?.state === 'ready' && r.session.catalog) out.push(r.session);
    return out;
  }

  /** Local changes are events on the bus; only devices held elsewhere change without one. */
  onChange(): () => void {
    return () => undefined;
  }

  sessions(): DeviceSession[] {
    const out: DeviceSession[] = [];
    for (const r of this.records.values()) if (r.session) out.push(r.session);
    return out;
  }

  get size(): number {
    return this.records.size;
  }
}

/** The name and version of a server info, one object per server info (initialize results are shared, setup.ts). */
const servers = new WeakMap<object, { name: string; version: string }>();
function serverOf(info: { name: string; version: string }): { name: string; version: string } {
  let server = servers.get(info);
  if (!server) servers.set(info, (server = { name: info.name, version: info.version }));
  return server;
}

/** Whether the device ever finished initializing (its catalog hash is kept across its connections). */
const everReady = (r: DeviceRecord): boolean => r.catalogHash !== undefined;

function summarize(r: DeviceRecord, records: DeviceRecords | undefined): DeviceSummary {
  const s = r.session;
  const catalog = s?.catalog;
  const connectedAt = new Date(s ? s.connectedAt : (r.connectedAt ?? 0)).toISOString();
  return {
    id: r.id,
    clientId: r.clientId,
    transport: r.transport,
    online: s !== undefined,
    state: s?.state ?? 'offline',
    connectedAt,
    lastSeenAt: new Date(Math.max(r.lastSeenAt ?? 0, s?.lastSeenAt ?? 0)).toISOString(),
    server: r.server ?? null,
    protocolVersion: r.protocolVersion ?? null,
    toolCount: catalog?.size ?? r.toolCount,
    toolsHash: catalog?.hash ?? r.catalogHash ?? null,
    pendingCalls: s?.pendingCount ?? 0,
    ...(s?.catalogWarning !== undefined ? { catalogWarning: s.catalogWarning } : {}),
    ...recordFields(records, r.id, connectedAt),
  };
}
