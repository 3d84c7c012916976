/**
 * Where a process's resident memory is, by kind of mapping (/proc/<pid>/smaps, Linux): V8's heap pages (anonymous
 * 256 KiB mappings), glibc's thread arenas (anonymous mappings inside the 64 MiB regions malloc reserves for threads
 * other than the main one), the main thread's malloc (`[heap]`), the node binary's pages (code, and ICU's data once
 * Intl or `normalize` touched it), and the rest (stacks, WebAssembly, shared libraries, V8's code and large objects).
 */
import { readFileSync } from 'node:fs';

export interface ResidentByKind {
  total: number;
  v8Pages: number;
  threadArenas: number;
  mainMalloc: number;
  nodeBinary: number;
  other: number;
}

const KiB = 1024;

/** Resident bytes by kind; undefined when the process is gone or /proc is not there. */
export function residentByKind(pid: number): ResidentByKind | undefined {
  let text: string;
  try {
    text = readFileSync(`/proc/${pid}/smaps`, 'utf8');
  } catch {
    return undefined;
  }
  const r: ResidentByKind = { total: 0, v8Pages: 0, threadArenas: 0, mainMalloc: 0, nodeBinary: 0, other: 0 };
  let kind: Exclude<keyof ResidentByKind, 'total'> = 'other';
  for (const line of text.split('\n')) {
    const head = /^([0-9a-f]+)-([0-9a-f]+) \S+ \S+ \S+ \d+\s*(.*)$/.exec(line);
    if (head) {
      const size = (parseInt(head[2]!, 16) - parseInt(head[1]!, 16)) / KiB;
      const name = head[3] ?? '';
      // A thread arena is a part of a 64 MiB-aligned reservation, larger than V8's pages and than a thread's stack (8 MiB).
      const arena = name === '' && parseInt(head[1]!, 16) % (64 * KiB * KiB) === 0 && size > 8 * KiB;
      kind =
        name === '' && size === 256 ? 'v8Pages' : arena ? 'threadArenas' : name === '[heap]' ? 'mainMalloc' : /\/node$/.test(name) ? 'nodeBinary' : 'other';
      continue;
    }
    const rss = /^Rss:\s+(\d+) kB/.exec(line);
    if (rss) {
      const bytes = Number(rss[1]) * KiB;
      r[kind] += bytes;
      r.total += bytes;
    }
  }
  return r;
}

/** `v8 69.1, arenas 18.7, malloc 8.2, node 40.9, other 12.1 MiB` */
export function formatResident(r: ResidentByKind | undefined): string {
  if (!r) return 'n/a';
  const m = (n: number) => (n / 2 ** 20).toFixed(1);
  return `V8 pages ${m(r.v8Pages)}, thread arenas ${m(r.threadArenas)}, main malloc ${m(r.mainMalloc)}, node binary ${m(r.nodeBinary)}, other ${m(r.other)} MiB`;
}
