import type sqlite from 'node-sqlite3-wasm';
import type { Logger } from 'pino';
import type { Metrics } from '../metrics.js';
import { ThrottledLog } from '../throttle/throttled-log.js';
import { EVENT_TYPES, type EventType, type GatewayEvent, type Replay } from './bus.js';
import type { EventsConfig } from './config.js';
import { formatCursor, historyMaxAgeMs, parseCursor, type EventLog, type HistoryPage, type HistoryQuery } from './history.js';
import { bucketOf, TenantBuckets, type Bucket, type EvictionReason, type Freed, type OnEvicted } from './retention.js';

export interface SqliteEventLogOptions {
  /**
   * Events kept at most, and for at most `maxAgeMs`. Past `maxEvents`, the tenant holding the most events loses its
   * oldest first (retention.ts largestFirst); past `maxEventsPerTenant`, a tenant loses its own oldest.
   */
  maxEvents: number;
  maxEventsPerTenant?: number | undefined;
  /**
   * Bytes of the events' data kept at most (the JSON text as stored; unset: no bound), the same way: past `maxBytes`
   * the tenant holding the most bytes loses its oldest first; past `maxBytesPerTenant`, a tenant loses its own oldest.
   */
  maxBytes?: number | undefined;
  maxBytesPerTenant?: number | undefined;
  /**
   * The tenant of an event that does not carry one (GatewayEvent.tenant: a bus with the devices' tenants records it at
   * publish, and the gateway's does): its device's, when written. Unset: none.
   */
  tenantOf?: ((deviceId: string) => string | undefined) | undefined;
  maxAgeMs: number;
  /** Events wait at most this long before they are written, or until `batchSize` of them wait. */
  flushMs: number;
  batchSize: number;
  /** At most this many events are replayed after a `Last-Event-ID` (the bus's ring size); more: resync. */
  replayLimit: number;
  log?: Logger | undefined;
  metrics?: Pick<Metrics, 'eventHistory' | 'eventHistorySize' | 'eventHistoryBytes' | 'eventHistoryEvicted'> | undefined;
  /** The clock retention by age reads (tests inject one). */
  now?: () => number;
  /** Places of seq one tenant's page reads at most (tests; default SCAN_WINDOW). */
  scanWindow?: number | undefined;
}

/** How often age retention runs when no event arrives to trigger it. */
const PRUNE_MS = 60_000;
/** Events waiting while writes fail (disk full): past this many batches, the oldest are dropped. */
const MAX_PENDING_BATCHES = 20;
/** A stored event's data past this is replaced (the bus already bounds what devices send: 8 KiB). */
const MAX_DATA_CHARS = 64 * 1024;
const KNOWN_TYPES: ReadonlySet<string> = new Set(EVENT_TYPES);
/**
 * Places of seq one tenant's page reads at most: its rows may be few among many. Without a bound, a key of a tenant with
 * no events read the whole table per request (~200 ms of the event loop at 100 000 events, a tenth of them 8 KiB; ~16 ms
 * for this window).
 */
const SCAN_WINDOW = 10_000;
/** Rows per insert statement, largest first (6 bound values a row: far below SQLite's 32 766). */
const INSERT_CHUNKS = [32, 8, 1] as const;

interface Row {
  seq: number;
  id: string;
  type: string;
  device: string;
  at: number;
  data: string;
  tenant: string | null;
}

/** The columns an event is read back from. */
const COLUMNS = 'seq, id, type, device, at, data, tenant';

/**
 * The embedded event log: a table of its own in the store's SQLite file (the store lends its one handle),
 * rowid-ordered, indexed by id (`Last-Event-ID`), device and type; time needs no index (retention walks rowid
 * order, the newest time is kept in memory). Events are written in batches, several rows per statement, one
 * transaction each (every `flushMs` or `batchSize` events), never one synchronous write per event; a read
 * writes what waits first, so it sees every event published before it. A SIGTERM writes the last batch
 * (close); a SIGKILL loses at most it. Its commits skip the fsync of their own (`synchronous=NORMAL` for
 * them, the store's setting restored after): nobody waits on them, a killed process keeps them (they are in
 * the WAL), and a power loss may lose the last ones until the store's next durable commit or checkpoint.
 */
