/**
 * Where a /mcp call's time goes on the gateway's main thread, from its timed system calls (issue 21, the c=1 row):
 *   npx tsx bench/tools/mcp-segments.ts <perf-trace output>
 * (or `mcp-cpu.ts 1 <calls> --segments`, which records it: `perf trace -t <gateway pid> -e read,write,writev,epoll_pwait`).
 * At concurrency 1 a call is a chain: the load generator's POST is read from the socket, the request is written to
 * the hosted server's stdin, its answer is read from its stdout, the HTTP answer is written (writev) to the socket.
 * Only the gateway's work between the POST's read and the stdin write ("in") and between the stdout read and the
 * socket writev ("out") is on the call's path; work after each write ("after write", up to the next epoll_pwait)
 * overlaps with the other process when it has a core of its own. Per call, in µs: those segments, the two writes'
 * own durations (a write that wakes the reader can be preempted by it), the time from the stdin write's end to the
 * stdout read's end ("server"), and from the socket writev's end to the next POST's read ("client").
 * The socket is the fd with the most writevs; the stdin pipe the other fd with the most writes; the stdout pipe the
 * other fd with the most reads.
 */
import { readFileSync } from 'node:fs';

interface Sys {
  /** Entry and return, µs from the trace's start. */
  t0: number;
  t1: number;
  call: string;
  fd: number;
  ret: number;
}

const LINE = /^\s*([\d.]+) \(\s*([\d.]+) ms\):.*?\b(read|write|writev|epoll_pwait|epoll_wait)\((?:fd|epfd): (\d+).*\)\s+= (-?\d+)/;

export function parseTrace(text: string): Sys[] {
  const out: Sys[] = [];
  for (const l of text.split('\n')) {
    const m = LINE.exec(l);
    if (!m) continue;
    const t0 = Number(m[1]) * 1000;
    out.push({ t0, t1: t0 + Number(m[2]) * 1000, call: m[3]!, fd: Number(m[4]), ret: Number(m[5]) });
  }
  return out;
}

const mostOn = (calls: readonly Sys[], call: string, not: readonly number[]): number => {
  const n = new Map<number, number>();
  for (const c of calls) if (c.call === call && c.ret > 0 && !not.includes(c.fd)) n.set(c.fd, (n.get(c.fd) ?? 0) + 1);
  return [...n].sort((a, b) => b[1] - a[1])[0]?.[0] ?? -1;
};

export interface Segments {
  calls: number;
  rows: Record<string, number[]>;
}

/** Per call: the segments named in the header (calls whose sequence was not the plain one are skipped). */
export function segments(calls: readonly Sys[]): Segments {
  const sock = mostOn(calls, 'writev', []);
  const stdin = mostOn(calls, 'write', [sock]);
  const stdout = mostOn(calls, 'read', [sock, stdin]);
  const rows: Record<string, number[]> = {
    in: [],
    'stdin write': [],
    'after stdin write': [],
    server: [],
    out: [],
    'socket writev': [],
    'after writev': [],
    client: [],
    'main thread busy': [],
  };
  let post: Sys | undefined;
  let wrote: Sys | undefined;
  let answer: Sys | undefined;
  let sent: Sys | undefined;
  let tail: 'in' | 'out' | undefined;
  let busy = 0;
  let awake: number | undefined;
  for (const c of calls) {
    const isPoll = c.call === 'epoll_pwait' || c.call === 'epoll_wait';
    // Busy time: from a poll's return to the next poll's entry.
    if (isPoll) {
      if (awake !== undefined) busy += c.t0 - awake;
      awake = c.t1;
      if (tail === 'in' && wrote) rows['after stdin write']!.push(c.t0 - wrote.t1);
      if (tail === 'out' && sent) rows['after writev']!.push(c.t0 - sent.t1);
      tail = undefined;
      continue;
    }
    if (c.ret <= 0) continue;
    if (c.call === 'read' && c.fd === sock) {
      if (sent) rows['client']!.push(c.t1 - sent.t1);
      // A call's busy time runs from its POST's read to the next one's.
      if (post && sent && awake !== undefined) rows['main thread busy']!.push(busy + c.t0 - awake);
      busy = 0;
      if (awake !== undefined) awake = c.t0;
      post = c;
      wrote = answer = sent = undefined;
    } else if (c.call === 'write' && c.fd === stdin && post && !wrote) {
      rows['in']!.push(c.t0 - post.t1);
      rows['stdin write']!.push(c.t1 - c.t0);
      wrote = c;
      tail = 'in';
    } else if (c.call === 'read' && c.fd === stdout && wrote && !answer) {
      rows['server']!.push(c.t1 - wrote.t1);
      answer = c;
    } else if (c.call === 'writev' && c.fd === sock && answer && !sent) {
      rows['out']!.push(c.t0 - answer.t1);
      rows['socket writev']!.push(c.t1 - c.t0);
      sent = c;
      tail = 'out';
    }
  }
  return { calls: rows['out']!.length, rows };
}

const pct = (xs: readonly number[], p: number): number => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length === 0 ? NaN : s[Math.min(s.length - 1, Math.floor(p * s.length))]!;
};

export function segmentsText(text: string): string {
  const { calls, rows } = segments(parseTrace(text));
  const lines = [`gateway main thread per call, µs (perf trace; ${calls} calls in the plain sequence): p50 / p90 / mean`];
  for (const [k, xs] of Object.entries(rows)) {
    const mean = xs.reduce((a, b) => a + b, 0) / Math.max(1, xs.length);
    lines.push(`  ${k.padEnd(18)} ${pct(xs, 0.5).toFixed(0).padStart(6)} ${pct(xs, 0.9).toFixed(0).padStart(6)} ${mean.toFixed(0).padStart(6)}`);
  }
  return `${lines.join('\n')}\n`;
}

if (process.argv[1]?.endsWith('mcp-segments.ts') && process.argv[2]) process.stdout.write(segmentsText(readFileSync(process.argv[2], 'utf8')));
