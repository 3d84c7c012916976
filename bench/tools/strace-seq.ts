/**
 * Reads a server's timed system calls (`strace -f -ttt -s 12 -e trace=read,writev,write,epoll_pwait -o <file>`) while
 * calls run to its devices, and says how long a device's reply waits for the next request on the same device: from
 * the `read` that brought the reply to the `writev`/`write` of the next request frame on that socket, in µs (strace
 * slows every system call, so the figures are larger than without it; compare sides traced alike), and how many
 * system calls the server made in between (0: the next request went out in the reply's own turn).
 * A socket is a device's when its first bytes are a WebSocket frame or an MQTT packet, an API caller's when they are
 * an HTTP request or answer.
 */
import { readFileSync } from 'node:fs';

interface Call {
  t: number;
  call: string;
  fd: number;
  head: string;
}

const LINE = /^(?:\d+\s+)?(\d+\.\d+)\s+(read|writev|write|epoll_pwait)\((\d+),\s*(.*?)\)\s+=\s+(-?\d+)/;

function parse(file: string): Call[] {
  const calls: Call[] = [];
  for (const l of readFileSync(file, 'utf8').split('\n')) {
    const m = LINE.exec(l);
    if (!m) continue;
    const [, t, call, fd, rest, ret] = m;
    if (call !== 'epoll_pwait' && Number(ret) <= 0) continue;
    calls.push({ t: Number(t), call: call!, fd: Number(fd), head: /"([^"]*)"/.exec(rest!)?.[1] ?? '' });
  }
  return calls;
}

/** 'api' for HTTP sockets, 'device' for WebSocket (0x81/0x82 frames, octal-escaped by strace) or MQTT publish (0x30/0x32). */
function kinds(calls: Call[]): Map<number, 'api' | 'device'> {
  const k = new Map<number, 'api' | 'device'>();
  for (const c of calls) {
    if (c.call === 'epoll_pwait' || k.has(c.fd)) continue;
    if (/^(POST|GET|HTTP\/1)/.test(c.head)) k.set(c.fd, 'api');
    else if (/^(\\20[12]|0|2)/.test(c.head)) k.set(c.fd, 'device');
  }
  return k;
}

export interface ReplyToNext {
  replies: number;
  /** µs from the reply's read to the next request's write on the same socket: p10, p50, p90. */
  us: [number, number, number];
  /** System calls in between: p50, p90, and the share of replies followed at once by the next request. */
  between: [number, number];
  atOnce: number;
  /** The calls between, for the median reply (e.g. "writev api, epoll_pwait, read api"). */
  typical: string;
}

export function replyToNext(file: string): ReplyToNext {
  const calls = parse(file);
  const kind = kinds(calls);
  const us: number[] = [];
  const between: number[] = [];
  const seqs: string[][] = [];
  for (let i = 0; i < calls.length; i++) {
    const r = calls[i]!;
    if (r.call !== 'read' || kind.get(r.fd) !== 'device') continue;
    const seq: string[] = [];
    for (let j = i + 1; j < calls.length; j++) {
      const c = calls[j]!;
      if ((c.call === 'writev' || c.call === 'write') && c.fd === r.fd) {
        us.push((c.t - r.t) * 1e6);
        between.push(seq.length);
        seqs.push(seq);
        break;
      }
      if (c.call === 'read' && c.fd === r.fd) break; // another reply before a request: the queue was empty
      seq.push(`${c.call} ${kind.get(c.fd) ?? c.fd}`);
    }
  }
  const q = (xs: number[], p: number) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length * p)] ?? NaN;
  const mid = q(between, 0.5);
  return {
    replies: us.length,
    us: [q(us, 0.1), q(us, 0.5), q(us, 0.9)],
    between: [mid, q(between, 0.9)],
    atOnce: between.filter((n) => n === 0).length / Math.max(1, between.length),
    typical: (seqs.find((s) => s.length === mid) ?? []).join(', '),
  };
}
