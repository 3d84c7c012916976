import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { QuietCheckpoint } from '../../src/store/quiet-checkpoint.js';
import { SqliteStore } from '../../src/store/sqlite-store.js';

const dirs: string[] = [];
const open: SqliteStore[] = [];
afterEach(async () => {
  for (const s of open.splice(0)) await s.close();
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});
function tempDb(): string {
  const dir = mkdtempSync(join(tmpdir(), 'voxgate-store-'));
  dirs.push(dir);
  return join(dir, 'nested', 'voxgate.db');
}
function store(path: string, opts?: { quietCheckpointMs?: number }): SqliteStore {
  const s = new SqliteStore(path, opts);
  open.push(s);
  return s;
}
async function closeLast(): Promise<void> {
  await open.pop()!.close();
}

/** The embedded store on a temp dir: JSON documents by collection and key, kept across a reopen. */
describe('SqliteStore', () => {
  it('puts, gets, lists in key order and deletes JSON documents, each collection apart', async () => {
    const s = store(tempDb());
    expect(await s.get('devices', 'a')).toBeUndefined();
    await s.put('devices', 'b', { n: 2, nested: { list: [1, 'x', null] } });
    await s.put('devices', 'a', 'just a string');
    await s.put('other', 'a', 42);
    expect(await s.get('devices', 'b')).toEqual({ n: 2, nested: { list: [1, 'x', null] } });
    expect(await s.list('devices')).toEqual([
      { key: 'a', value: 'just a string' },
      { key: 'b', value: { n: 2, nested: { list: [1, 'x', null] } } },
    ]);
    // A put over a key replaces the document.
    await s.put('devices', 'a', { replaced: true });
    expect(await s.get('devices', 'a')).toEqual({ replaced: true });
    expect(await s.delete('devices', 'a')).toBe(true);
    expect(await s.delete('devices', 'a')).toBe(false);
    expect(await s.list('devices')).toEqual([{ key: 'b', value: { n: 2, nested: { list: [1, 'x', null] } } }]);
    expect(await s.get('other', 'a')).toBe(42);
    expect(await s.list('nothing')).toEqual([]);
  });

  it('stores each document as its JSON text (a TEXT column other instances and older versions read), any script included', async () => {
    const s = store(tempDb());
    const doc = { name: 'Küche 台所 🎙️', quote: '"a" \\ b', lone: '\udc00', n: [1, null, false] };
    await s.put('devices', 'a', doc);
    await s.putMany('devices', [{ key: 'b', value: doc }], { durable: false });
    await s.create('claims', 'c', doc);
    let rows: unknown[] = [];
    s.share((db) => {
      rows = db.all('SELECT collection, key, typeof(value) AS kind, value FROM documents ORDER BY collection, key');
      return { close: () => undefined };
    });
    const text = JSON.stringify(doc);
    expect(rows).toEqual([
      { collection: 'claims', key: 'c', kind: 'text', value: text },
      { collection: 'devices', key: 'a', kind: 'text', value: text },
      { collection: 'devices', key: 'b', kind: 'text', value: text },
    ]);
    expect(await s.get('devices', 'a')).toEqual(doc);
    expect(await s.list('devices')).toEqual([
      { key: 'a', value: doc },
      { key: 'b', value: doc },
    ]);
  });

  it('creates a document only when the key is free (put-if-absent)', async () => {
    const s = store(tempDb());
    expect(await s.create('claims', 'run-1', { by: 'first' })).toBe(true);
    expect(await s.create('claims', 'run-1', { by: 'second' })).toBe(false);
    expect(await s.get('claims', 'run-1')).toEqual({ by: 'first' });
  });

  it('writes putMany as one transaction: all of it, or none when a value cannot be stored', async () => {
    const s = store(tempDb());
    await s.putMany('batch', [
      { key: 'x', value: 1 },
      { key: 'y', value: 2 },
    ]);
    expect((await s.list('batch')).map((e) => e.key)).toEqual(['x', 'y']);
    const cyclic: Record<string, unknown> = {};
    cyclic['self'] = cyclic;
    await expect(
      s.putMany('batch', [
        { key: 'x', value: 'changed' },
        { key: 'z', value: cyclic },
      ]),
    ).rejects.toThrow();
    // The failed batch left nothing behind, not even its first entry.
    expect(await s.list('batch')).toEqual([
      { key: 'x', value: 1 },
      { key: 'y', value: 2 },
    ]);
  });

  it("keeps SQLite's page cache at 512 KiB (it lives in the WebAssembly memory, which never shrinks)", () => {
    const s = store(tempDb());
    const size = s.share((db) => ({ kib: (db.get('PRAGMA cache_size') as { cache_size: number }).cache_size, close: () => undefined })).kib;
    expect(size).toBe(-512);
  });

  it("copies its WAL back into the database once writes stop, not in the middle of them (SQLite's own at 8 000 pages)", async () => {
    const path = tempDb();
    const s = store(path, { quietCheckpointMs: 20 });
    const pragma = (name: string) => s.share((db) => ({ v: Object.values(db.get(`PRAGMA ${name}`) as object)[0] as unknown, close: () => undefined })).v;
    expect(pragma('wal_autocheckpoint')).toBe(8000);
    const before = statSync(path).size;
    // ~600 KB of records: in the WAL only, until a checkpoint copies the pages into the database file.
    await s.putMany(
      'devices',
      Array.from({ length: 600 }, (_, i) => ({ key: `d${i}`, value: { pad: 'x'.repeat(1000), i } })),
      { durable: false },
    );
    expect(statSync(path).size).toBe(before);
    await vi.waitFor(() => expect(statSync(path).size).toBeGreaterThan(before + 600_000), { timeout: 30_000, interval: 20 });
    expect(await s.get('devices', 'd599')).toEqual({ pad: 'x'.repeat(1000), i: 599 });
  });

  it('writes a putMany that is not durable like any other, keeps it across a reopen, and keeps FULL for the rest', async () => {
    const path = tempDb();
    const s = store(path);
    const sync = () => s.share((db) => ({ level: (db.get('PRAGMA synchronous') as { synchronous: number }).synchronous, close: () => undefined }));
    await s.putMany(
      'lazy',
      [
        { key: 'a', value: { n: 1 } },
        { key: 'b', value: { n: 2 } },
      ],
      { durable: false },
    );
    expect(sync().level).toBe(2); // FULL again after the batch
    await s.put('lazy', 'c', { n: 3 });
    await closeLast();
    expect(await store(path).list('lazy')).toEqual([
      { key: 'a', value: { n: 1 } },
      { key: 'b', value: { n: 2 } },
      { key: 'c', value: { n: 3 } },
    ]);
  });

  it('refuses to open a file twice in one process, and a lock held by a live process', async () => {
    const path = tempDb();
    store(path);
    expect(() => new SqliteStore(path)).toThrow(/already open in this process/);
    await closeLast();
    // A lock left behind whose owner is alive (this test's parent, say): not ours to clear.
    mkdirSync(`${path}.lock`);
    writeFileSync(`${path}.owner`, String(process.ppid));
    expect(() => new SqliteStore(path)).toThrow(new RegExp(`in use by process ${process.ppid}`));
  });

  it('clears a stale lock left by a process that is gone (a crash), and opens', async () => {
    const path = tempDb();
    const s = store(path);
    await s.put('c', 'k', 'kept');
    await closeLast();
    mkdirSync(`${path}.lock`);
    // An owner pid that cannot be alive.
    writeFileSync(`${path}.owner`, '2147483646');
    const again = store(path);
    expect(await again.get('c', 'k')).toBe('kept');
  });

  it('lends its handle to a table of its own, closed before the database, and none once closed', async () => {
    const path = tempDb();
    const s = new SqliteStore(path);
    const closed: string[] = [];
    const table = s.share((db) => {
      db.exec('CREATE TABLE IF NOT EXISTS extra (n INTEGER)');
      db.run('INSERT INTO extra (n) VALUES (?)', [7]);
      return { count: () => (db.get('SELECT COUNT(*) AS c FROM extra') as { c: number }).c, close: () => closed.push('table') };
    });
    expect(table.count()).toBe(1);
    await s.close();
    expect(closed).toEqual(['table']);
    expect(() => s.share((db) => ({ db, close: () => undefined }))).toThrow(/is closed/);
  });
});

