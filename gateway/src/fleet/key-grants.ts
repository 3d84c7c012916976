import type { Logger } from 'pino';
import { isKeyPrincipal } from '../principal.js';
import { ThrottledLog } from '../throttle/throttled-log.js';

/** The error code of lasting work (a queued call, a job, a schedule) whose API key was removed or given another tenant. */
export const KEY_REVOKED = 'KEY_REVOKED';

/**
 * Who made a piece of lasting work: the principal of its API key (api/auth.ts principalOf, a fingerprint: the key
 * itself is stored nowhere) and the key's tenant then. Records from before this was kept have no principal.
 */
export interface WorkOwner {
  principal?: string | undefined;
  tenant?: string | undefined;
}

/** `{principal?, tenant?}` with the absent fields left out (documents in the store carry no `undefined`). */
export function ownerFields(o: WorkOwner | undefined): { principal?: string; tenant?: string } {
  return { ...(o?.principal !== undefined ? { principal: o.principal } : {}), ...(o?.tenant !== undefined ? { tenant: o.tenant } : {}) };
}

/**
 * The API keys configured now, as their principals and tenants, and the rule that work runs only under the grant
 * it was made with: its key is still configured, with the same tenant (or, like it, none). A key moved to another
 * tenant is a different grant: the new tenant's holder could not see the old work (nor cancel it), and an operator
 * key given a tenant has lost the operator's reach that a job or schedule needs.
 *
 * Work without a key principal keeps running: the operator's own paths that hold no key, a device's own
 * conversation (`device:<id>`), and records written before the principal was kept. Those last are not failed at
 * upgrade (that would cancel every queued call of every key at once); their own TTLs end them.
 */
export class KeyGrants {
  private readonly log: ThrottledLog | undefined;

  /** `keys`: principal → tenant (undefined: an operator key). Undefined: no key is ever revoked (tests' rigs). */
  constructor(
    private readonly keys: ReadonlyMap<string, string | undefined> | undefined,
    log?: Logger,
  ) {
    // One line per key per minute: a removed key may leave thousands of queued calls, each settled on its own.
    this.log = log && new ThrottledLog(log, 'warn', { linesPerWindow: 1, windowMs: 60_000, maxKeys: 256 });
  }

  /** Why `owner`'s work may no longer run (a sentence for the record's error), or undefined when it may. */
  revoked(owner: WorkOwner | undefined): string | undefined {
    if (!this.keys || !isKeyPrincipal(owner?.principal)) return undefined;
    if (!this.keys.has(owner.principal)) return 'the API key that created it is no longer configured; it was not run';
    if (this.keys.get(owner.principal) !== owner.tenant) return 'the API key that created it now has another tenant (apiKeyTenants); it was not run';
    return undefined;
  }

  /** The warning that work was not run (throttled per key): names the key by its fingerprint, never the key. */
  note(what: 'call' | 'job' | 'schedule', owner: WorkOwner, fields: Record<string, unknown>): void {
    this.log?.write(
      { ...fields, keyPrincipal: owner.principal, code: KEY_REVOKED },
      `${what} of a removed or re-tenanted API key settled, not run`,
      owner.principal,
    );
  }
}
