/**
 * What the gateway persists while a fleet dials in, written with the least code, for the fleet floor's second
 * reading (`/xiaozhi/writes/` on bare-ws.ts). The gateway keeps every device's record and an event history in one
 * SQLite file (issue 23: names and history that survive a restart); the plain floor writes nothing, so its fleet row
 * compares the gateway's handshake *and* its writes with a handshake alone. This floor adds the same writes, so the
 * second ratio is the gateway's own work against the same work:
 *
 * - a new device: one record upsert (a facts document of the gateway's shape), and two history rows (`device.online`
 *   at hello, `device.ready` once its tools are listed);
 * - a reconnect storm: three history rows (`device.offline`, `device.online`, `device.ready`) and no record write (the
 *   gateway holds a known device's last seen while it re-dials within 5 s, and its catalog is unchanged).
 *
 * The same library (node-sqlite3-wasm), schema, indexes, pragmas and quiet checkpoint as `gateway/src/store/sqlite-store.ts` and
 * `gateway/src/events/history-sqlite.ts`, and their batching (history: every 250 ms or 500 rows, 32/8/1 rows per
 * INSERT; records: every 250 ms, 200 per transaction, the event loop given back between batches), without the
 * gateway's retention, tenants, metrics or error handling. Run the floor with the gateway's WebAssembly options
 * (`--no-wasm-dynamic-tiering --no-wasm-tier-up`): both sides then run SQLite on Liftoff.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import sqlite from 'node-sqlite3-wasm';

const FLUSH_MS = 250;
const HISTORY_BATCH = 500;
const RECORD_BATCH = 200;
const INSERT_CHUNKS = [32, 8, 1] as const;

/** What a device's `device.ready` event says (devices/device-events.ts), and its record keeps. */
export interface Ready {
  toolCount: number;
  /** A string of the catalog hash's length (22): the floor does not hash its catalog, it stores what the gateway stores. */
  hash: string;
  server: { name: string; version: string };
  protocolVersion: string;
}

interface Row {
  type: string;
  device: string;
  at: number;
  data: string;
}

export class FleetWrites {
  private readonly dir = mkdtempSync(join(tmpdir(), 'voxgate-bench-floor-'));
  private readonly db = new sqlite.Database(join(this.dir, 'floor.db'));
  private readonly inserts = new Map<number, sqlite.Statement>();
  private readonly upsert: sqlite.Statement;
  private readonly statements: sqlite.Statement[] = [];
  private history: Row[] = [];
  private records = new Map<string, string>();
  private historyTimer: NodeJS.Timeout | NodeJS.Immediate | undefined;
  private recordTimer: NodeJS.Timeout | undefined;
  private seq = 0;
  /** Rows committed, so the bench can show both sides wrote the same (`floorRows` in the rows' params). */
  readonly written = { events: 0, records: 0 };
  private readonly boot = Date.now().toString(36);
  /** The store's quiet checkpoint (store/quiet-checkpoint.ts): once a second, after a second with no row changed. */
  private readonly quietTimer: NodeJS.Timeout;
  private changes = 0;
  private pendingCheckpoint = false;

