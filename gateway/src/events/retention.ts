import type sqlite from 'node-sqlite3-wasm';

/**
 * Per-tenant retention for the embedded event history (history-sqlite.ts): each tenant's rows are counted in
 * memory, so that one tenant whose devices flood events loses its own oldest rows, never another tenant's.
 * Devices without a tenant (and fleet-wide events) are one more bucket, keyed ''.
 *
 * Eviction walks one bucket's rows in rowid order from `from`, a lower bound on that bucket's oldest row kept
 * in memory and moved past every row it deletes: each walk starts where the last one stopped, so over time a
 * bucket's walks pass each row of the table at most once (the cost of stepping over other tenants' rows is
 * paid once, not per batch). The `tenant` column has no index on purpose: an index is one more B-tree insert
 * per row on the fleet's hot path, and eviction is the only reader.
 */
export interface Bucket {
  /** Rows of this bucket in the table. */
  count: number;
  /** No row of this bucket has a seq below this. */
  from: number;
}

/** The bucket key of a tenant: '' for none (a tenant is never empty: config/fields.ts TENANT_PATTERN). */
export const bucketOf = (tenant: string | undefined): string => tenant ?? '';
/** The column's value for a bucket key: NULL for the untenanted bucket. */
const columnOf = (key: string): string | null => (key === '' ? null : key);

export class TenantBuckets {
  readonly buckets = new Map<string, Bucket>();
  /** No row inserted from now on has a seq below this (AUTOINCREMENT never reuses one): where a new bucket's walks start. */
  floor = 0;
  private lastOf: sqlite.Statement | undefined;
  private deleteRange: sqlite.Statement | undefined;
  private deleteOldest: sqlite.Statement | undefined;

  constructor(private readonly db: sqlite.Database) {}

  /** Count every bucket once, at open (one scan of the table). */
  load(): void {
    this.buckets.clear();
    const rows = this.db.all('SELECT tenant, count(*) AS n, min(seq) AS lo FROM events GROUP BY tenant') as Array<{
      tenant: string | null;
      n: number;
      lo: number;
    }>;
    for (const r of rows) this.buckets.set(r.tenant ?? '', { count: Number(r.n), from: Number(r.lo) });
    const top = this.db.get("SELECT seq FROM sqlite_sequence WHERE name = 'events'") as { seq: number } | null;
    this.floor = Number(top?.seq ?? 0) + 1;
  }

  /** The bucket of `key`, made when missing (a new bucket's rows all come at or after `floor`). */
  bucket(key: string): Bucket {
    let b = this.buckets.get(key);
    if (!b) this.buckets.set(key, (b = { count: 0, from: this.floor }));
    return b;
  }

  /** Buckets that hold rows (an emptied bucket is dropped: tenants come and go). */
  nonEmpty(): number {
    let n = 0;
    for (const b of this.buckets.values()) if (b.count > 0) n++;
    return n;
  }

  /** Delete the `n` oldest rows of bucket `key`; returns how many went. Inside the caller's transaction. */
  evict(key: string, n: number): number {
    const b = this.buckets.get(key);
    if (!b || n <= 0) return 0;
    if (this.buckets.size === 1) {
      // The only bucket (a gateway without tenants): its oldest are the table's, one statement as before.
      this.deleteOldest ??= this.db.prepare('DELETE FROM events WHERE seq IN (SELECT seq FROM events ORDER BY seq LIMIT ?)');
      const gone = this.deleteOldest.run([n]).changes;
      this.forget(key, gone);
      return gone;
    }
    const tenant = columnOf(key);
    this.lastOf ??= this.db.prepare('SELECT max(seq) AS last FROM (SELECT seq FROM events WHERE seq >= ? AND tenant IS ? ORDER BY seq LIMIT ?)');
    this.deleteRange ??= this.db.prepare('DELETE FROM events WHERE seq >= ? AND seq <= ? AND tenant IS ?');
    const last = (this.lastOf.get([b.from, tenant, n]) as { last: number | null } | null)?.last;
    if (last === null || last === undefined) {
      b.count = 0; // the walk found none: the count was stale (cannot happen while this log is the table's only writer)
      return 0;
    }
    const gone = this.deleteRange.run([b.from, Number(last), tenant]).changes;
    b.count = Math.max(0, b.count - gone);
    b.from = Number(last) + 1;
    if (b.count === 0) this.buckets.delete(key);
    return gone;
  }

  /** Rows of the given buckets deleted some other way (age retention): counts follow. */
  forget(key: string, n: number): void {
    const b = this.buckets.get(key);
    if (!b) return;
    b.count = Math.max(0, b.count - n);
    if (b.count === 0) this.buckets.delete(key);
  }

  /** A copy to restore when a transaction rolls back. */
  snapshot(): { floor: number; buckets: Map<string, Bucket> } {
    return { floor: this.floor, buckets: new Map([...this.buckets].map(([k, b]) => [k, { ...b }])) };
  }

  restore(s: { floor: number; buckets: Map<string, Bucket> }): void {
    this.floor = s.floor;
    this.buckets.clear();
    for (const [k, b] of s.buckets) this.buckets.set(k, b);
  }

  close(): void {
    for (const s of [this.lastOf, this.deleteRange, this.deleteOldest]) if (s && !s.isFinalized && this.db.isOpen) s.finalize();
    this.lastOf = this.deleteRange = this.deleteOldest = undefined;
  }
}

/**
 * How many rows each bucket gives up so that `excess` rows go, largest buckets first ("water-filling"): the
 * largest are lowered to a common level before a smaller one loses anything. A tenant flooding events is the
 * largest, so it pays; with one bucket this is the plain oldest-first bound.
 */
export function largestFirst(counts: ReadonlyMap<string, number>, excess: number): Map<string, number> {
  const out = new Map<string, number>();
  if (excess <= 0) return out;
  const sorted = [...counts].filter(([, c]) => c > 0).sort((a, b) => b[1] - a[1]);
  let sum = 0;
  let k = 0;
  // The smallest k whose top k buckets, lowered to the next one's count (0 past the last), free `excess` rows.
  while (k < sorted.length) {
    sum += sorted[k]![1];
    k++;
    const next = k < sorted.length ? sorted[k]![1] : 0;
    if (sum - k * next >= excess) break;
  }
  const level = Math.max(0, Math.floor((sum - excess) / k));
  let surplus = -excess;
  for (let i = 0; i < k; i++) {
    const take = Math.max(0, sorted[i]![1] - level);
    out.set(sorted[i]![0], take);
    surplus += take;
  }
  // Lowering to a whole level may free up to k-1 rows more than asked: give them back, one bucket each.
  for (let i = 0; i < k && surplus > 0; i++) {
    const key = sorted[i]![0];
    if (out.get(key)! > 0) {
      out.set(key, out.get(key)! - 1);
      surplus--;
    }
  }
  return out;
}
