import type { Logger } from 'pino';
import {
  boundedServer,
  DEVICE_FACTS_COLLECTION,
  DEVICE_META_COLLECTION,
  NO_META,
  sameServer,
  StoredFacts,
  StoredMeta,
  type Admission,
  type DeviceFacts,
  type DeviceMeta,
  type Readiness,
  type RecordStore,
  type SeenDevice,
} from './record-shapes.js';

export interface DeviceRecordsOptions {
  log: Logger;
  /** Last seen is written at most this often per device (and once more at disconnect). */
  lastSeenWriteMs: number;
  /** Counts every store write by outcome. */
  onWrite?: (outcome: 'ok' | 'failed') => void;
}

/**
 * Facts written together (one SQLite transaction, without an fsync of its own). The embedded store writes
 * synchronously, so the event loop is given back between batches.
 */
const BATCH = 200;
/** Facts changed by connections are gathered this long, then written in batches (a fleet re-dialing after a restart). */
const FLUSH_DELAY_MS = 250;
/**
 * Two writes wait this long at most. A new device's first facts wait for its readiness (its catalog, its firmware):
 * one write per new device instead of two whenever its setup straddled a batch (a fleet dialling in for the first
 * time); one that never gets ready is written when this passes, or at disconnect. A known device's disconnect (its
 * last seen) waits for a re-dial, which drops it (a reconnect storm): live again, its last seen goes out with the
 * sweep like every live device's. `flush()` and `close()` write both at once.
 */
const HOLD_MS = 5_000;

/**
 * Every device ever admitted, kept in the store (SQLite embedded, the shared KV bucket in a cluster) and
 * mirrored in memory: its facts and what people gave it. The registry (registry.ts) reports connections,
 * readiness and disconnects; its bound (`devices.maxKnown`) decides what is forgotten (`forget`).
 */
export class DeviceRecords {
  private readonly facts = new Map<string, DeviceFacts>();
  private readonly meta = new Map<string, DeviceMeta>();
  /** The lastSeen each device's facts were last written with: the sweep writes only those that moved. */
  private readonly savedSeen = new Map<string, number>();
  /** Devices whose facts changed since they were written. */
  private readonly dirty = new Set<string>();
  /** Writes the batches hold back (HOLD_MS), with when the hold began: new devices not ready yet, and `leaving`. */
  private readonly held = new Map<string, number>();
  /** Held devices whose only pending write is their disconnect's last seen: dropped if they re-dial meanwhile. */
  private readonly leaving = new Set<string>();
  /** Every store operation, in order: a forget is never overtaken by a batch that still holds the device. */
  private ops: Promise<void> = Promise.resolve();
  private flushTimer: NodeJS.Timeout | undefined;
  private readonly forgottenListeners = new Set<(deviceId: string) => void>();
  private readonly changeListeners = new Set<(deviceId: string) => void>();
  private readonly recordedListeners = new Set<(deviceId: string) => void>();
  private namedElsewhere: (deviceId: string) => boolean = () => false;
  private store: RecordStore | undefined;
  private sweepTimer: NodeJS.Timeout | undefined;
  private readonly stops: Array<() => void> = [];
  /** Ids forgotten here or by another instance (DELETE), until they are recorded again: their stale presence is not listed. Bounded. */
  private readonly forgottenIds = new Set<string>();

  constructor(private readonly o: DeviceRecordsOptions) {}

  /** Read every record from the store, then follow the changes other instances write (shared store). */
  async attach(store: RecordStore): Promise<void> {
    this.store = store;
    for (const { key, value } of await store.list(DEVICE_FACTS_COLLECTION)) this.applyFacts(key, value);
    for (const { key, value } of await store.list(DEVICE_META_COLLECTION)) this.applyMeta(key, value);
    const offFacts = store.onChange?.(DEVICE_FACTS_COLLECTION, (c) => {
      const known = this.facts.has(c.key);
      this.applyFacts(c.key, c.value);
      if (this.facts.has(c.key)) this.forgottenIds.delete(c.key);
      if (!known && this.facts.has(c.key)) this.tellRecorded(c.key);
      // A delete of an id not recorded here is a forget too: of an id that never connected (see `forget`). The echo of
      // this instance's own delete tells the listeners once more: each forgets what is already gone.
      if (!this.facts.has(c.key) && (known || c.value === undefined)) {
        this.noteForgotten(c.key);
        this.meta.delete(c.key);
        for (const fn of this.forgottenListeners) fn(c.key);
      }
    });
    const offMeta = store.onChange?.(DEVICE_META_COLLECTION, (c) => {
      this.applyMeta(c.key, c.value);
      for (const fn of this.changeListeners) fn(c.key);
    });
    if (offFacts) this.stops.push(offFacts);
    if (offMeta) this.stops.push(offMeta);
  }

