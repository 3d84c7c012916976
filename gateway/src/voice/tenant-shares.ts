import type { Logger } from 'pino';
import type { DeviceTenancy } from '../devices/tenants.js';
import { KeyCounts } from '../throttle/key-counts.js';
import { tenantShare } from '../throttle/tenant-share.js';
import { REFUSAL_LINES, ThrottledLog } from '../throttle/throttled-log.js';
import type { VoiceMetrics } from './metrics.js';

/** Who the sessions of devices without a tenant (the operator's) count against, together. */
const OPERATORS = '\u0000operators';

/** A voice session's place in its tenant's share: released once, whatever ends the session, however often it is called. */
export interface VoiceSlot {
  release(): void;
}

/**
 * Voice sessions per device tenant (devices without one count as one tenant), relay and conversation together, so one
 * tenant's fleet cannot take every session of `voice.maxSessions` (red team 11): `voice.maxSessionsPerTenant`, else
 * three quarters of maxSessions (throttle/tenant-share.ts) once any device has a tenant (its fleet and the devices
 * without one are two parties). Until then, or with a share as large as the whole, only maxSessions bounds.
 */
export class VoiceTenantShares {
  private readonly held = new KeyCounts<string>();
  private tenancy: DeviceTenancy = { tenantOf: () => undefined };
  private readonly share: number;
  private readonly maxSessions: number;
  private readonly configured: number | undefined;
  /** As many lines as hellos past a share (a fleet retrying): bounded (throttle/throttled-log.ts). */
  private readonly refusals: ThrottledLog;

  constructor(
    config: { maxSessions: number; maxSessionsPerTenant?: number | undefined },
    private readonly metrics: Pick<VoiceMetrics, 'sessions'>,
    log: Logger,
  ) {
    this.maxSessions = config.maxSessions;
    this.configured = config.maxSessionsPerTenant;
    this.share = tenantShare(this.maxSessions, this.configured);
    this.refusals = new ThrottledLog(log, 'warn', REFUSAL_LINES);
  }

  useTenancy(tenancy: DeviceTenancy): void {
    this.tenancy = tenancy;
  }

  /** What one tenant may hold now (maxSessions when no share applies). */
  get limit(): number {
    return this.configured !== undefined || (this.tenancy.tenantCount?.() ?? 0) > 0 ? this.share : this.maxSessions;
  }

  /** The tenant's bucket when it holds its share (the session is refused); undefined when a session may open. */
  full(deviceId: string): { tenant: string | undefined; limit: number } | undefined {
    const limit = this.limit;
    if (limit >= this.maxSessions) return undefined; // the gateway's own bound answers
    const tenant = this.tenancy.tenantOf(deviceId);
    return this.held.get(tenant ?? OPERATORS) >= limit ? { tenant, limit } : undefined;
  }

  /**
   * Whether the device's tenant has room for one more session; when not, the refusal is counted
   * (`voxgate_voice_sessions_total{outcome="tenant_full"}`) and logged, and the caller answers the device as for a full pool.
   */
  admits(deviceId: string, transport: 'websocket' | 'udp'): boolean {
    const full = this.full(deviceId);
    if (!full) return true;
    this.metrics.sessions.inc({ transport, outcome: 'tenant_full' });
    this.refusals.write(
      { deviceId, tenant: full.tenant ?? null, maxSessionsPerTenant: full.limit },
      "voice session refused: the device's tenant holds its share of the voice sessions (voice.maxSessionsPerTenant)",
      'tenant_full',
    );
    return false;
  }

  /** Count a session for the device's tenant as of now: a device moved to another tenant later frees the one it took. */
  take(deviceId: string): VoiceSlot {
    const bucket = this.tenancy.tenantOf(deviceId) ?? OPERATORS;
    this.held.add(bucket, 1);
    let released = false;
    return {
      release: () => {
        if (released) return;
        released = true;
        this.held.add(bucket, -1);
      },
    };
  }

  /** Sessions the tenant's devices hold (undefined: the devices without a tenant). */
  heldBy(tenant: string | undefined): number {
    return this.held.get(tenant ?? OPERATORS);
  }
}