export class SqliteEventLog implements EventLog {
  private pending: GatewayEvent[] = [];
  private timer: NodeJS.Timeout | undefined;
  private immediate: NodeJS.Immediate | undefined;
  private readonly pruneTimer: NodeJS.Timeout;
  private closed = false;
  private readonly now: () => number;
  private readonly warn: ThrottledLog | undefined;
  /** One line a minute per byte bound (and tenant) that evicts: count evictions are the full history's steady state. */
  private readonly evictionLines: ThrottledLog | undefined;
  /** The evictions of the transaction under way: counted and logged once it commits (a rollback undid them). */
  private readonly evicted: Array<{ reason: EvictionReason; key: string; freed: Freed }> = [];
  private readonly onEvicted: OnEvicted = (reason, key, freed) => void this.evicted.push({ reason, key, freed });
  /** The store's `synchronous` level, restored after each of this log's commits. */
  private readonly storeSync: number;
  /** The inserts by rows per statement, prepared once (preparing costs more WebAssembly than a batch's rows); finalized at close. */
  private readonly inserts = new Map<number, sqlite.Statement>();
  /**
   * At least the newest `at` in the table (read once when first needed, raised by every insert, never lowered by a
   * delete): a `since` past it has nothing to read, without a scan.
   */
  private maxAt: number | undefined;
  /** Rows and bytes per tenant and in all, counted in memory (retention.ts): retention without a query per row. */
  private readonly tenants: TenantBuckets;
  private tenantOf: (deviceId: string) => string | undefined;

  /** The options events.history sets. */
  static options(events: Pick<EventsConfig, 'history' | 'bufferSize'>, log?: Logger, metrics?: Metrics): SqliteEventLogOptions {
    const h = events.history;
    const { maxEvents, maxEventsPerTenant, maxBytes, maxBytesPerTenant, flushMs, batchSize } = h;
    const bounds = { maxEvents, maxEventsPerTenant, maxBytes, maxBytesPerTenant };
    return { ...bounds, maxAgeMs: historyMaxAgeMs(h), flushMs, batchSize, replayLimit: events.bufferSize, log, metrics };
  }

  /**
   * Open (or create) the table in a database the store lends (`SqliteStore.share`): the store closes it,
   * writing what waits, before the database.
   */
  constructor(
    private readonly db: sqlite.Database,
    private readonly o: SqliteEventLogOptions,
  ) {
    this.now = o.now ?? Date.now;
    this.tenantOf = o.tenantOf ?? (() => undefined);
    this.warn = o.log && new ThrottledLog(o.log, 'warn', { linesPerWindow: 1, windowMs: 60_000 });
    this.evictionLines = o.log && new ThrottledLog(o.log, 'info', { linesPerWindow: 1, windowMs: 60_000, maxKeys: 1024 });
    // Secondary indexes carry the rowid (seq): each serves its filter in event order. A time index (`events_at`,
    // before 2026-11-27) cost every row's insert more than its two readers needed: dropped from older files.
    db.exec(`CREATE TABLE IF NOT EXISTS events (seq INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT NOT NULL, type TEXT NOT NULL,
      device TEXT NOT NULL, at INTEGER NOT NULL, data TEXT NOT NULL);
      CREATE INDEX IF NOT EXISTS events_id ON events (id);
      CREATE INDEX IF NOT EXISTS events_device ON events (device);
      CREATE INDEX IF NOT EXISTS events_type ON events (type);
      DROP INDEX IF EXISTS events_at;`);
    // The tenant an event counted against (NULL: none), added 2026-11-28; older rows count as untenanted.
    const columns = db.all('PRAGMA table_info(events)') as Array<{ name: string }>;
    if (!columns.some((c) => c.name === 'tenant')) db.exec('ALTER TABLE events ADD COLUMN tenant TEXT');
    this.tenants = new TenantBuckets(db);
    this.tenants.load();
    this.storeSync = Number((db.get('PRAGMA synchronous') as { synchronous: number }).synchronous);
    this.transaction(() => this.retain());
    this.pruneTimer = setInterval(() => this.transaction(() => this.retain()), PRUNE_MS).unref();
  }

  /** Each device's tenant (devices/tenants.ts), for events that carry none (see SqliteEventLogOptions.tenantOf). */
  useTenancy(tenantOf: (deviceId: string) => string | undefined): void {
    this.tenantOf = tenantOf;
  }

  append(e: GatewayEvent): void {
    if (this.closed) return;
    this.pending.push(e);
    if (this.pending.length >= this.o.batchSize) {
      // Off the publisher's call stack: the commit's fsync never runs inside a bus listener.
      this.immediate ??= setImmediate(() => this.flush());
    } else this.timer ??= setTimeout(() => this.flush(), this.o.flushMs).unref();
  }

