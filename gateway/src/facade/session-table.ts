/** What the table reads of a session: whose it is, when it was last used, and whether a client holds a stream of it. */
export interface TableSession {
  keyFingerprint: string;
  /** The key's tenant (undefined: none; all keys without one count as one tenant). */
  tenant?: string | undefined;
  /** When its last request came (ms since the epoch). */
  lastUsed: number;
  transport: {
    hasOpenStream(): boolean;
    /** When a client last let go of one of its streams (0: never). */
    readonly lastStreamClosed: number;
  };
}

/**
 * A session used, or whose stream a client let go of, this recently is not evicted. The SDK clients open their GET
 * stream only after `notifications/initialized` is answered, so a session is stream-less for a moment after its
 * initialize; and a client whose GET stream dropped reconnects within the `retry` hint (1 s). Without this, a burst of
 * initializes from one key would evict the sessions just made, or one reconnecting, before their GET came back.
 */
export const EVICTABLE_AFTER_MS = 5000;

/**
 * The /mcp endpoint's sessions by id, and what each API key and each tenant holds: its sessions plus its initializes
 * in progress (reserved before any await, so a burst cannot overshoot a cap). Kept per key as well as by id so that
 * finding a key's session to evict looks at that key's sessions only (at most `maxSessionsPerKey`), never at another key's.
 */
export class SessionTable<S extends TableSession> {
  private readonly byId = new Map<string, S>();
  private readonly byKey = new Map<string, Map<string, S>>();
  /** Per key: sessions plus reservations. */
  private readonly held = new Map<string, number>();
  /** The same per tenant (undefined: the keys without one). */
  private readonly heldTenant = new Map<string | undefined, number>();
  /** Initializes in progress, all keys. */
  reserved = 0;

  get size(): number {
    return this.byId.size;
  }

  get(id: string): S | undefined {
    return this.byId.get(id);
  }

  values(): IterableIterator<S> {
    return this.byId.values();
  }

  ids(): string[] {
    return [...this.byId.keys()];
  }

  /** Sessions and initializes in progress of one key. */
  heldBy(fp: string): number {
    return this.held.get(fp) ?? 0;
  }

  /** Sessions and initializes in progress of one tenant's keys. */
  heldByTenant(tenant: string | undefined): number {
    return this.heldTenant.get(tenant) ?? 0;
  }

  /** Keys holding a session or a reservation. */
  keysHolding(): number {
    return this.held.size;
  }

  /** Sessions whose client holds a stream of them. */
  streaming(): number {
    let n = 0;
    for (const s of this.byId.values()) if (s.transport.hasOpenStream()) n++;
    return n;
  }

  reserve(fp: string, tenant: string | undefined): void {
    this.reserved++;
    this.adjust(fp, tenant, 1);
  }

  /** An initialize that made no session gives its slot back. */
  release(fp: string, tenant: string | undefined): void {
    this.reserved--;
    this.adjust(fp, tenant, -1);
  }

  /** The session takes over its key's reservation (made with the same tenant). */
  add(id: string, s: S): void {
    this.reserved--;
    this.byId.set(id, s);
    let own = this.byKey.get(s.keyFingerprint);
    if (!own) this.byKey.set(s.keyFingerprint, (own = new Map()));
    own.set(id, s);
  }

  delete(id: string): S | undefined {
    const s = this.byId.get(id);
    if (!s) return undefined;
    this.byId.delete(id);
    const own = this.byKey.get(s.keyFingerprint);
    own?.delete(id);
    if (own?.size === 0) this.byKey.delete(s.keyFingerprint);
    this.adjust(s.keyFingerprint, s.tenant, -1);
    return s;
  }

  /**
   * The key's least recently used session that no client holds a stream of (no GET stream, no POST answer in
   * flight), and not used since `before`: one a client left without DELETE. Only this key's sessions are looked at.
   */
  evictable(fp: string, before: number): { id: string; session: S; lastActive: number } | undefined {
    let found: { id: string; session: S; lastActive: number } | undefined;
    for (const [id, s] of this.byKey.get(fp) ?? []) {
      const lastActive = Math.max(s.lastUsed, s.transport.lastStreamClosed);
      if (lastActive < (found?.lastActive ?? before) && !s.transport.hasOpenStream()) found = { id, session: s, lastActive };
    }
    return found;
  }

  private adjust(fp: string, tenant: string | undefined, by: number): void {
    count(this.held, fp, by);
    count(this.heldTenant, tenant, by);
  }
}

/** Adds `by` to `key`'s count, forgetting a key whose count reaches zero. */
export function count<K>(counts: Map<K, number>, key: K, by: number): void {
  const n = (counts.get(key) ?? 0) + by;
  if (n > 0) counts.set(key, n);
  else counts.delete(key);
}