  constructor() {
    this.db.exec('PRAGMA locking_mode=EXCLUSIVE');
    this.db.get('PRAGMA journal_mode=WAL');
    this.db.exec('PRAGMA synchronous=NORMAL');
    this.db.exec('PRAGMA wal_autocheckpoint=8000');
    this.db.exec('PRAGMA cache_size=-512');
    this.db.exec(`CREATE TABLE documents (collection TEXT NOT NULL, key TEXT NOT NULL, value TEXT NOT NULL, updated_at INTEGER NOT NULL,
      PRIMARY KEY (collection, key)) WITHOUT ROWID;
      CREATE TABLE events (seq INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT NOT NULL, type TEXT NOT NULL, device TEXT NOT NULL,
      at INTEGER NOT NULL, data TEXT NOT NULL, tenant TEXT);
      CREATE INDEX events_id ON events (id);
      CREATE INDEX events_device ON events (device);
      CREATE INDEX events_type ON events (type);`);
    this.upsert = this.db.prepare(
      'INSERT INTO documents (collection, key, value, updated_at) VALUES (?, ?, CAST(? AS TEXT), ?) ON CONFLICT (collection, key) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at',
    );
    const total = this.db.prepare('SELECT total_changes() AS n');
    this.quietTimer = setInterval(() => {
      const n = (total.get() as { n: number }).n;
      if (n !== this.changes) [this.changes, this.pendingCheckpoint] = [n, true];
      else if (this.pendingCheckpoint) {
        this.pendingCheckpoint = false;
        this.db.get('PRAGMA wal_checkpoint(PASSIVE)');
      }
    }, 1000).unref();
    this.statements.push(total);
  }

  event(type: string, device: string, data: Record<string, unknown>): void {
    this.history.push({ type, device, at: Date.now(), data: JSON.stringify(data) });
    if (this.history.length >= HISTORY_BATCH) {
      clearTimeout(this.historyTimer as NodeJS.Timeout);
      this.historyTimer = setImmediate(() => this.flushHistory());
    } else this.historyTimer ??= setTimeout(() => this.flushHistory(), FLUSH_MS);
  }

  /** A new device's record, as the gateway's facts document (devices/records.ts) holds it once the device is ready. */
  record(device: string, clientId: string, r: Ready): void {
    const at = Date.now();
    const { toolCount, hash: catalogHash, server } = r;
    const firmware = server.version;
    const facts = { clientId, transport: 'websocket', board: null, firmware, firstSeen: at, lastSeen: at, connectedAt: at, catalogHash, toolCount, server };
    this.records.set(device, JSON.stringify(facts));
    this.recordTimer ??= setTimeout(() => void this.flushRecords(), FLUSH_MS);
  }

  private flushHistory(): void {
    this.historyTimer = undefined;
    const batch = this.history;
    this.history = [];
    this.db.exec('BEGIN');
    let i = 0;
    for (const rows of INSERT_CHUNKS) {
      const insert = this.insertOf(rows);
      const values: Array<string | number | Buffer | null> = [];
      for (; batch.length - i >= rows; values.length = 0) {
        for (const end = i + rows; i < end; i++) {
          const r = batch[i]!;
          values.push(`${this.boot}-${++this.seq}`, r.type, r.device, r.at, Buffer.from(r.data, 'utf8'), null);
        }
        insert.run(values);
      }
    }
    this.db.exec('COMMIT');
    this.written.events += batch.length;
  }

  private async flushRecords(): Promise<void> {
    this.recordTimer = undefined;
    const all = [...this.records];
    this.records = new Map();
    for (let i = 0; i < all.length; i += RECORD_BATCH) {
      if (i > 0) await new Promise((resolve) => setImmediate(resolve));
      this.db.exec('BEGIN');
      const at = Date.now();
      const batch = all.slice(i, i + RECORD_BATCH);
      for (const [key, value] of batch) this.upsert.run(['devices', key, Buffer.from(value, 'utf8'), at]);
      this.db.exec('COMMIT');
      this.written.records += batch.length;
    }
  }

  private insertOf(rows: number): sqlite.Statement {
    let insert = this.inserts.get(rows);
    if (!insert) {
      const values = Array.from({ length: rows }, () => '(?, ?, ?, ?, CAST(? AS TEXT), ?)').join(', ');
      this.inserts.set(rows, (insert = this.db.prepare(`INSERT INTO events (id, type, device, at, data, tenant) VALUES ${values}`)));
    }
    return insert;
  }

  close(): void {
    clearInterval(this.quietTimer);
    for (const st of [...this.inserts.values(), this.upsert, ...this.statements]) st.finalize();
    this.db.close();
    rmSync(this.dir, { recursive: true, force: true });
  }
}
