import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import sqlite from 'node-sqlite3-wasm';
import { QuietCheckpoint } from './quiet-checkpoint.js';
import type { Store } from './store.js';

/**
 * SQLite compiled to WebAssembly (`node-sqlite3-wasm`): a real file through Node's `fs`, so `npm ci` needs
 * no native build. WAL with `synchronous=FULL` fsyncs every commit before `put` returns, so an
 * acknowledged write survives a crash. WAL needs `locking_mode=EXCLUSIVE` here (the WebAssembly VFS has
 * no shared memory), which also keeps a second gateway process off the same data dir.
 *
 * A batch that no caller waits on (`putMany` with `durable: false`: the device records' background batches)
 * commits with `synchronous=NORMAL`: no fsync of its own, which blocked the event loop ~5-10 ms per batch.
 * Its commit is in the WAL, so a killed process (SIGKILL) keeps it; an OS crash or power loss may lose it
 * until the next durable commit or checkpoint syncs the WAL (WAL is appended in order, so that sync covers
 * it too). The database stays consistent either way.
 *
 * Statements are prepared once and kept (preparing costs ~100 µs of WebAssembly per statement, more than
 * the write itself); they are finalized before the database closes.
 *
 * The VFS locks with a `<db>.lock` directory, which a killed process leaves behind; `<db>.owner` names the
 * process that holds it, so a restart after a crash clears a lock whose owner is gone.
 */
/**
 * The WAL is copied back into the database (a checkpoint: every page written again, and two fsyncs that block the
 * event loop) once the store has been quiet for `quietCheckpointMs` (quiet-checkpoint.ts), and by SQLite itself, the
 * backstop for a store never quiet that long, at a commit that leaves this many pages in the WAL. SQLite's default
 * of 1 000 (4 MB) came every ~300 devices while a fleet dialled in (each writes a record and two history rows into
 * random places of their indexes); at 4 000 one still fell inside every fleet of 10 000 devices dialling in (~0.45
 * pages a device) and inside their reconnect storm (~85 ms each, event loop blocked). At most ~32 MB of WAL on disk
 * (the file is reused, not shrunk); durability is the commits' syncs, unchanged.
 */
const WAL_CHECKPOINT_PAGES = 8000;

/** How long the store waits, with nothing written, before it checkpoints (QuietCheckpoint: one tick of it). */
const QUIET_CHECKPOINT_MS = 1000;

/**
 * SQLite's page cache, in KiB (a negative `cache_size`): 512 instead of SQLite's default 2 000. The cache lives in the
 * WebAssembly memory, which never shrinks; at the default it filled to ~2.3 MiB while a fleet of 10 000 dialled in
 * (~230 B per device of that fleet's resident memory, `fleetrss` in docs/performance.md). The store's work is writes
 * (records by key, history appended) and few reads: at 512 KiB, 18 000 devices' records and history rows, batched as
 * the gateway batches them, read ~256 more pages from the file (0.014 per device) for 1.6 MiB less resident memory.
 */
const CACHE_SIZE = -512;

/** Databases this process has open: its own pid in `<db>.owner` must not pass for a stale lock. */
const openHere = new Set<string>();

/** `durable: false`: a batch no caller waits on; its commit skips its own fsync (see SqliteStore). */
export interface PutManyOptions {
  durable?: boolean;
}

/** A table of its own in the store's database (the event history): closed, synchronously, before the handle is. */
export interface SharedTable {
  close(): void;
}

export class SqliteStore implements Store {
  private readonly db: sqlite.Database;
  private readonly key: string;
  private readonly tables: SharedTable[] = [];
  /** Prepared statements by SQL text: the few this class runs, kept for its lifetime. */
  private readonly statements = new Map<string, sqlite.Statement>();
  private readonly quiet: QuietCheckpoint;
  private readonly quietTimer: NodeJS.Timeout;

  constructor(
    readonly path: string,
    opts: { quietCheckpointMs?: number } = {},
  ) {
    this.key = resolve(path);
    if (openHere.has(this.key)) throw new Error(`${path} is already open in this process`);
    mkdirSync(dirname(path), { recursive: true });
    clearStaleLock(path);
    this.db = new sqlite.Database(path);
    openHere.add(this.key);
    try {
      this.db.exec('PRAGMA locking_mode=EXCLUSIVE');
      const mode = this.db.get('PRAGMA journal_mode=WAL') as { journal_mode?: string } | null;
      if (mode?.journal_mode !== 'wal') throw new Error(`${path}: could not switch to WAL (got ${String(mode?.journal_mode)})`);
      this.db.exec('PRAGMA synchronous=FULL');
      this.db.exec(`PRAGMA wal_autocheckpoint=${WAL_CHECKPOINT_PAGES}`);
      this.db.exec(`PRAGMA cache_size=${CACHE_SIZE}`);
      writeFileSync(`${path}.owner`, String(process.pid), { mode: 0o600 });
      this.db.exec(
        'CREATE TABLE IF NOT EXISTS documents (collection TEXT NOT NULL, key TEXT NOT NULL, value TEXT NOT NULL, updated_at INTEGER NOT NULL, PRIMARY KEY (collection, key)) WITHOUT ROWID',
      );
    } catch (e) {
      this.db.close();
      openHere.delete(this.key);
      throw e;
    }
    this.quiet = new QuietCheckpoint(this.totalChanges());
    this.quietTimer = setInterval(() => this.checkpointIfQuiet(), opts.quietCheckpointMs ?? QUIET_CHECKPOINT_MS).unref();
  }

  /** Rows changed on this handle since it opened, by anyone it is lent to (the event history's too). */
  private totalChanges(): number {
    return Number((this.statement('SELECT total_changes() AS n').get() as { n: number }).n);
  }