  get size(): number {
    return this.facts.size;
  }

  /**
   * Whether the device was forgotten (DELETE, here or on another instance) and not recorded since. A device
   * with no record that was never forgotten may just not be written yet (its instance died within the
   * quarter second before its first batch): its presence still lists it.
   */
  wasForgotten(deviceId: string): boolean {
    return this.forgottenIds.has(deviceId);
  }

  private noteForgotten(deviceId: string): void {
    if (this.forgottenIds.size >= 100_000) this.forgottenIds.delete(this.forgottenIds.values().next().value!);
    this.forgottenIds.add(deviceId);
  }

  /** Every recorded device id (unsorted). */
  ids(): IterableIterator<string> {
    return this.facts.keys();
  }

  getFacts(deviceId: string): Readonly<DeviceFacts> | undefined {
    return this.facts.get(deviceId);
  }

  getMeta(deviceId: string): Readonly<DeviceMeta> {
    return this.meta.get(deviceId) ?? NO_META;
  }

  has(deviceId: string): boolean {
    return this.facts.has(deviceId);
  }

  /** Whether a person gave the device a name, room, tags or tenant (such devices are never forgotten automatically). */
  isNamed(deviceId: string): boolean {
    return this.meta.has(deviceId) || this.namedElsewhere(deviceId);
  }

  /** What else says a person named a device: its tenant, kept by devices/tenants.ts (set by an operator, not a rule). */
  countAsNamed(fn: (deviceId: string) => boolean): void {
    this.namedElsewhere = fn;
  }

  /**
   * A device was forgotten: by DELETE here or on another instance (also of an id that never connected), or past
   * `devices.maxKnown`. What is kept per device elsewhere goes with it: the registry drops its entry (already gone when
   * the forget began here), the firmware service its OTA report.
   */
  onForgotten(fn: (deviceId: string) => void): () => void {
    this.forgottenListeners.add(fn);
    return () => this.forgottenListeners.delete(fn);
  }

  /** A device was recorded for the first time (or again after a forget), here or (shared store) on another instance. */
  onRecorded(fn: (deviceId: string) => void): () => void {
    this.recordedListeners.add(fn);
    return () => this.recordedListeners.delete(fn);
  }

  private tellRecorded(deviceId: string): void {
    for (const fn of this.recordedListeners) {
      try {
        fn(deviceId);
      } catch (err) {
        this.o.log.error({ err, deviceId }, 'device recorded listener failed');
      }
    }
  }

  /** A device's name, room, tags or tenant changed (here or on another instance). */
  onMetaChange(fn: (deviceId: string) => void): () => void {
    this.changeListeners.add(fn);
    return () => this.changeListeners.delete(fn);
  }

  /** A device connected: recorded when new; otherwise written only when what it says changed or last seen is due. */
  admitted(deviceId: string, a: Admission): void {
    this.forgottenIds.delete(deviceId);
    const known = this.facts.get(deviceId);
    if (!known) {
      // A plain literal in the stored documents' key order: a spread of literals here gave every device's facts
      // their own hidden class.
      const { clientId, transport, at } = a;
      const facts: DeviceFacts = {
        clientId,
        transport,
        board: null,
        firmware: null,
        firstSeen: at,
        lastSeen: at,
        connectedAt: at,
        catalogHash: null,
        toolCount: 0,
        server: null,
      };
      this.facts.set(deviceId, facts);
      this.held.set(deviceId, at);
      this.saveFacts(deviceId);
      return this.tellRecorded(deviceId);
    }
    const changed = known.clientId !== a.clientId || known.transport !== a.transport;
    known.clientId = a.clientId;
    known.transport = a.transport;
    known.connectedAt = a.at;
    known.lastSeen = Math.max(known.lastSeen, a.at);
    if (changed || this.due(deviceId, known.lastSeen)) return this.saveFacts(deviceId);
    if (!this.leaving.delete(deviceId)) return;
    // Back before its disconnect was written: nothing to write now.
    this.held.delete(deviceId);
    this.dirty.delete(deviceId);
  }

  /** The device's catalog loaded: its hash (catalogs are interned by hash), size and firmware. */
  ready(deviceId: string, r: Readiness): void {
    const f = this.facts.get(deviceId);
    if (!f) return;
    this.held.delete(deviceId);
    const server = r.server ? boundedServer(r.server) : null;
    const firmware = server ? server.version.slice(0, 128) : f.firmware;
    if (f.catalogHash === r.catalogHash && f.toolCount === r.toolCount && f.firmware === firmware && sameServer(f.server, server)) return;
    Object.assign(f, { catalogHash: r.catalogHash, toolCount: r.toolCount, server, firmware });
    this.saveFacts(deviceId);
  }

