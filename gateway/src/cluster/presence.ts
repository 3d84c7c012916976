import { JetStreamApiCodes, JetStreamApiError } from '@nats-io/jetstream';
import type { KV, KvWatchEntry } from '@nats-io/kv';
import type { Logger } from 'pino';
import type { ToolCatalog } from '../devices/catalog.js';
import { lowerBound } from '../devices/sorted-ids.js';
import { RemoteCatalogs } from './remote-catalogs.js';
import { deviceOfKey, instanceKey, PresenceEntry, presenceKey } from './wire.js';

/** A device's entry as this instance last saw it; `revision` is the KV revision, the cluster-wide connection epoch. */
export interface SeenPresence {
  entry: PresenceEntry;
  revision: number;
}

export interface PresenceDeps {
  kv: KV;
  instanceId: string;
  heartbeatMs: number;
  /** Bounds the catalogs kept for the entries (`devices.catalogBudgetBytes`). */
  catalogBudgetBytes: number;
  log: Logger;
  /** Another instance wrote a newer entry for a device this instance still holds. */
  onTakenOver(deviceId: string): void;
  /** An instance stopped (deleted its key) or went silent for 3 heartbeats. */
  onInstanceDead(instanceId: string): void;
  /** Another instance's device changed (presence, a catalog loaded, its instance came or went). */
  onRemoteChange(): void;
}

const decoder = new TextDecoder();

/**
 * Presence for the whole cluster, mirrored in memory from the KV bucket (one watch), so a lookup on the
 * call path is a map read. Writes from this instance are serialized per device and compare-and-set on the
 * revision this instance wrote: a stale instance never overwrites a newer connection's entry.
 */
export class ClusterPresence {
  private readonly seen = new Map<string, SeenPresence>();
  /** The keys of `seen`, sorted: the cluster-wide device listing pages through them. */
  private readonly sorted: string[] = [];
  /** The revision of the last entry this instance wrote per device it holds. */
  private readonly own = new Map<string, number>();
  private readonly writes = new Map<string, Promise<void>>();
  /** Writes that failed for want of NATS (a restart, a partition): the latest per device, retried each heartbeat. */
  private readonly retries = new Map<string, { entry: PresenceEntry; first: boolean; catalog: ToolCatalog | undefined }>();
  /** The catalogs the entries in `seen` name. */
  readonly catalogs: RemoteCatalogs;
  /** Instances alive, by the local time their last heartbeat arrived. */
  private readonly instances = new Map<string, number>();
  private readonly stops: Array<() => void> = [];
  private heartbeat: NodeJS.Timeout | undefined;
  private lastSweep = Date.now();

  constructor(private readonly d: PresenceDeps) {
    this.catalogs = new RemoteCatalogs({ kv: d.kv, log: d.log, limit: d.catalogBudgetBytes, onLoaded: () => d.onRemoteChange() });
  }

  async start(): Promise<void> {
    await this.beat();
    this.instances.set(this.d.instanceId, Date.now());
    const devices = await this.d.kv.watch({ key: 'dev.>' });
    const insts = await this.d.kv.watch({ key: 'inst.>' });
    this.stops.push(
      () => devices.stop(),
      () => insts.stop(),
    );
    void this.consume(devices, (e) => this.onDeviceEntry(e));
    void this.consume(insts, (e) => this.onInstanceEntry(e));
    this.heartbeat = setInterval(() => {
      void this.beat().catch((err: unknown) => this.d.log.warn({ err }, 'cluster heartbeat failed'));
      this.sweep();
      this.retry();
    }, this.d.heartbeatMs);
    this.heartbeat.unref();
  }

  private async consume(it: AsyncIterable<KvWatchEntry>, fn: (e: KvWatchEntry) => void): Promise<void> {
    try {
      for await (const e of it) {
        try {
          fn(e);
        } catch (err) {
          this.d.log.warn({ err, key: e.key }, 'cluster presence entry ignored');
        }
      }
    } catch (err) {
      this.d.log.warn({ err }, 'cluster presence watch ended');
    }
  }

  private beat(): Promise<number> {
    return this.d.kv.put(instanceKey(this.d.instanceId), JSON.stringify({ at: new Date().toISOString() }));
  }

  private onInstanceEntry(e: KvWatchEntry): void {
    const id = e.key.slice('inst.'.length);
    if (id === this.d.instanceId) return;
    if (e.operation !== 'PUT') return this.dead(id);
    // An entry from before this instance started tells only when that instance last spoke.
    if (!this.instances.has(id) && Date.now() - e.created.getTime() > 3 * this.d.heartbeatMs) return;
    const known = this.instances.has(id);
    this.instances.set(id, Date.now());
    if (!known) this.d.onRemoteChange();
  }

  private sweep(): void {
    // After this process stalled (GC, a busy machine), the heartbeats it missed are still queued: no verdict now.
    const now = Date.now();
    const stalled = now - this.lastSweep > 2 * this.d.heartbeatMs;
    this.lastSweep = now;
    if (stalled) return;
    const cutoff = now - 3 * this.d.heartbeatMs;
    for (const [id, at] of this.instances) if (id !== this.d.instanceId && at < cutoff) this.dead(id);
  }

