/**
 * bench/lib/smaps.ts's kinds of mapping, on a smaps text shaped like the gateway's: SQLite's WebAssembly memory is a
 * 64 MiB-aligned read-write mapping too, and must not pass for a glibc thread arena (docs/performance.md, "fleetrss").
 */
import { describe, expect, it } from 'vitest';
import { parseSmaps } from '../lib/smaps.js';

/** One smaps entry: its header line and its Rss line. */
const entry = (start: bigint, end: bigint, perms: string, rssKb: number, name = '') =>
  `${start.toString(16)}-${end.toString(16)} ${perms} 00000000 00:00 0 ${name}\nSize: ${(end - start) / 1024n} kB\nRss: ${rssKb} kB\n`;

const MiB = 1024n * 1024n;
const GiB = 1024n * MiB;
const base = 0x7f0000000000n;

describe('parseSmaps', () => {
  it('tells V8 pages, thread arenas, a WebAssembly memory between guard regions, [heap] and the node binary apart', () => {
    const text = [
      entry(0x400000n, 0x400000n + 40n * MiB, 'r-xp', 4096, '/usr/bin/node'),
      entry(0x2000000n, 0x2000000n + 8n * MiB, 'rw-p', 900, '[heap]'),
      entry(0x3000000n, 0x3000000n + 256n * 1024n, 'rw-p', 256),
      // A thread arena: its used part from a 64 MiB-aligned start, the rest of the 64 MiB inaccessible.
      entry(base, base + 9n * MiB, 'rw-p', 3000),
      entry(base + 9n * MiB, base + 64n * MiB, '---p', 0),
      // A WebAssembly memory: a guard region, the accessible part (64 MiB-aligned here), a guard region of GiBs.
      entry(base + 64n * MiB, base + 64n * MiB + 2n * GiB, '---p', 0),
      entry(base + 64n * MiB + 2n * GiB, base + 64n * MiB + 2n * GiB + 16n * MiB, 'rw-p', 2500),
      entry(base + 64n * MiB + 2n * GiB + 16n * MiB, base + 4n * 64n * MiB + 10n * GiB, '---p', 0),
      // A thread arena right after a guard region is still an arena; a whole 64 MiB arena has no inaccessible rest.
      entry(base + 4n * 64n * MiB + 10n * GiB, base + 4n * 64n * MiB + 10n * GiB + 12n * MiB, 'rw-p', 1200),
      entry(base + 4n * 64n * MiB + 10n * GiB + 12n * MiB, base + 5n * 64n * MiB + 10n * GiB, '---p', 0),
      entry(base + 6n * 64n * MiB + 10n * GiB, base + 7n * 64n * MiB + 10n * GiB, 'rw-p', 64),
      // An anonymous mapping of another size: other.
      entry(base + 8n * 64n * MiB + 10n * GiB + 4096n, base + 8n * 64n * MiB + 10n * GiB + 4096n + 20n * MiB, 'rw-p', 100),
    ].join('');
    const maps = parseSmaps(text);
    expect(maps.map((m) => m.kind)).toEqual([
      'nodeBinary',
      'mainMalloc',
      'v8Pages',
      'threadArenas',
      'other',
      'other',
      'wasmMemory',
      'other',
      'threadArenas',
      'other',
      'threadArenas',
      'other',
    ]);
    expect(maps[6]!.rss).toBe(2500 * 1024);
  });
});