  /**
   * What a recorded device told the (open) OTA endpoint: its board, and its firmware when it has not said otherwise.
   * False when it was not taken (unproven, under another client id).
   */
  reported(deviceId: string, r: { board: string | undefined; firmware: string | undefined; clientId?: string; proven?: boolean }): boolean {
    const f = this.facts.get(deviceId);
    if (!f) return true;
    // An OTA check that did not prove it is the device speaks for it only with the client id it connects with:
    // anyone may send a check naming the device id, and fleet jobs select devices by what is recorded here.
    if (r.proven === false && r.clientId !== f.clientId) return false;
    const board = r.board?.slice(0, 128) ?? f.board;
    const firmware = f.server ? f.firmware : (r.firmware?.slice(0, 128) ?? f.firmware);
    if (board === f.board && firmware === f.firmware) return true;
    f.board = board;
    f.firmware = firmware;
    this.saveFacts(deviceId);
    return true;
  }

  /** The device disconnected: its last seen is written (the final write of the connection), unless it re-dials within HOLD_MS. */
  closed(deviceId: string, lastSeenAt: number): void {
    const f = this.facts.get(deviceId);
    if (!f) return;
    // A new device that leaves during its setup is written now.
    const wasHeld = this.held.delete(deviceId);
    f.lastSeen = Math.max(f.lastSeen, lastSeenAt);
    if (this.savedSeen.get(deviceId) === f.lastSeen) return;
    const pending = this.dirty.has(deviceId);
    this.saveFacts(deviceId);
    if (pending || wasHeld || !this.savedSeen.has(deviceId)) return;
    this.leaving.add(deviceId);
    this.held.set(deviceId, Date.now());
  }

  /** Change what people gave a device (only the fields present; null or [] clears). Undefined when the device is not recorded. */
  async setMeta(deviceId: string, patch: Partial<DeviceMeta>): Promise<DeviceMeta | undefined> {
    if (!this.facts.has(deviceId)) return undefined;
    const next: DeviceMeta = { ...this.getMeta(deviceId), ...patch };
    next.tags = [...new Set(next.tags)];
    const empty = next.name === null && next.room === null && next.tags.length === 0 && next.tenant === null;
    if (empty) this.meta.delete(deviceId);
    else this.meta.set(deviceId, next);
    for (const fn of this.changeListeners) fn(deviceId);
    await this.enqueue(() => this.writeMeta(deviceId));
    return next;
  }

  /**
   * Forget a device: both of its documents. False when it was not recorded. An id never recorded (it checked in, never
   * connected) is forgotten all the same, as what other parts keep for it (its OTA report) may be on any instance: the
   * listeners hear it, and the delete of its facts document, which deletes nothing, reaches the other instances' watch.
   */
  async forget(deviceId: string): Promise<boolean> {
    const known = this.facts.delete(deviceId);
    const named = this.meta.delete(deviceId);
    this.savedSeen.delete(deviceId);
    this.held.delete(deviceId);
    this.leaving.delete(deviceId);
    this.noteForgotten(deviceId);
    this.dirty.delete(deviceId);
    if (named) for (const fn of this.changeListeners) fn(deviceId);
    for (const fn of this.forgottenListeners) fn(deviceId);
    await this.enqueue(async () => {
      await this.store?.delete(DEVICE_FACTS_COLLECTION, deviceId);
      if (known || named) await this.store?.delete(DEVICE_META_COLLECTION, deviceId);
    });
    return known || named;
  }

  /**
   * Every `lastSeenWriteMs`, write the last seen of each live device whose traffic moved it: a device is
   * written at most once per period however busy, and an idle one whose keepalives arrive still moves.
   */
  startLastSeenSweep(live: () => Iterable<SeenDevice>): void {
    clearInterval(this.sweepTimer);
    this.sweepTimer = setInterval(() => void this.sweep(live()).catch(() => undefined), this.o.lastSeenWriteMs); // failures are logged
    this.sweepTimer.unref();
  }

  /** One pass of the sweep (also what tests call): the devices whose last seen moved, written in batches. */
  async sweep(live: Iterable<SeenDevice>): Promise<number> {
    let moved = 0;
    for (const d of live) {
      const f = this.facts.get(d.deviceId);
      if (!f || d.lastSeenAt <= (this.savedSeen.get(d.deviceId) ?? 0)) continue;
      f.lastSeen = Math.max(f.lastSeen, d.lastSeenAt);
      this.dirty.add(d.deviceId);
      moved++;
    }
    await this.flush();
    return moved;
  }

  /** Write every changed device's facts now, new devices still in setup too (the sweep, close, tests). */
  flush(): Promise<void> {
    clearTimeout(this.flushTimer);
    this.flushTimer = undefined;
    this.held.clear();
    this.leaving.clear();
    return this.enqueue(() => this.writeDirty());
  }

