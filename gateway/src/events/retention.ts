import type sqlite from 'node-sqlite3-wasm';

/**
 * Per-tenant retention for the embedded event history (history-sqlite.ts): each tenant's rows, and the bytes of their
 * data, are counted in memory, so that one tenant whose devices flood events (many, or large) loses its own oldest
 * rows, never another tenant's. Devices without a tenant (and fleet-wide events) are one more bucket, keyed ''.
 *
 * Eviction walks one bucket's rows in rowid order from `from`, a lower bound on that bucket's oldest row kept
 * in memory and moved past every row it deletes: each walk starts where the last one stopped, so over time a
 * bucket's walks pass each row of the table at most once (the cost of stepping over other tenants' rows is
 * paid once, not per batch). The `tenant` column has no index on purpose: an index is one more B-tree insert
 * per row on the fleet's hot path, and eviction is the only reader. A row's bytes are `octet_length(data)`, the
 * JSON text's UTF-8 bytes as stored (SQLite reads it from the record header, not the text): what the insert bound.
 */
export interface Bucket {
  /** Rows of this bucket in the table. */
  count: number;
  /** Bytes of those rows' data. */
  bytes: number;
  /** No row of this bucket has a seq below this. */
  from: number;
}

/** What an eviction deleted. */
export interface Freed {
  rows: number;
  bytes: number;
}

/** The bounds retention keeps (events.history); a share unset is no share below the total. */
export interface RetentionBounds {
  maxEvents: number;
  maxEventsPerTenant?: number | undefined;
  maxBytes?: number | undefined;
  maxBytesPerTenant?: number | undefined;
}

/** Which bound an eviction kept (`voxgate_event_history_evicted_total{reason}`). */
export type EvictionReason = 'age' | 'events' | 'events_per_tenant' | 'bytes' | 'bytes_per_tenant';

/** Told of every eviction that deleted rows: which bound, whose rows (the bucket key), how many. */
export type OnEvicted = (reason: EvictionReason, key: string, freed: Freed) => void;

/** The bucket key of a tenant: '' for none (a tenant is never empty: config/fields.ts TENANT_PATTERN). */
export const bucketOf = (tenant: string | undefined): string => tenant ?? '';
/** The column's value for a bucket key: NULL for the untenanted bucket. */
const columnOf = (key: string): string | null => (key === '' ? null : key);

/** A walk's aggregate row: the last seq it reached, rows and bytes (null/0 when it found none). */
type Walked = { last: number | null; n: number; bytes: number | null } | null;

/**
 * The walks over the oldest rows from a seq, at most LIMIT of them: with the bucket's tenant, or every row (`all`: one
 * bucket). A byte walk stops at the row whose bytes reach its bound: a running sum over at most LIMIT rows (a window
 * over the whole bucket would read all of it). Sizes are taken in the innermost query, where SQLite reads them without
 * the text.
 */
const oldest = (all: boolean) => `SELECT seq, octet_length(data) AS b FROM events WHERE seq >= ?${all ? '' : ' AND tenant IS ?'} ORDER BY seq LIMIT ?`;
const walkRows = (all: boolean) => `SELECT max(seq) AS last, count(*) AS n, sum(b) AS bytes FROM (${oldest(all)})`;
const walkBytes = (all: boolean) =>
  `SELECT max(seq) AS last, count(*) AS n, sum(b) AS bytes FROM (SELECT seq, b, sum(b) OVER (ORDER BY seq ROWS UNBOUNDED PRECEDING) - b AS before FROM (${oldest(all)})) WHERE before < ?`;
const WALKS = {
  rows: { all: walkRows(true), tenant: walkRows(false) },
  bytes: { all: walkBytes(true), tenant: walkBytes(false) },
} as const;
const DELETE_RANGE = {
  all: 'DELETE FROM events WHERE seq >= ? AND seq <= ?',
  tenant: 'DELETE FROM events WHERE seq >= ? AND seq <= ? AND tenant IS ?',
} as const;
/**
 * Rows older than a time: the run from the table's first row up to the first row at or after it; their rows, bytes and
 * last seq, per tenant (with one bucket, summed: no tenant read).
 */
const AGED = 'FROM events WHERE seq < coalesce((SELECT seq FROM events WHERE at >= ? ORDER BY seq LIMIT 1), (SELECT max(seq) + 1 FROM events))';
const AGED_OF = {
  all: `SELECT NULL AS tenant, count(*) AS n, sum(octet_length(data)) AS b, max(seq) AS last ${AGED}`,
  tenant: `SELECT tenant, count(*) AS n, sum(octet_length(data)) AS b, max(seq) AS last ${AGED} GROUP BY tenant`,
} as const;
const NONE: Freed = { rows: 0, bytes: 0 };