  /** Write every waiting event in one transaction; on failure they wait for the next try (bounded). */
  flush(): void {
    clearTimeout(this.timer);
    clearImmediate(this.immediate);
    this.timer = this.immediate = undefined;
    if (this.pending.length === 0 || !this.db.isOpen) return;
    const batch = this.pending;
    this.pending = [];
    const written = this.transaction(() => {
      this.insertRows(batch);
      this.retain();
    });
    if (written) return void this.o.metrics?.eventHistory.inc({ outcome: 'written' }, batch.length);
    const keep = this.o.batchSize * MAX_PENDING_BATCHES;
    const waiting = [...batch, ...this.pending];
    if (waiting.length > keep) this.o.metrics?.eventHistory.inc({ outcome: 'dropped' }, waiting.length - keep);
    this.pending = waiting.slice(-keep);
    if (!this.closed) this.timer ??= setTimeout(() => this.flush(), this.o.flushMs).unref();
  }

  /**
   * `batch` in as few statements as the chunk sizes allow: most of a row's cost in this WebAssembly SQLite is per
   * statement run (reset, bindings, the step, the AUTOINCREMENT counter's update), not per row.
   */
  private insertRows(batch: readonly GatewayEvent[]): void {
    let i = 0;
    let maxAt = this.maxAt ?? -Infinity;
    // Consecutive events mostly share a tenant: one Map lookup per run of them.
    let key: string | undefined;
    let bucket: Bucket | undefined;
    let last: number | bigint = 0;
    let bytes = 0;
    for (const rows of INSERT_CHUNKS) {
      if (batch.length - i < rows) continue;
      const insert = this.insertOf(rows);
      const values: Array<string | number | Buffer | null> = [];
      for (; batch.length - i >= rows; values.length = 0) {
        for (const end = i + rows; i < end; i++) {
          const e = batch[i]!;
          const at = atMs(e.at, this.now);
          if (at > maxAt) maxAt = at;
          // The tenant the event was published under (a move before this batch is written changes nothing of it).
          const tenant = e.tenant ?? this.tenantOf(e.deviceId);
          if (bucketOf(tenant) !== key) bucket = this.tenants.bucket((key = bucketOf(tenant)));
          // The bytes bound (history.maxBytes) counts the data's bytes as bound: known here, never encoded twice.
          const data = dataJson(e.data);
          bucket!.count++;
          bucket!.bytes += data.length;
          bytes += data.length;
          values.push(e.id, e.type, e.deviceId, at, data, tenant ?? null);
        }
        last = insert.run(values).lastInsertRowid;
      }
    }
    this.tenants.floor = Number(last) + 1;
    this.tenants.rows += batch.length;
    this.tenants.bytes += bytes;
    if (this.maxAt !== undefined) this.maxAt = maxAt;
  }

  private insertOf(rows: number): sqlite.Statement {
    let insert = this.inserts.get(rows);
    if (!insert) {
      // The data is bound as UTF-8 bytes cast to TEXT (the column's text is unchanged: `dataJson`).
      const values = Array.from({ length: rows }, () => '(?, ?, ?, ?, CAST(? AS TEXT), ?)').join(', ');
      this.inserts.set(rows, (insert = this.db.prepare(`INSERT INTO events (id, type, device, at, data, tenant) VALUES ${values}`)));
    }
    return insert;
  }

  async read(q: HistoryQuery): Promise<HistoryPage> {
    this.flush();
    // Nothing at or after `since`: no scan of the table for a time still to come.
    if (q.since !== undefined && q.since > this.newestAt()) return { events: [] };
    const newest = q.order === 'newest';
    // Time filters rows; pages follow seq (`+at`: the column has no index, and never should pick one).
    const where = ['+at >= ?'];
    const params: Array<string | number> = [Math.max(q.since ?? 0, this.now() - this.o.maxAgeMs)];
    const after = q.cursor === undefined ? undefined : parseCursor(q.cursor);
    if (after !== undefined) {
      where.push(newest ? 'seq < ?' : 'seq > ?');
      params.push(after);
    }
    for (const [column, values] of [
      ['device', q.devices],
      ['type', q.types],
    ] as const) {
      if (!values) continue;
      where.push(`${column} IN (${[...values].map(() => '?').join(', ')})`);
      params.push(...values);
    }
    // A tenant's rows only, filtered as they are read (no index: the page follows seq, or the device or type index), so
    // a page is not emptied after the read. A row without a tenant (an operator's, or older than the column) never matches.
    // Its rows may be few among many: a page reads at most SCAN_WINDOW places of seq, and a short page says where it stopped.
    let window: { edge: number; more: boolean } | undefined;
    if (q.tenant !== undefined) {
      window = this.tenantWindow(newest, after);
      if (!window) return { events: [] };
      where.push('tenant = ?', newest ? 'seq >= ?' : 'seq <= ?');
      params.push(q.tenant, window.edge);
    }
    params.push(q.limit + 1);
    const sql = `SELECT ${COLUMNS} FROM events WHERE ${where.join(' AND ')} ORDER BY seq ${newest ? 'DESC' : 'ASC'} LIMIT ?`;
    const rows = this.db.all(sql, params) as unknown as Row[];
    const page = rows.slice(0, q.limit);
    const events = page.flatMap((r) => toEvent(r) ?? []);
    const last = page.at(-1);
    if (rows.length > q.limit && last) return { events, next: formatCursor(last.seq) };
    // The window's end as the cursor: the next page goes on from there (`seq > edge`, or `seq < edge` going back).
    return window?.more ? { events, next: formatCursor(window.edge) } : { events };
  }