  /** The batches' timer: what changed, except the writes held back (HOLD_MS). */
  private flushSettled(): Promise<void> {
    this.flushTimer = undefined;
    const now = Date.now();
    for (const [id, since] of this.held) {
      // In the order the holds began (a Map keeps insertion order): the first one still held is the oldest.
      if (now - since < HOLD_MS) break;
      this.held.delete(id);
      this.leaving.delete(id);
    }
    return this.enqueue(() => this.writeDirty());
  }

  /** Stop the sweep and write what is pending (the store closes after this). */
  async close(): Promise<void> {
    clearInterval(this.sweepTimer);
    for (const stop of this.stops) stop();
    await this.flush();
  }

  private due(deviceId: string, lastSeen: number): boolean {
    return lastSeen - (this.savedSeen.get(deviceId) ?? 0) >= this.o.lastSeenWriteMs;
  }

  /** Facts changed: written with the next batch, a moment later. */
  private saveFacts(deviceId: string): void {
    if (this.leaving.delete(deviceId)) this.held.delete(deviceId); // more than its last seen to write now
    this.dirty.add(deviceId);
    this.scheduleFlush();
  }

  private scheduleFlush(): void {
    if (this.flushTimer || !this.store) return;
    this.flushTimer = setTimeout(() => void this.flushSettled().catch(() => undefined), FLUSH_DELAY_MS); // failures are logged
    this.flushTimer.unref();
  }

  /** Run one store operation after the ones before it; rejects (and logs) on a store failure. */
  private enqueue(op: () => Promise<void>): Promise<void> {
    const run = async () => {
      try {
        await op();
        this.o.onWrite?.('ok');
      } catch (err) {
        this.o.onWrite?.('failed');
        this.o.log.warn({ err }, 'device record write failed');
        throw err;
      }
    };
    const next = this.ops.then(run);
    this.ops = next.catch(() => undefined);
    return next;
  }

  private async writeDirty(): Promise<void> {
    const store = this.store;
    let held = 0;
    while (store && this.dirty.size > held) {
      const batch: Array<{ key: string; value: DeviceFacts }> = [];
      held = 0;
      for (const id of this.dirty) {
        if (this.held.has(id)) {
          held++;
          continue;
        }
        this.dirty.delete(id);
        this.leaving.delete(id);
        const value = this.facts.get(id);
        if (value) batch.push({ key: id, value: { ...value } });
        if (batch.length >= BATCH) break;
      }
      if (batch.length === 0) break;
      try {
        // No caller waits on these batches, and a SIGKILL already loses the quarter second held in memory:
        // the store may skip their fsync (it blocked the event loop ~5-10 ms per batch while a fleet dialled in).
        if (store.putMany) await store.putMany(DEVICE_FACTS_COLLECTION, batch, { durable: false });
        else for (const e of batch) await store.put(DEVICE_FACTS_COLLECTION, e.key, e.value);
      } catch (err) {
        // Kept for the next flush (unless a newer change or a forget came meanwhile).
        for (const e of batch) if (this.facts.has(e.key)) this.dirty.add(e.key);
        throw err;
      }
      for (const e of batch) this.savedSeen.set(e.key, e.value.lastSeen);
      if (this.dirty.size > held) await new Promise((resolve) => setImmediate(resolve));
    }
    if (this.dirty.size > 0) this.scheduleFlush(); // the held ones, at their readiness or their hold's end
  }

  private async writeMeta(deviceId: string): Promise<void> {
    const doc = this.meta.get(deviceId);
    if (doc === undefined) await this.store?.delete(DEVICE_META_COLLECTION, deviceId);
    else await this.store?.put(DEVICE_META_COLLECTION, deviceId, doc);
  }

  private applyFacts(deviceId: string, value: unknown): void {
    if (value === undefined) {
      this.facts.delete(deviceId);
      this.savedSeen.delete(deviceId);
      this.held.delete(deviceId);
      this.leaving.delete(deviceId);
      this.dirty.delete(deviceId); // forgotten elsewhere: a pending batch must not write it back
      return;
    }
    const parsed = StoredFacts.safeParse(value);
    if (!parsed.success) return this.o.log.warn({ deviceId }, 'unreadable device record ignored');
    this.facts.set(deviceId, parsed.data);
    this.savedSeen.set(deviceId, parsed.data.lastSeen);
  }

  private applyMeta(deviceId: string, value: unknown): void {
    if (value === undefined) return void this.meta.delete(deviceId);
    const parsed = StoredMeta.safeParse(value);
    if (!parsed.success) return this.o.log.warn({ deviceId }, 'unreadable device metadata ignored');
    this.meta.set(deviceId, parsed.data);
  }
}

/** What a device's record adds to its listing. */