  /** The quiet timer's tick: a checkpoint once writes have stopped (QuietCheckpoint). Never throws. */
  private checkpointIfQuiet(): void {
    if (!this.db.isOpen || this.db.inTransaction) return;
    try {
      if (this.quiet.tick(this.totalChanges())) this.db.get('PRAGMA wal_checkpoint(PASSIVE)');
    } catch {
      // Nothing is lost: the pages stay in the WAL, and SQLite's own checkpoint (the backstop) copies them later.
    }
  }

  async get(collection: string, key: string): Promise<unknown> {
    const row = this.statement('SELECT value FROM documents WHERE collection = ? AND key = ?').get([collection, key]) as { value: string } | null;
    return row ? (JSON.parse(row.value) as unknown) : undefined;
  }

  async put(collection: string, key: string, value: unknown): Promise<void> {
    this.upsert(collection, key, value);
  }

  /**
   * One transaction: a single fsync for the lot (each `put` is one), all or none. With `durable: false` the
   * commit does not wait for an fsync of its own (see the class comment): for batches no caller waits on.
   */
  async putMany(collection: string, entries: ReadonlyArray<{ key: string; value: unknown }>, opts: PutManyOptions = {}): Promise<void> {
    const lazy = opts.durable === false;
    if (lazy) this.db.exec('PRAGMA synchronous=NORMAL');
    try {
      this.db.exec('BEGIN');
      try {
        for (const e of entries) this.upsert(collection, e.key, e.value);
        this.db.exec('COMMIT');
      } catch (err) {
        this.db.exec('ROLLBACK');
        throw err;
      }
    } finally {
      if (lazy) this.db.exec('PRAGMA synchronous=FULL');
    }
  }

  private upsert(collection: string, key: string, value: unknown): void {
    this.statement(
      'INSERT INTO documents (collection, key, value, updated_at) VALUES (?, ?, CAST(? AS TEXT), ?) ON CONFLICT (collection, key) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at',
    ).run([collection, key, jsonBytes(value), Date.now()]);
  }

  async create(collection: string, key: string, value: unknown): Promise<boolean> {
    const sql = 'INSERT INTO documents (collection, key, value, updated_at) VALUES (?, ?, CAST(? AS TEXT), ?) ON CONFLICT (collection, key) DO NOTHING';
    return this.statement(sql).run([collection, key, jsonBytes(value), Date.now()]).changes > 0;
  }

  async delete(collection: string, key: string): Promise<boolean> {
    return this.statement('DELETE FROM documents WHERE collection = ? AND key = ?').run([collection, key]).changes > 0;
  }

  async list(collection: string): Promise<Array<{ key: string; value: unknown }>> {
    const sql = 'SELECT key, value FROM documents WHERE collection = ? ORDER BY key';
    const rows = this.statement(sql).all([collection]) as Array<{ key: string; value: string }>;
    return rows.map((r) => ({ key: r.key, value: JSON.parse(r.value) as unknown }));
  }

  /** The statement for this SQL, prepared on first use. */
  private statement(sql: string): sqlite.Statement {
    let st = this.statements.get(sql);
    if (!st) this.statements.set(sql, (st = this.db.prepare(sql)));
    return st;
  }

  /**
   * The one handle to this file (EXCLUSIVE-locked: no second connection can open it) lent to a table
   * beside the documents; `open` makes its schema, and what it returns closes before the database does.
   */
  share<T extends SharedTable>(open: (db: sqlite.Database) => T): T {
    if (!this.db.isOpen) throw new Error(`${this.path} is closed`);
    const table = open(this.db);
    this.tables.push(table);
    return table;
  }

  async close(): Promise<void> {
    clearInterval(this.quietTimer);
    try {
      for (const t of this.tables.splice(0)) t.close();
    } finally {
      // A statement left unfinalized would keep the file open after close (sqlite3_close_v2's zombie).
      for (const st of this.statements.values()) if (!st.isFinalized) st.finalize();
      this.statements.clear();
      if (this.db.isOpen) this.db.close();
    }
    openHere.delete(this.key);
  }
}

/**
 * A document's JSON as UTF-8 bytes, bound as a blob that the statement casts to TEXT: the column holds the same
 * text it always did (what other instances and older versions read), and the copy into WebAssembly memory is
 * Node's native encoder and one memcpy, where a bound string went through node-sqlite3-wasm's JavaScript UTF-8
 * loops (a length pass and a copy pass per character: most of a fleet record's upsert, `fleet5`). JSON.stringify's
 * text never holds a lone surrogate, so the bytes are the ones the string binding wrote. Throws, as binding did,
 * on a value that has no JSON (undefined).
 */
export function jsonBytes(value: unknown): Buffer {
  const text: unknown = JSON.stringify(value);
  if (typeof text !== 'string') throw new TypeError('a stored document must be JSON');
  return Buffer.from(text, 'utf8');
}

function clearStaleLock(path: string): void {
  const lock = `${path}.lock`;
  if (!existsSync(lock)) return;
  let owner = NaN;
  try {
    owner = Number(readFileSync(`${path}.owner`, 'utf8').trim());
  } catch {
    // No owner file: the lock is not ours to judge; SQLite reports it as busy below.
    return;
  }
  // Our own pid is stale too: a restarted container runs the gateway under the same pid.
  if (Number.isInteger(owner) && owner > 0 && owner !== process.pid && isAlive(owner))
    throw new Error(`${path} is in use by process ${owner} (one gateway per data dir)`);
  rmSync(lock, { recursive: true, force: true });
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'EPERM';
  }
}