  /**
   * The far edge of a tenant's page: SCAN_WINDOW places of seq from where it starts (the cursor, else the table's first
   * or last row), and whether rows lie beyond it. Undefined when the table is empty.
   */
  private tenantWindow(newest: boolean, after: number | undefined): { edge: number; more: boolean } | undefined {
    const { lo, hi } = this.db.get('SELECT min(seq) AS lo, max(seq) AS hi FROM events') as { lo: number | null; hi: number | null };
    if (lo === null || hi === null) return undefined;
    if (newest) {
      const edge = Math.min(after ?? hi + 1, hi + 1) - (this.o.scanWindow ?? SCAN_WINDOW);
      return { edge, more: edge > lo };
    }
    const edge = Math.max(after ?? lo - 1, lo - 1) + (this.o.scanWindow ?? SCAN_WINDOW);
    return { edge, more: edge < hi };
  }

  /** The events after `lastId` (any start's id the log still holds), at most `replayLimit` of them. */
  async replay(lastId: string): Promise<Replay | undefined> {
    if (this.o.replayLimit <= 0 || !this.db.isOpen) return undefined;
    this.flush();
    const row = this.db.get('SELECT seq FROM events WHERE id = ? ORDER BY seq DESC LIMIT 1', [lastId]) as { seq: number } | null;
    if (!row) return undefined;
    const after = [row.seq, this.o.replayLimit + 1];
    const rows = this.db.all(`SELECT ${COLUMNS} FROM events WHERE seq > ? ORDER BY seq LIMIT ?`, after) as unknown as Row[];
    if (rows.length > this.o.replayLimit) return { resync: 'expired' };
    return { events: rows.flatMap((r) => toEvent(r) ?? []) };
  }

  /** At least the newest `at` in the table: one scan the first time (the column has no index), then kept. */
  private newestAt(): number {
    this.maxAt ??= Number((this.db.get('SELECT max(at) AS at FROM events') as { at: number | null }).at ?? -Infinity);
    return this.maxAt;
  }

  /**
   * Drop what is past the bounds (retention.ts): the oldest run of events older than `maxAgeMs` (rowid order, from the
   * first row: it stops at the first younger event, so it reads what it deletes; an event timed out of order behind a
   * younger one goes with the run it ends up in, and no read returns it meanwhile); then each tenant's oldest beyond its
   * shares (`maxEventsPerTenant`, `maxBytesPerTenant`); then, beyond `maxEvents` and `maxBytes`, the oldest of the
   * tenants holding the most (never a smaller tenant's while a larger one has rows to give: one tenant's flood cannot
   * push another's history out). Inside a transaction.
   */
  private retain(): void {
    this.tenants.evictAged(this.now() - this.o.maxAgeMs, this.onEvicted);
    this.tenants.retain(this.o, this.onEvicted);
  }

  /** The committed evictions, counted by bound; a byte bound's also logged (one line a minute; per tenant for a share). */
  private reportEvictions(): void {
    const byBytes = { evicted: 0, bytes: 0, tenants: [] as string[] };
    for (const { reason, key, freed } of this.evicted.splice(0)) {
      this.o.metrics?.eventHistoryEvicted.inc({ reason }, freed.rows);
      if (reason === 'bytes') {
        byBytes.evicted += freed.rows;
        byBytes.bytes += freed.bytes;
        if (byBytes.tenants.length < 10) byBytes.tenants.push(key || '(none)');
      } else if (reason === 'bytes_per_tenant') {
        const msg = "a tenant's event history past events.history.maxBytesPerTenant: its oldest events dropped (one line a minute per tenant)";
        this.evictionLines?.write(
          { tenant: key || '(none)', evicted: freed.rows, bytes: freed.bytes, maxBytesPerTenant: this.o.maxBytesPerTenant },
          msg,
          `tenant:${key}`,
        );
      }
    }
    if (byBytes.evicted === 0) return;
    const msg = 'event history past events.history.maxBytes: the oldest events of the tenants holding the most bytes dropped (one line a minute)';
    this.evictionLines?.write({ ...byBytes, maxBytes: this.o.maxBytes }, msg, 'total');
  }