describe('embedded store (SQLite, WebAssembly)', () => {
  it('keeps documents across a close and a reopen', async () => {
    const path = tempDb();
    const a = new SqliteStore(path);
    await a.put('enrollments', 'aa:bb:cc:dd:ee:01', { clientId: 'c1', n: 1 });
    await a.put('enrollments', 'aa:bb:cc:dd:ee:02', { clientId: 'c2' });
    await a.put('claims', '123456', { deviceId: 'aa:bb:cc:dd:ee:03' });
    await a.put('enrollments', 'aa:bb:cc:dd:ee:01', { clientId: 'c1', n: 2 });
    expect(await a.delete('enrollments', 'aa:bb:cc:dd:ee:02')).toBe(true);
    expect(await a.delete('enrollments', 'aa:bb:cc:dd:ee:02')).toBe(false);
    await a.close();

    const b = new SqliteStore(path);
    try {
      expect(await b.get('enrollments', 'aa:bb:cc:dd:ee:01')).toEqual({ clientId: 'c1', n: 2 });
      expect(await b.get('enrollments', 'aa:bb:cc:dd:ee:02')).toBeUndefined();
      expect(await b.list('enrollments')).toEqual([{ key: 'aa:bb:cc:dd:ee:01', value: { clientId: 'c1', n: 2 } }]);
      expect(await b.list('claims')).toEqual([{ key: '123456', value: { deviceId: 'aa:bb:cc:dd:ee:03' } }]);
    } finally {
      await b.close();
    }
  });

  it('keeps a write acknowledged by a process that is then killed with SIGKILL', async () => {
    const path = tempDb();
    const writer = fileURLToPath(new URL('../fixtures/store-writer.ts', import.meta.url));
    const child = spawn(process.execPath, ['--import', 'tsx', writer, path, 'first', 'one', 'second', 'two'], { stdio: ['ignore', 'pipe', 'pipe'] });
    let stderr = '';
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    const exited = new Promise<NodeJS.Signals | null>((resolve) => child.on('exit', (_code, signal) => resolve(signal)));
    await new Promise<void>((resolve, reject) => {
      let out = '';
      child.stdout.on('data', (d: Buffer) => {
        out += d.toString();
        // Killed the moment the second write has returned: nothing after it (no close, no checkpoint) runs.
        if (out.includes('written second')) {
          child.kill('SIGKILL');
          resolve();
        }
      });
      child.on('exit', () => reject(new Error(`the writer exited before writing: ${stderr}`)));
    });
    expect(await exited).toBe('SIGKILL');

    const store = new SqliteStore(path);
    try {
      expect(await store.get('crash', 'first')).toEqual({ value: 'one' });
      expect(await store.get('crash', 'second')).toEqual({ value: 'two' });
    } finally {
      await store.close();
    }
  });
});

describe('QuietCheckpoint', () => {
  it('checkpoints on the first tick with no change after some, once, and never while the count moves', () => {
    const q = new QuietCheckpoint(5);
    expect(q.tick(5)).toBe(false); // nothing written since the store opened
    expect(q.tick(9)).toBe(false); // writes in this interval
    expect(q.tick(40)).toBe(false); // still writing
    expect(q.tick(40)).toBe(true); // quiet: checkpoint now
    expect(q.tick(40)).toBe(false); // nothing new to copy
    expect(q.tick(41)).toBe(false);
    expect(q.tick(41)).toBe(true);
  });
});