  /** An instance is gone: its calls fail and its devices read as offline until they reconnect somewhere. */
  dead(id: string): void {
    if (id === this.d.instanceId || !this.instances.delete(id)) return;
    this.d.log.warn({ instance: id }, 'cluster instance gone; its devices are offline until they reconnect');
    this.d.onInstanceDead(id);
    this.d.onRemoteChange();
  }

  alive(id: string): boolean {
    return this.instances.has(id);
  }

  private onDeviceEntry(e: KvWatchEntry): void {
    const deviceId = deviceOfKey(e.key);
    if (!deviceId) return;
    const before = this.seen.get(deviceId);
    if (e.operation !== 'PUT') {
      if (before) {
        this.seen.delete(deviceId);
        this.sorted.splice(lowerBound(this.sorted, deviceId), 1);
        this.catalogs.retarget(before.entry.catalogHash, undefined);
      }
      this.d.onRemoteChange();
      return;
    }
    const entry = PresenceEntry.parse(JSON.parse(decoder.decode(e.value)));
    if (!before) this.sorted.splice(lowerBound(this.sorted, deviceId), 0, deviceId);
    this.seen.set(deviceId, { entry, revision: e.revision });
    this.catalogs.retarget(before?.entry.catalogHash, entry.catalogHash);
    if (entry.instance !== this.d.instanceId) this.d.onRemoteChange();
    const mine = this.own.get(deviceId);
    if (entry.instance !== this.d.instanceId && mine !== undefined && e.revision > mine) {
      this.own.delete(deviceId);
      this.d.onTakenOver(deviceId);
    } else if (entry.instance === this.d.instanceId && entry.state !== 'offline' && mine === undefined && !this.writes.has(deviceId)) {
      // Left by an earlier run under this instance id (it died): this start holds no such connection.
      void this.d.kv.update(e.key, JSON.stringify({ ...entry, state: 'offline' }), e.revision).catch(() => undefined);
    }
  }

  /** Every device id the cluster knows (any instance, any state), sorted. */
  ids(): readonly string[] {
    return this.sorted;
  }

  /** The entry for a device held by a live instance other than this one. */
  remote(deviceId: string): SeenPresence | undefined {
    const p = this.seen.get(deviceId);
    return p && p.entry.instance !== this.d.instanceId ? p : undefined;
  }

  /** Devices ready on other live instances, with their catalogs loaded. */
  readyRemote(): Array<{ deviceId: string; catalog: ToolCatalog }> {
    const out: Array<{ deviceId: string; catalog: ToolCatalog }> = [];
    for (const [deviceId, p] of this.seen) {
      const catalog =
        p.entry.state === 'ready' && p.entry.instance !== this.d.instanceId && this.instances.has(p.entry.instance)
          ? this.catalog(p.entry.catalogHash)
          : undefined;
      if (catalog) out.push({ deviceId, catalog });
    }
    return out;
  }

  catalog(hash: string | undefined): ToolCatalog | undefined {
    return this.catalogs.get(hash);
  }

  /** Record this instance's view of a device it holds; queued behind its earlier writes. */
  write(deviceId: string, entry: PresenceEntry, first: boolean, catalog?: ToolCatalog): Promise<void> {
    this.retries.delete(deviceId); // superseded
    const prev = this.writes.get(deviceId) ?? Promise.resolve();
    const next = prev
      .then(() => this.doWrite(deviceId, entry, first, catalog))
      .catch((err: unknown) => {
        this.d.log.warn({ err, deviceId }, 'cluster presence write failed; retried at the next heartbeat');
        if (!this.retries.has(deviceId)) this.retries.set(deviceId, { entry, first, catalog });
      });
    this.writes.set(deviceId, next);
    void next.then(() => {
      if (this.writes.get(deviceId) === next) this.writes.delete(deviceId);
    });
    return next;
  }

  private retry(): void {
    const due = [...this.retries];
    this.retries.clear();
    for (const [deviceId, w] of due) void this.write(deviceId, w.entry, w.first, w.catalog);
  }

  private async doWrite(deviceId: string, entry: PresenceEntry, first: boolean, catalog: ToolCatalog | undefined): Promise<void> {
    if (catalog) await this.catalogs.store(catalog);
    const value = JSON.stringify(entry);
    if (first) {
      // A new connection always wins: the latest put is the newest connection, cluster-wide.
      this.own.set(deviceId, await this.d.kv.put(presenceKey(deviceId), value));
      return;
    }
    const mine = this.own.get(deviceId);
    if (mine === undefined) return; // taken over meanwhile: the newer entry stays
    try {
      const revision = await this.d.kv.update(presenceKey(deviceId), value, mine);
      if (entry.state === 'offline') this.own.delete(deviceId);
      else this.own.set(deviceId, revision);
    } catch (err) {
      if (!(err instanceof JetStreamApiError && err.code === JetStreamApiCodes.StreamWrongLastSequence)) throw err;
      // Someone wrote after us: a newer connection elsewhere. Never overwrite it.
      this.own.delete(deviceId);
    }
  }

  async stop(): Promise<void> {
    if (this.heartbeat) clearInterval(this.heartbeat);
    await Promise.allSettled(this.writes.values());
    for (const s of this.stops) s();
    // Others learn at once (a delete on the watch) instead of after 3 missed heartbeats.
    await this.d.kv.delete(instanceKey(this.d.instanceId)).catch(() => undefined);
  }
}