export class TenantBuckets {
  readonly buckets = new Map<string, Bucket>();
  /** Rows in the table, and the bytes of their data: the sums of the buckets'. */
  rows = 0;
  bytes = 0;
  /** No row inserted from now on has a seq below this (AUTOINCREMENT never reuses one): where a new bucket's walks start. */
  floor = 0;
  private readonly statements = new Map<string, sqlite.Statement>();

  constructor(private readonly db: sqlite.Database) {}

  /** Count every bucket's rows and bytes once, at open (one scan of the table). */
  load(): void {
    this.buckets.clear();
    this.rows = this.bytes = 0;
    const sql = 'SELECT tenant, count(*) AS n, min(seq) AS lo, sum(octet_length(data)) AS b FROM events GROUP BY tenant';
    const rows = this.db.all(sql) as Array<{ tenant: string | null; n: number; lo: number; b: number }>;
    for (const r of rows) {
      const b = { count: Number(r.n), bytes: Number(r.b), from: Number(r.lo) };
      this.buckets.set(r.tenant ?? '', b);
      this.rows += b.count;
      this.bytes += b.bytes;
    }
    const top = this.db.get("SELECT seq FROM sqlite_sequence WHERE name = 'events'") as { seq: number } | null;
    this.floor = Number(top?.seq ?? 0) + 1;
  }

  /** The bucket of `key`, made when missing (a new bucket's rows all come at or after `floor`). */
  bucket(key: string): Bucket {
    let b = this.buckets.get(key);
    if (!b) this.buckets.set(key, (b = { count: 0, bytes: 0, from: this.floor }));
    return b;
  }

  /**
   * Delete what is past the bounds, inside the caller's transaction: each bucket's oldest beyond its share (rows, then
   * bytes), then, beyond the totals, the oldest of the buckets holding the most (never a smaller bucket's while a larger
   * one has rows to give: one tenant's flood of events, or of large ones, cannot push another's history out).
   */
  retain(o: RetentionBounds, evicted: OnEvicted): void {
    const { maxEventsPerTenant: perRows, maxBytesPerTenant: perBytes } = o;
    if (perRows !== undefined || perBytes !== undefined)
      for (const [key, b] of [...this.buckets]) {
        if (perRows !== undefined && b.count > perRows) report(evicted, 'events_per_tenant', key, this.evict(key, b.count - perRows));
        if (perBytes !== undefined && b.bytes > perBytes) report(evicted, 'bytes_per_tenant', key, this.evictBytes(key, b.bytes - perBytes));
      }
    const excess = this.rows - o.maxEvents;
    if (excess > 0) for (const [key, n] of largestFirst(this.sizes('count'), excess)) report(evicted, 'events', key, this.evict(key, n));
    const over = this.bytes - (o.maxBytes ?? Infinity);
    if (over > 0) for (const [key, n] of largestFirst(this.sizes('bytes'), over)) report(evicted, 'bytes', key, this.evictBytes(key, n));
  }

  /** Delete the `n` oldest rows of bucket `key`. */
  evict(key: string, n: number): Freed {
    return this.take(key, n, Infinity);
  }

  /** Delete the oldest rows of bucket `key` until at least `bytes` of data went (the last one may take it past). */
  evictBytes(key: string, bytes: number): Freed {
    const freed = { ...NONE };
    // Rows a walk reads: what the bucket's mean row says the rest needs (every row read past the one that reaches it is
    // read for nothing: a large row's tenant is on an overflow page), at least 2^i on the i-th walk (oldest rows smaller
    // than the mean: the walks still end in a few).
    for (let floor = 1; freed.bytes < bytes; floor *= 2) {
      const b = this.buckets.get(key);
      if (!b) break;
      const rows = Math.max(floor, Math.ceil(((bytes - freed.bytes) * b.count) / Math.max(1, b.bytes)));
      const got = this.take(key, Math.min(rows, b.count), bytes - freed.bytes);
      if (got.rows === 0) break;
      freed.rows += got.rows;
      freed.bytes += got.bytes;
    }
    return freed;
  }

