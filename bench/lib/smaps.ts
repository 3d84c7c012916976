/**
 * Where a process's resident memory is, by kind of mapping (/proc/<pid>/smaps, Linux): V8's heap pages (anonymous
 * 256 KiB mappings), glibc's thread arenas (the 64 MiB regions malloc reserves for threads other than the main one),
 * WebAssembly memories (SQLite's, node-sqlite3-wasm: the accessible part of a guarded reservation of several GiB), the
 * main thread's malloc (`[heap]`), the node binary's pages (code, and ICU's data once Intl or `normalize` touched
 * it), and the rest (stacks, shared libraries, V8's code and large objects, malloc's mmapped chunks).
 */
import { readFileSync } from 'node:fs';

export type MappingKind = 'v8Pages' | 'threadArenas' | 'wasmMemory' | 'mainMalloc' | 'nodeBinary' | 'other';

export interface ResidentByKind extends Record<MappingKind, number> {
  total: number;
}

export interface Mapping {
  start: number;
  end: number;
  perms: string;
  /** The path or pseudo-name (`[heap]`, `[stack]`), '' when anonymous. */
  name: string;
  /** Resident bytes. */
  rss: number;
  kind: MappingKind;
}

const KiB = 1024;
const ARENA = 64 * KiB * KiB;
const GiB = KiB * KiB * KiB;

/**
 * Every mapping of a smaps text with its resident size and kind. A glibc arena is a 64 MiB-aligned anonymous
 * reservation: its used part (read-write, from the aligned start) and an inaccessible rest up to 64 MiB. A V8
 * WebAssembly memory is also an anonymous read-write mapping, possibly 64 MiB-aligned, but between inaccessible guard
 * regions of more than a GiB: without that test SQLite's page cache passes for a thread arena (docs/performance.md,
 * "fleetrss").
 */
export function parseSmaps(text: string): Mapping[] {
  const out: Mapping[] = [];
  let cur: Mapping | undefined;
  for (const line of text.split('\n')) {
    const head = /^([0-9a-f]+)-([0-9a-f]+) (\S+) \S+ \S+ \d+\s*(.*)$/.exec(line);
    if (head) {
      cur = { start: parseInt(head[1]!, 16), end: parseInt(head[2]!, 16), perms: head[3]!, name: head[4] ?? '', rss: 0, kind: 'other' };
      out.push(cur);
      continue;
    }
    const rss = /^Rss:\s+(\d+) kB/.exec(line);
    if (rss && cur) cur.rss = Number(rss[1]) * KiB;
  }
  const guard = (m: Mapping | undefined) => m !== undefined && m.name === '' && m.perms.startsWith('---') && m.end - m.start > GiB;
  for (let i = 0; i < out.length; i++) {
    const m = out[i]!;
    const size = m.end - m.start;
    const next = out[i + 1];
    const anon = m.name === '';
    const arena =
      anon &&
      m.start % ARENA === 0 &&
      size > 8 * KiB * KiB &&
      (size === ARENA || (next !== undefined && next.start === m.end && next.name === '' && next.perms.startsWith('---') && next.end === m.start + ARENA));
    // (An arena may follow a memory's guard region: the arena test goes first.)
    const wasm = anon && m.perms.startsWith('rw') && (guard(next) || guard(out[i - 1]));
    m.kind =
      anon && size === 256 * KiB
        ? 'v8Pages'
        : arena
          ? 'threadArenas'
          : wasm
            ? 'wasmMemory'
            : m.name === '[heap]'
              ? 'mainMalloc'
              : /\/node$/.test(m.name)
                ? 'nodeBinary'
                : 'other';
  }
  return out;
}

/** Every mapping of a process; undefined when the process is gone or /proc is not there. */
export function mappingsOf(pid: number): Mapping[] | undefined {
  try {
    return parseSmaps(readFileSync(`/proc/${pid}/smaps`, 'utf8'));
  } catch {
    return undefined;
  }
}

/** Resident bytes by kind; undefined when the process is gone or /proc is not there. */
export function residentByKind(pid: number): ResidentByKind | undefined {
  const maps = mappingsOf(pid);
  if (!maps) return undefined;
  const r: ResidentByKind = { total: 0, v8Pages: 0, threadArenas: 0, wasmMemory: 0, mainMalloc: 0, nodeBinary: 0, other: 0 };
  for (const m of maps) {
    r[m.kind] += m.rss;
    r.total += m.rss;
  }
  return r;
}

/** `V8 pages 69.1, thread arenas 18.7, WebAssembly 2.1, main malloc 8.2, node binary 40.9, other 12.1 MiB` */
export function formatResident(r: ResidentByKind | undefined): string {
  if (!r) return 'n/a';
  const m = (n: number) => (n / 2 ** 20).toFixed(1);
  return `V8 pages ${m(r.v8Pages)}, thread arenas ${m(r.threadArenas)}, WebAssembly ${m(r.wasmMemory)}, main malloc ${m(r.mainMalloc)}, node binary ${m(r.nodeBinary)}, other ${m(r.other)} MiB`;
}
