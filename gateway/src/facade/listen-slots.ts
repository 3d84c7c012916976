import type { ServerResponse } from 'node:http';
import type { ApiCaller } from '../api/auth.js';
import type { Metrics } from '../metrics.js';
import type { ThrottledLog } from '../throttle/throttled-log.js';
import type { SessionLimits } from './session-admission.js';
import { count } from './session-table.js';

/** `subscriptions/listen` requests in a body (2026-07-28 clients' change-notification streams, held open). */
export const listensIn = (body: unknown): number => {
  const isListen = (m: unknown) => typeof m === 'object' && m !== null && (m as { method?: unknown }).method === 'subscriptions/listen';
  return Array.isArray(body) ? body.filter(isListen).length : isListen(body) ? 1 : 0;
};

export interface ListenSlotsDeps {
  /** As for sessions: streams one API key, and one tenant with all its keys, may hold open (the SDK bounds all at maxSessions). */
  limits: SessionLimits;
  metrics: Pick<Metrics, 'mcpRequests'>;
  refusals: ThrottledLog;
}

/**
 * The stateless `subscriptions/listen` streams open, per API key and per tenant (undefined: the keys without one).
 * Each is a stream held open: without a bound per key, one key took the SDK's every slot (its own bound, set to
 * `maxSessions`, is global only) and other tenants' clients got "Subscription limit reached"; without one per
 * tenant, a tenant with several keys still could. Separate from the sessions' counts: the SDK holds them apart.
 */
export class ListenSlots {
  private readonly perKey = new Map<string, number>();
  private readonly perTenant = new Map<string | undefined, number>();
  private open = 0;

  constructor(private readonly d: ListenSlotsDeps) {}

  /** Streams open, all keys. */
  get size(): number {
    return this.open;
  }

  /**
   * Takes `n` slots for this request's listens until its response closes; else the message of the 429 it gets
   * (counted, and a throttled line).
   */
  take(fp: string, caller: ApiCaller, n: number, res: ServerResponse): string | undefined {
    const { limits, metrics, refusals } = this.d;
    const tenant = caller.tenant;
    if ((this.perKey.get(fp) ?? 0) + n > limits.maxSessionsPerKey) {
      metrics.mcpRequests.inc({ outcome: 'listen_limit_key' });
      refusals.write(
        { tenant, limit: limits.maxSessionsPerKey },
        'mcp subscriptions/listen refused: this API key holds its maximum of streams',
        'listen_limit_key',
      );
      return `Too many subscriptions/listen streams for this API key (${limits.maxSessionsPerKey}); close some first`;
    }
    if (limits.maxSessionsPerTenant < limits.maxSessions && (this.perTenant.get(tenant) ?? 0) + n > limits.maxSessionsPerTenant) {
      metrics.mcpRequests.inc({ outcome: 'listen_limit_tenant' });
      refusals.write(
        { tenant, limit: limits.maxSessionsPerTenant },
        "mcp subscriptions/listen refused: this API key's tenant holds its maximum of streams (mcp.endpoint.maxSessionsPerTenant)",
        'listen_limit_tenant',
      );
      return `Too many subscriptions/listen streams for this tenant (${limits.maxSessionsPerTenant}, all its API keys together); close some first`;
    }
    this.adjust(fp, tenant, n);
    res.once('close', () => this.adjust(fp, tenant, -n));
    return undefined;
  }

  private adjust(fp: string, tenant: string | undefined, by: number): void {
    this.open += by;
    count(this.perKey, fp, by);
    count(this.perTenant, tenant, by);
  }
}
