import type { Logger } from 'pino';
import { TENANT_PATTERN } from '../config/fields.js';
import type { TenantRule } from '../enrollment/config.js';
import { canSee, type Principal } from '../principal.js';
import { ThrottledLog } from '../throttle/throttled-log.js';
import { SortedIds } from './sorted-ids.js';

/** One document per device that has a tenant: `{tenant}` under the device id. */
export const DEVICE_TENANT_COLLECTION = 'device-tenant';

/** The part of the Store (store/store.ts) used here: devices/ does not import store/ (eslint.arrows.js). */
export interface TenantDocuments {
  put(collection: string, key: string, value: unknown): Promise<void>;
  delete(collection: string, key: string): Promise<boolean>;
  list(collection: string): Promise<Array<{ key: string; value: unknown }>>;
  onChange?(collection: string, fn: (change: { key: string; value: unknown }) => void): () => void;
}

/** What a device told us about itself (at its OTA check). Everything but the id may be missing. */
export interface DeviceFacts {
  deviceId: string;
  clientId?: string | undefined;
  board?: string | undefined;
}

/** The tenant of the first rule whose every matcher matches, if any. */
export function tenantByRules(rules: readonly TenantRule[], f: DeviceFacts): string | undefined {
  for (const r of rules) {
    if (r.macPrefix !== undefined && !f.deviceId.startsWith(r.macPrefix.toLowerCase().replaceAll('-', ':'))) continue;
    if (r.clientIdPrefix !== undefined && !(f.clientId ?? '').startsWith(r.clientIdPrefix)) continue;
    if (r.board !== undefined && f.board !== r.board) continue;
    return r.tenant;
  }
  return undefined;
}

/** What the tenants follow of the device records (records.ts): a rule's tenant is stored once the device is recorded. */
export interface TenantRecords {
  has(deviceId: string): boolean;
  /** A device whose tenant a person set (an operator's PATCH, an approval) counts as named: never forgotten past devices.maxKnown. */
  countAsNamed(fn: (deviceId: string) => boolean): void;
  onRecorded(fn: (deviceId: string) => void): () => void;
  onForgotten(fn: (deviceId: string) => void): () => void;
}

/**
 * Tenants the rules gave device ids the gateway has not recorded (an OTA check, before any connection), held in memory
 * only until the device connects, least recently checked out past this many. Anyone may send OTA checks naming made-up
 * ids: stored at once, each was a row kept for ever and read whole at every start.
 */
export const MAX_UNRECORDED_TENANTS = 10_000;

/** The tenant a device belongs to, if any: what every scoped route asks (a port; see principal.ts canSee). */
export interface DeviceTenancy {
  tenantOf(deviceId: string): string | undefined;
  /**
   * The ids of the tenant's devices (every id `tenantOf` gives that tenant), sorted: a tenant's listing reads these,
   * not the fleet. Read it synchronously. Absent (a port without an index): the listing filters the fleet's pages.
   */
  devicesOf?(tenant: string): readonly string[];
  /** How many tenants have a device (voice/tenant-shares.ts: a tenant's share applies once there is one). */
  tenantCount?(): number;
}

/** Whether `caller` may see and act on the device (an unknown device has no tenant: operators only). */
export function deviceVisible(tenancy: DeviceTenancy, caller: Pick<Principal, 'tenant'>, deviceId: string): boolean {
  return canSee(caller, tenancy.tenantOf(deviceId));
}

/**
 * Which tenant each device belongs to: in memory for every read, written through to the store, and a shared
 * store's changes followed (a cluster). A device gets a tenant at enrollment approval, through
 * `PATCH /v1/devices/{id}`, or from `enrollment.tenantRules` when it has none yet.
 */
export class DeviceTenants implements DeviceTenancy {
  private readonly tenants = new Map<string, string>();
  /** Rules' tenants of ids not recorded yet (memory only, least recently checked first; see MAX_UNRECORDED_TENANTS). */
  private readonly unrecorded = new Map<string, string>();
  /** Devices whose stored tenant a rule gave (`{tenant, rule: true}`): not a person's naming, so it keeps no device. */
  private readonly byRule = new Set<string>();
  /**
   * Per tenant, the ids `tenantOf` gives it (stored and held tenants alike), in id order: a tenant's key pages through
   * these, not the whole fleet. Before, its listing asked the directory for every known device and filtered them (at
   * 50 000 known devices ~125 ms of the event loop per call, however few devices the tenant had).
   */
  private readonly index = new Map<string, SortedIds>();
  private readonly listeners = new Set<() => void>();
  private store: TenantDocuments | undefined;
  private recorded: ((deviceId: string) => boolean) | undefined;
  private readonly maxUnrecorded: number;
  private readonly dropLog: ThrottledLog | undefined;

