import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { SqliteStore } from '../../src/store/sqlite-store.js';

const dirs: string[] = [];
const tempDb = () => {
  const dir = mkdtempSync(join(tmpdir(), 'voxgate-store-'));
  dirs.push(dir);
  return join(dir, 'nested', 'voxgate.db');
};
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
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