  /** Age retention now (tests, with their clock); it also runs at every write and once a minute. */
  prune(): void {
    this.transaction(() => this.retain());
  }

  /** Events in the table (what retention bounds). */
  get size(): number {
    return this.tenants.rows;
  }

  /** Bytes of their data (the JSON text as stored): what `maxBytes` bounds. */
  get bytes(): number {
    return this.tenants.bytes;
  }

  /** Run `fn` in one transaction; false (logged, rolled back, counts restored) when it fails. Never throws. */
  private transaction(fn: () => void): boolean {
    if (!this.db.isOpen) return false;
    const tenants = this.tenants.snapshot();
    try {
      this.db.exec('PRAGMA synchronous=NORMAL');
      this.db.exec('BEGIN');
      fn();
      this.db.exec('COMMIT');
      this.reportEvictions();
      this.o.metrics?.eventHistorySize.set(this.tenants.rows);
      this.o.metrics?.eventHistoryBytes.set(this.tenants.bytes);
      return true;
    } catch (err) {
      this.tenants.restore(tenants);
      this.evicted.length = 0;
      try {
        if (this.db.inTransaction) this.db.exec('ROLLBACK');
      } catch {
        // The rollback failing leaves nothing more to undo here.
      }
      const msg = 'writing the event history failed; events wait for the next try (one line per minute)';
      this.warn?.write({ err, waiting: this.pending.length }, msg);
      return false;
    } finally {
      this.restoreSync();
    }
  }

  private restoreSync(): void {
    try {
      if (this.db.isOpen) this.db.exec(`PRAGMA synchronous=${this.storeSync}`);
    } catch {
      // Only fails with the database gone; nothing is written with the wrong level then.
    }
  }

  /** Write what waits and stop (the store calls this before it closes the database). */
  close(): void {
    if (this.closed) return;
    this.flush();
    this.closed = true;
    for (const insert of this.inserts.values()) if (!insert.isFinalized && this.db.isOpen) insert.finalize();
    this.inserts.clear();
    this.tenants.close();
    clearInterval(this.pruneTimer);
    clearTimeout(this.timer);
    clearImmediate(this.immediate);
    if (this.pending.length) {
      this.o.metrics?.eventHistory.inc({ outcome: 'dropped' }, this.pending.length);
      this.o.log?.warn({ lost: this.pending.length }, 'events could not be written to the history before close');
    }
    this.pending = [];
  }
}

/** The last time parsed: the bus gives every event of one millisecond the same `at` text. */
let parsed = { at: '', ms: NaN };

function atMs(at: string, now: () => number): number {
  if (at !== parsed.at) parsed = { at, ms: Date.parse(at) };
  return Number.isFinite(parsed.ms) ? parsed.ms : now();
}

/**
 * The event's data as the JSON text stored, in UTF-8 bytes: bound as a blob the insert casts to TEXT, so the column
 * holds the same text as before and the copy into WebAssembly memory is Node's encoder, not node-sqlite3-wasm's
 * JavaScript UTF-8 loops (see `jsonBytes` in store/sqlite-store.ts). JSON text has no lone surrogate: same bytes.
 */
function dataJson(data: Record<string, unknown>): Buffer {
  let s: string;
  try {
    s = JSON.stringify(data);
  } catch {
    s = '{"unserializable":true}';
  }
  if (s.length > MAX_DATA_CHARS) s = JSON.stringify({ truncated: true, bytes: Buffer.byteLength(s) });
  return Buffer.from(s, 'utf8');
}

function toEvent(r: Row): GatewayEvent | undefined {
  if (!KNOWN_TYPES.has(r.type)) return undefined;
  try {
    const data = JSON.parse(r.data) as Record<string, unknown>;
    return { id: r.id, type: r.type as EventType, deviceId: r.device, at: new Date(Number(r.at)).toISOString(), data, tenant: r.tenant ?? undefined };
  } catch {
    return undefined;
  }
}