  constructor(
    private readonly rules: readonly TenantRule[] = [],
    private readonly log?: Logger,
    private readonly o: { maxUnrecorded?: number; metrics?: { deviceTenantsDropped: { inc(): void } } } = {},
  ) {
    this.maxUnrecorded = o.maxUnrecorded ?? MAX_UNRECORDED_TENANTS;
    this.dropLog = log && new ThrottledLog(log, 'warn', { linesPerWindow: 1, windowMs: 60_000 });
  }

  /** Read every mapping once, then follow the changes other instances make (and the device records: followRecords). */
  async attach(store: TenantDocuments, records?: TenantRecords): Promise<void> {
    this.store = store;
    if (records) this.followRecords(records);
    for (const { key, value } of await store.list(DEVICE_TENANT_COLLECTION)) this.apply(key, value);
    store.onChange?.(DEVICE_TENANT_COLLECTION, (c) => {
      this.apply(c.key, c.value);
      this.changed();
    });
  }

  /**
   * Follow the device records: a tenant the rules give an id not recorded yet is held in memory and stored when the
   * device is recorded (it connected); a device forgotten (DELETE, or past devices.maxKnown) loses its tenant with its
   * record, so an id that dials again is a new device, as its record says. Without this (tests), rules' tenants are
   * stored at once and kept.
   */
  followRecords(records: TenantRecords): void {
    this.recorded = (id) => records.has(id);
    records.countAsNamed((id) => this.tenants.has(id) && !this.byRule.has(id));
    // Checked before the async step: every new device of a fleet passes here, almost none with a tenant held.
    records.onRecorded((id) => {
      if (this.unrecorded.has(id)) void this.promote(id);
    });
    records.onForgotten((id) => void this.forgotten(id));
  }

  tenantOf(deviceId: string): string | undefined {
    return this.tenants.get(deviceId) ?? this.unrecorded.get(deviceId);
  }

  devicesOf(tenant: string): readonly string[] {
    return this.index.get(tenant)?.sorted() ?? [];
  }

  tenantCount(): number {
    return this.index.size;
  }

  /** Called after every change of `tenants` or `unrecorded` for the device: its place in the index follows `tenantOf`. */
  private reindex(deviceId: string, was: string | undefined): void {
    const now = this.tenantOf(deviceId);
    if (now === was) return;
    if (was !== undefined) {
      const ids = this.index.get(was);
      ids?.delete(deviceId);
      if (ids?.size === 0) this.index.delete(was);
    }
    if (now !== undefined) {
      let ids = this.index.get(now);
      if (!ids) this.index.set(now, (ids = new SortedIds()));
      ids.add(deviceId);
    }
  }

  /** Rules' tenants held for ids not recorded yet (memory only). */
  get unrecordedSize(): number {
    return this.unrecorded.size;
  }

  /** The tenant the rules give a device with these facts (whether or not it has one now). */
  ruleFor(facts: DeviceFacts): string | undefined {
    return tenantByRules(this.rules, facts);
  }

  /** Set (or, with null, clear) a device's tenant. */
  async set(deviceId: string, tenant: string | null, o: { byRule?: boolean } = {}): Promise<void> {
    if (tenant === null) await this.store?.delete(DEVICE_TENANT_COLLECTION, deviceId);
    else await this.store?.put(DEVICE_TENANT_COLLECTION, deviceId, o.byRule ? { tenant, rule: true } : { tenant });
    const was = this.tenantOf(deviceId);
    if (tenant === null) this.tenants.delete(deviceId);
    else this.tenants.set(deviceId, tenant);
    if (o.byRule && tenant !== null) this.byRule.add(deviceId);
    else this.byRule.delete(deviceId);
    this.unrecorded.delete(deviceId);
    this.reindex(deviceId, was);
    this.log?.info({ deviceId, tenant }, 'device tenant set');
    this.changed();
  }

