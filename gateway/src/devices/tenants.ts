import type { Logger } from 'pino';
import { TENANT_PATTERN } from '../config/fields.js';
import type { TenantRule } from '../enrollment/config.js';
import { canSee, type Principal } from '../principal.js';

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

/** The tenant a device belongs to, if any: what every scoped route asks (a port; see principal.ts canSee). */
export interface DeviceTenancy {
  tenantOf(deviceId: string): string | undefined;
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
  private readonly listeners = new Set<() => void>();
  private store: TenantDocuments | undefined;

  constructor(
    private readonly rules: readonly TenantRule[] = [],
    private readonly log?: Logger,
  ) {}

  /** Read every mapping once, then follow the changes other instances make. */
  async attach(store: TenantDocuments): Promise<void> {
    this.store = store;
    for (const { key, value } of await store.list(DEVICE_TENANT_COLLECTION)) this.apply(key, value);
    store.onChange?.(DEVICE_TENANT_COLLECTION, (c) => {
      this.apply(c.key, c.value);
      this.changed();
    });
  }

  tenantOf(deviceId: string): string | undefined {
    return this.tenants.get(deviceId);
  }

  /** The tenant the rules give a device with these facts (whether or not it has one now). */
  ruleFor(facts: DeviceFacts): string | undefined {
    return tenantByRules(this.rules, facts);
  }

  /** Set (or, with null, clear) a device's tenant. */
  async set(deviceId: string, tenant: string | null): Promise<void> {
    if (tenant === null) {
      await this.store?.delete(DEVICE_TENANT_COLLECTION, deviceId);
      this.tenants.delete(deviceId);
    } else {
      await this.store?.put(DEVICE_TENANT_COLLECTION, deviceId, { tenant });
      this.tenants.set(deviceId, tenant);
    }
    this.log?.info({ deviceId, tenant }, 'device tenant set');
    this.changed();
  }

  /** A device without a tenant gets the one the rules name; one that has a tenant keeps it. Returns its tenant. */
  async assignByRules(facts: DeviceFacts): Promise<string | undefined> {
    const now = this.tenants.get(facts.deviceId);
    if (now !== undefined) return now;
    const tenant = this.ruleFor(facts);
    if (tenant !== undefined) await this.set(facts.deviceId, tenant);
    return tenant;
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
    const tenant = (value as { tenant?: unknown } | undefined)?.tenant;
    if (typeof tenant === 'string' && TENANT_PATTERN.test(tenant)) this.tenants.set(key, tenant);
    else this.tenants.delete(key);
  }
}
