import type { ApiCaller } from '../api/auth.js';
import type { Metrics } from '../metrics.js';
import type { ThrottledLog } from '../throttle/throttled-log.js';
import { EVICTABLE_AFTER_MS, type SessionTable, type TableSession } from './session-table.js';

/** The `/mcp` session bounds: in all, per API key, per tenant (all its keys; `tenantShare` of maxSessions unless set). */
export interface SessionLimits {
  maxSessions: number;
  maxSessionsPerKey: number;
  maxSessionsPerTenant: number;
}

export type SessionCap = 'key_limit' | 'tenant_limit' | 'gateway_limit';

/** What a refused initialize is answered. */
export interface SessionRefusal {
  status: 429 | 503;
  message: string;
}

export interface SessionAdmissionDeps<S extends TableSession> {
  sessions: SessionTable<S>;
  limits: SessionLimits;
  metrics: Pick<Metrics, 'mcpRequests' | 'mcpSessionsEvicted'>;
  /** Throttled lines: refusals (warn) and evictions (info), each as many as initializes past a cap. */
  refusals: ThrottledLog;
  evictions: ThrottledLog;
  /** Closes a session; its slot is free when this returns (before any await). */
  close: (id: string, why: string) => void;
}

/** Admission of new `/mcp` sessions: the caps, and the eviction a key at a cap may make of its own sessions. */
export class SessionAdmission<S extends TableSession> {
  constructor(private readonly d: SessionAdmissionDeps<S>) {}

  /**
   * Reserves a slot for a new session of this key (the session takes it over: `SessionTable.add`, or gives it back:
   * `release`), evicting one of the key's own sessions if it must; else says why not.
   */
  admit(fp: string, caller: ApiCaller): SessionRefusal | undefined {
    let cap = this.capReached(fp, caller.tenant);
    if (cap && this.evictFor(fp, cap, caller)) cap = this.capReached(fp, caller.tenant);
    if (cap) return this.refuse(cap, caller);
    this.d.sessions.reserve(fp, caller.tenant);
    return undefined;
  }

  /** Which cap a new session of this key would pass, if any: the key's own, its tenant's, the gateway's. */
  private capReached(fp: string, tenant: string | undefined): SessionCap | undefined {
    const { sessions, limits } = this.d;
    if (sessions.heldBy(fp) >= limits.maxSessionsPerKey) return 'key_limit';
    // (A tenant's share as large as the whole is no bound of its own: the gateway's cap answers.)
    if (limits.maxSessionsPerTenant < limits.maxSessions && sessions.heldByTenant(tenant) >= limits.maxSessionsPerTenant) return 'tenant_limit';
    return sessions.size + sessions.reserved >= limits.maxSessions ? 'gateway_limit' : undefined;
  }

  private limitOf(cap: SessionCap): number {
    const l = this.d.limits;
    return cap === 'key_limit' ? l.maxSessionsPerKey : cap === 'tenant_limit' ? l.maxSessionsPerTenant : l.maxSessions;
  }

  /**
   * At a cap, the key gives up its own least recently used session that no client holds a stream of (session-table.ts):
   * clients that exit without DELETE (the Inspector CLI, mcp-remote, many SDK scripts) left one each, and a key that
   * had run its client `maxSessionsPerKey` times was refused until the idle sweep. Never another key's session, at the
   * tenant's or the total cap either: evicting the tenant's or the gateway's least recently used one would let any key
   * close other keys' (or other tenants') sessions at will (one initialize each, and their next request gets 404), so
   * a key with none to give up is refused.
   */
  private evictFor(fp: string, reason: SessionCap, caller: ApiCaller): boolean {
    const now = Date.now();
    const victim = this.d.sessions.evictable(fp, now - EVICTABLE_AFTER_MS);
    if (!victim) return false;
    this.d.close(victim.id, 'evicted');
    this.d.metrics.mcpSessionsEvicted.inc({ reason });
    this.d.evictions.write(
      { tenant: caller.tenant, reason, limit: this.limitOf(reason), idleMs: now - victim.lastActive },
      'mcp session evicted: the least recently used one of this API key without an open stream, to admit a new one',
      reason,
    );
    return true;
  }

  private refuse(cap: SessionCap, caller: ApiCaller): SessionRefusal {
    const limit = this.limitOf(cap);
    const { metrics, refusals } = this.d;
    if (cap === 'key_limit') {
      metrics.mcpRequests.inc({ outcome: 'session_limit_key' });
      refusals.write({ tenant: caller.tenant, limit }, 'mcp session refused: this API key holds its maximum of sessions', 'session_limit_key');
      return {
        status: 429,
        message: `Too many MCP sessions for this API key (${limit}), all in use; close some (DELETE /mcp) or use the stateless protocol`,
      };
    }
    if (cap === 'tenant_limit') {
      // The tenant's own doing (its keys hold its share), not the gateway's: 429, as for a key.
      metrics.mcpRequests.inc({ outcome: 'session_limit_tenant' });
      refusals.write(
        { tenant: caller.tenant, limit },
        "mcp session refused: this API key's tenant holds its maximum of sessions (mcp.endpoint.maxSessionsPerTenant)",
        'session_limit_tenant',
      );
      return {
        status: 429,
        message: `Too many MCP sessions for this tenant (${limit}, all its API keys together); close some (DELETE /mcp) or use the stateless protocol`,
      };
    }
    metrics.mcpRequests.inc({ outcome: 'session_limit' });
    refusals.write({ limit }, 'mcp session refused: the gateway holds its maximum of sessions', 'session_limit');
    return { status: 503, message: 'Too many MCP sessions; try again later or use the stateless protocol' };
  }
}