  /** A device without a tenant gets the one the rules name; one that has a tenant keeps it. Returns its tenant. */
  async assignByRules(facts: DeviceFacts): Promise<string | undefined> {
    const id = facts.deviceId;
    const now = this.tenants.get(id);
    if (now !== undefined) return now;
    const held = this.unrecorded.get(id);
    if (held !== undefined) {
      // Checked again: the most recently checked are the last to go.
      this.unrecorded.delete(id);
      this.unrecorded.set(id, held);
      return held;
    }
    const tenant = this.ruleFor(facts);
    if (tenant === undefined) return undefined;
    if (this.recorded && !this.recorded(id)) {
      this.hold(id, tenant);
      this.changed();
    } else await this.set(id, tenant, { byRule: true });
    return tenant;
  }

  /** A rule's tenant for an id not recorded: in memory, the least recently checked dropped past the bound. */
  private hold(deviceId: string, tenant: string): void {
    const was = this.tenantOf(deviceId);
    this.unrecorded.set(deviceId, tenant);
    this.reindex(deviceId, was);
    let dropped = 0;
    while (this.unrecorded.size > this.maxUnrecorded) {
      this.dropHeld(this.unrecorded.keys().next().value!);
      dropped++;
      this.o.metrics?.deviceTenantsDropped.inc();
    }
    if (dropped > 0)
      this.dropLog?.write(
        { max: this.maxUnrecorded },
        'tenants that rules gave device ids not recorded (OTA checks, no connection) past the bound: the least recently checked dropped (one line a minute); such a device gets its tenant again at its next check',
      );
  }

  /** A rule's tenant held for an id not recorded goes (the id is then nobody's, or its stored tenant's). */
  private dropHeld(deviceId: string): boolean {
    const was = this.tenantOf(deviceId);
    const had = this.unrecorded.delete(deviceId);
    this.reindex(deviceId, was);
    return had;
  }

  /** The device was recorded (it connected, here or on another instance): the tenant its rule gave it is stored now. */
  private async promote(deviceId: string): Promise<void> {
    const tenant = this.unrecorded.get(deviceId);
    if (tenant === undefined) return;
    if (this.tenants.has(deviceId)) return void this.dropHeld(deviceId);
    try {
      await this.set(deviceId, tenant, { byRule: true });
    } catch (err) {
      this.log?.warn({ err, deviceId }, 'could not store the tenant a rule gave a device; it is held in memory until its next check');
    }
  }

  /**
   * An id no longer known to enrollment (its enrollment dropped past enrollment.maxUnconnected) and not recorded: its
   * tenant goes too, or approving made-up ids one after another would leave a row per id.
   */
  gone(deviceId: string): void {
    if (this.recorded?.(deviceId) !== false) return;
    void this.forgotten(deviceId);
  }

  /** The device's record was forgotten: its tenant goes too (here; a shared store tells the other instances). */
  private async forgotten(deviceId: string): Promise<void> {
    const had = this.dropHeld(deviceId);
    if (!this.tenants.has(deviceId)) {
      if (had) this.changed();
      return;
    }
    try {
      await this.set(deviceId, null);
    } catch (err) {
      this.log?.warn({ err, deviceId }, 'could not clear the tenant of a forgotten device');
    }
  }

  /** Called after any device's tenant changed (here or, with a shared store, elsewhere). */
  onChange(fn: () => void): () => void {
    this.listeners.add(fn);
    return () => this.listeners.delete(fn);
  }

  private changed(): void {
    for (const fn of this.listeners) {
      try {
        fn();
      } catch (err) {
        this.log?.error({ err }, 'device tenant listener failed');
      }
    }
  }

  /** The store is outside the process: only a well-formed tenant is believed. */
  private apply(key: string, value: unknown): void {
    const doc = value as { tenant?: unknown; rule?: unknown } | undefined;
    const tenant = doc?.tenant;
    const was = this.tenantOf(key);
    if (typeof tenant === 'string' && TENANT_PATTERN.test(tenant)) this.tenants.set(key, tenant);
    else this.tenants.delete(key);
    this.reindex(key, was);
    if (this.tenants.has(key) && doc?.rule === true) this.byRule.add(key);
    else this.byRule.delete(key);
  }
}