  /**
   * Delete the oldest run of rows older than `cutoff` (epoch ms), up to the first row at or after it (age retention);
   * their buckets' counts follow. Calls `evicted` once per bucket that lost rows.
   */
  evictAged(cutoff: number, evicted: OnEvicted): void {
    // One bucket (the usual case): the rows' sums are enough. Several: which buckets the rows were of.
    const which = this.buckets.size > 1 ? 'tenant' : 'all';
    const groups = this.statement(AGED_OF[which]).all([cutoff]) as Array<{ tenant: string | null; n: number; b: number | null; last: number | null }>;
    let last = 0;
    for (const g of groups) if (g.last !== null && Number(g.n) > 0) last = Math.max(last, Number(g.last));
    if (last === 0) return;
    this.statement('DELETE FROM events WHERE seq <= ?').run([last]);
    const only = which === 'all' ? [...this.buckets.keys()][0] : undefined;
    for (const g of groups) {
      if (!(Number(g.n) > 0)) continue;
      const key = only ?? bucketOf(g.tenant ?? undefined);
      const freed = { rows: Number(g.n), bytes: Number(g.b ?? 0) };
      this.forget(key, freed);
      report(evicted, 'age', key, freed);
    }
  }

  /** A copy to restore when a transaction rolls back. */
  snapshot(): BucketsSnapshot {
    return { floor: this.floor, rows: this.rows, bytes: this.bytes, buckets: new Map([...this.buckets].map(([k, b]) => [k, { ...b }])) };
  }

  restore(s: BucketsSnapshot): void {
    ({ floor: this.floor, rows: this.rows, bytes: this.bytes } = s);
    this.buckets.clear();
    for (const [k, b] of s.buckets) this.buckets.set(k, b);
  }

  close(): void {
    for (const s of this.statements.values()) if (!s.isFinalized && this.db.isOpen) s.finalize();
    this.statements.clear();
  }

  /**
   * Delete the oldest rows of bucket `key`: at most `rows` of them, stopping at the one whose data reaches `bytes`.
   * With one bucket the walk reads no tenant (the column comes after the data: a large row's is on an overflow page).
   */
  private take(key: string, rows: number, bytes: number): Freed {
    const b = this.buckets.get(key);
    if (!b || rows <= 0 || bytes <= 0) return NONE;
    const which = this.buckets.size === 1 ? 'all' : 'tenant';
    const tenant = which === 'all' ? [] : [columnOf(key)];
    const walk = bytes === Infinity ? WALKS.rows : WALKS.bytes;
    const params = [b.from, ...tenant, rows, ...(bytes === Infinity ? [] : [bytes])];
    const walked = this.statement(walk[which]).get(params) as Walked;
    const last = walked?.last;
    if (last === null || last === undefined) {
      // The walk found none: the count was stale (cannot happen while this log is the table's only writer).
      this.forget(key, { rows: b.count, bytes: b.bytes });
      return NONE;
    }
    const gone = this.statement(DELETE_RANGE[which]).run([b.from, Number(last), ...tenant]).changes;
    const freed = { rows: gone, bytes: Number(walked?.bytes ?? 0) };
    b.from = Number(last) + 1;
    this.forget(key, freed);
    return freed;
  }

  /** Rows of bucket `key` deleted: counts follow (an emptied bucket is dropped: tenants come and go). */
  private forget(key: string, freed: Freed): void {
    const b = this.buckets.get(key);
    if (!b) return;
    const rows = Math.min(b.count, freed.rows);
    const bytes = Math.min(b.bytes, freed.bytes);
    b.count -= rows;
    b.bytes -= bytes;
    this.rows -= rows;
    this.bytes -= bytes;
    if (b.count > 0) return;
    this.bytes -= b.bytes; // no row left: none of its bytes either
    b.bytes = 0;
    this.buckets.delete(key);
  }

  /** Each bucket's rows or bytes, for largestFirst. */
  private sizes(of: 'count' | 'bytes'): Map<string, number> {
    return new Map([...this.buckets].map(([k, b]) => [k, b[of]]));
  }

  /** A statement prepared once per text, finalized at close. */
  private statement(sql: string): sqlite.Statement {
    let s = this.statements.get(sql);
    if (!s) this.statements.set(sql, (s = this.db.prepare(sql)));
    return s;
  }
}

export interface BucketsSnapshot {
  floor: number;
  rows: number;
  bytes: number;
  buckets: Map<string, Bucket>;
}

function report(evicted: OnEvicted, reason: EvictionReason, key: string, freed: Freed): void {
  if (freed.rows > 0) evicted(reason, key, freed);
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
