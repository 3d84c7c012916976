/**
 * An Opus encoder process: a plain `node -e` child (the same program from sources and from dist/, no loader)
 * that loads @evan/opus (its native addon, or its WebAssembly build where there is none) and encodes the frames
 * it is sent over a pipe. The child keeps its own queue, earliest deadline first (a device's frames keep their order:
 * their deadlines never decrease), so it is never idle while frames wait, however slowly this process answers on a
 * loaded machine, and the order is decided at the last moment. Messages are length-prefixed binary both ways:
 *   to the child   [u32 length][u8 op][u32 encoder id] then for op 1 (open) [u32 sample rate], op 2 (encode)
 *                  [u32 job][f64 deadline][PCM s16le], op 3 (free) nothing, op 4 (cancel) [u32 job],
 *                  op 5 (complexity, for every encoder from its next frame) [u8 complexity];
 *   from the child [u32 length][u32 job][u32 µs spent in the codec][u8 complexity used][packet] (an empty packet: it
 *                  failed).
 * The child has no secrets (an empty environment) and exits when its stdin closes (the gateway went away).
 *
 * The complexity set (op 5) is a ceiling: before each slice the child counts the frames due within the next
 * HORIZON ms and encodes at the highest complexity whose measured cost fits them in BUDGET of that time. So when
 * a hundred answers start together their first frames are cheap at once, not after the pool's 500 ms window has seen
 * frames come late (an answer of a few seconds is over by then); one answer alone stays at the ceiling.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createRequire } from 'node:module';
import type { Logger } from 'pino';
import type { BackendHooks, EncodeBackend, EncoderSpec, PoolJob } from './encoder-pool.js';

const OP_OPEN = 1;
const OP_ENCODE = 2;
const OP_FREE = 3;
const OP_CANCEL = 4;
const OP_COMPLEXITY = 5;
/** Frames queued in a process at most (~6 MB of PCM at 24 kHz); the rest wait in the pool's queue. */
const IN_FLIGHT = 2000;
/** The largest reply the child can send: one Opus packet (RFC 6716: 1275 bytes × 3) and its header. */
const MAX_REPLY = 9 + 3 * 1275;

const CHILD_SOURCE = String.raw`'use strict';
const opus = require(process.argv[1]);
// Deadlines are the gateway's performance.now(): this process's clock, shifted to it.
const shift = performance.timeOrigin - Number(process.argv[2]);
const EASE = process.argv[3] === '1';
const HORIZON = 500;
const BUDGET = 0.6;
// The codec's wall time per frame at each complexity (µs, a moving average; 0: not measured yet).
const cost = new Float64Array(11);
const encoders = new Map();
const EMPTY = Buffer.alloc(0);
const heap = [];
const cancelled = new Set();
let complexity = 5;
let seq = 0;
let buf = EMPTY;
let scheduled = false;
const before = (a, b) => a.d < b.d || (a.d === b.d && a.s < b.s);
function push(x) {
  heap.push(x);
  for (let i = heap.length - 1; i > 0; ) {
    const p = (i - 1) >> 1;
    if (!before(heap[i], heap[p])) break;
    [heap[i], heap[p]] = [heap[p], heap[i]];
    i = p;
  }
}
function pop() {
  const top = heap[0];
  const last = heap.pop();
  if (heap.length && last) {
    heap[0] = last;
    for (let i = 0; ; ) {
      const l = 2 * i + 1, r = l + 1;
      let m = i;
      if (l < heap.length && before(heap[l], heap[m])) m = l;
      if (r < heap.length && before(heap[r], heap[m])) m = r;
      if (m === i) break;
      [heap[i], heap[m]] = [heap[m], heap[i]];
      i = m;
    }
  }
  return top;
}
process.stdin.on('data', (chunk) => {
  buf = buf.length ? Buffer.concat([buf, chunk]) : chunk;
  let at = 0;
  while (buf.length - at >= 4) {
    const len = buf.readUInt32LE(at);
    if (buf.length - at - 4 < len) break;
    handle(buf.subarray(at + 4, at + 4 + len));
    at += 4 + len;
  }
  buf = at === buf.length ? EMPTY : Buffer.from(buf.subarray(at));
  if (heap.length && !scheduled) {
    scheduled = true;
    setImmediate(work);
  }
});
process.stdin.on('end', () => process.exit(0));
process.stdout.on('error', () => process.exit(0));
function handle(m) {
  const op = m[0];
  const id = m.readUInt32LE(1);
  if (op === 1) {
    const e = new opus.Encoder({ channels: 1, sample_rate: m.readUInt32LE(5), application: 'voip' });
    e.ctl(4024, 3001);
    encoders.set(id, { e, c: -1 });
  } else if (op === 3) {
    const x = encoders.get(id);
    encoders.delete(id);
    if (x && typeof x.e.drop === 'function') x.e.drop();
  } else if (op === 2) {
    push({ id, job: m.readUInt32LE(5), d: m.readDoubleLE(9), s: seq++, pcm: Buffer.from(m.subarray(17)) });
  } else if (op === 4) {
    cancelled.add(m.readUInt32LE(5));
  } else if (op === 5) {
    complexity = m[5];
  }
}
// A frame's cost at complexity c: measured, or scaled from one that was (libopus: ~+23 % a step from 0; 700 µs at 5).
function costAt(c) {
  if (cost[c]) return cost[c];
  for (let k = 0; k <= 10; k++) if (cost[k]) return (cost[k] * (1 + 0.23 * c)) / (1 + 0.23 * k);
  return (700 * (1 + 0.23 * c)) / 2.15;
}
// The highest complexity (up to the ceiling) at which the frames due soon fit in the time budget.
function eased() {
  if (!EASE) return complexity;
  const until = performance.now() + shift + HORIZON;
  let due = 0;
  for (let i = 0; i < heap.length; i++) if (heap[i].d <= until) due++;
  let c = complexity;
  while (c > 0 && due * costAt(c) > HORIZON * 1000 * BUDGET) c--;
  return c;
}
// Earliest deadline first, in slices of a few ms: new frames (and cancellations) are read between slices.
function work() {
  scheduled = false;
  const t0 = performance.now();
  const out = [];
  const level = eased();
  let first = true;
  while (heap.length && performance.now() - t0 < 4) {
    const j = pop();
    if (cancelled.delete(j.job)) continue;
    const x = encoders.get(j.id);
    if (!x) continue;
    let pkt = EMPTY;
    const t = performance.now();
    try {
      if (x.c !== level) { x.e.ctl(4010, level); x.c = level; }
      pkt = x.e.encode(j.pcm);
    } catch { pkt = EMPTY; }
    const us = Math.min(0xffffffff, Math.round((performance.now() - t) * 1000));
    cost[level] = cost[level] ? 0.9 * cost[level] + 0.1 * us : us;
    const r = Buffer.allocUnsafe(13 + pkt.length);
    r.writeUInt32LE(9 + pkt.length, 0);
    r.writeUInt32LE(j.job, 4);
    r.writeUInt32LE(us, 8);
    r[12] = level;
    r.set(pkt, 13);
    // The slice's first frame at once (the one due soonest: a lone answer's first frame waits for no other), the rest
    // in one write.
    if (first) {
      first = false;
      process.stdout.write(r);
    } else out.push(r);
  }
  if (out.length) process.stdout.write(out.length === 1 ? out[0] : Buffer.concat(out));
  if (!heap.length) cancelled.clear();
  if (heap.length && !scheduled) {
    scheduled = true;
    setImmediate(work);
  }
}
`;

export class EncoderProcess implements EncodeBackend {
  readonly kind = 'process';
  alive = true;
  private readonly child: ChildProcess;
  private readonly inFlight = new Map<number, PoolJob>();
  private readonly ticket = new WeakMap<PoolJob, number>();
  private nextJob = 0;
  private input: Buffer = Buffer.alloc(0);

  constructor(
    private readonly hooks: BackendHooks,
    private readonly log: Logger,
    opusModule = createRequire(import.meta.url).resolve('@evan/opus'),
    /** Encode below the set complexity while more frames are due soon than fit at it (see above). */
    ease = true,
  ) {
    this.child = spawn(process.execPath, ['-e', CHILD_SOURCE, opusModule, String(performance.timeOrigin), ease ? '1' : '0'], {
      stdio: ['pipe', 'pipe', 'inherit'],
      env: {},
    });
    this.child.on('error', (e) => this.lost(`could not run: ${e.message}`));
    this.child.on('exit', (code, signal) => this.lost(`exited (${signal ?? code})`));
    this.child.stdin!.on('error', () => undefined);
    this.child.stdout!.on('data', (chunk: Buffer) => this.read(chunk));
    // Never what keeps the gateway alive: it exits when the gateway's end of the pipe closes.
    this.child.unref();
    for (const s of [this.child.stdin, this.child.stdout] as Array<{ unref?: () => void } | null>) s?.unref?.();
  }

  get pid(): number | undefined {
    return this.child.pid;
  }

  room(): number {
    return Math.max(0, IN_FLIGHT - this.inFlight.size);
  }

  open(spec: EncoderSpec): void {
    const m = header(OP_OPEN, spec.id, 4);
    m.writeUInt32LE(spec.sampleRate, 9);
    this.write(m);
  }

  send(jobs: readonly PoolJob[]): void {
    const parts: Buffer[] = [];
    for (const job of jobs) {
      const n = this.nextJob;
      this.nextJob = (this.nextJob + 1) >>> 0;
      this.inFlight.set(n, job);
      this.ticket.set(job, n);
      const m = header(OP_ENCODE, job.encoder.spec.id, 12 + job.pcm.byteLength);
      m.writeUInt32LE(n, 9);
      m.writeDoubleLE(job.deadline, 13);
      m.set(new Uint8Array(job.pcm.buffer, job.pcm.byteOffset, job.pcm.byteLength), 21);
      parts.push(m);
    }
    this.write(parts.length === 1 ? parts[0]! : Buffer.concat(parts));
  }

  cancel(job: PoolJob): void {
    const n = this.ticket.get(job);
    if (n === undefined || this.inFlight.get(n) !== job) return;
    this.inFlight.delete(n);
    const m = header(OP_CANCEL, job.encoder.spec.id, 4);
    m.writeUInt32LE(n, 9);
    this.write(m);
    job.settle(undefined);
  }

  setComplexity(complexity: number): void {
    const m = header(OP_COMPLEXITY, 0, 1);
    m[9] = Math.max(0, Math.min(10, Math.round(complexity)));
    this.write(m);
  }

  free(id: number): void {
    this.write(header(OP_FREE, id, 0));
    // The child drops that encoder's queued frames without a word.
    for (const [n, job] of this.inFlight)
      if (job.encoder.spec.id === id) {
        this.inFlight.delete(n);
        job.settle(undefined);
      }
  }

  close(): void {
    this.alive = false;
    this.child.stdin?.end();
    for (const job of this.inFlight.values()) job.settle(undefined);
    this.inFlight.clear();
  }

  private write(b: Buffer): void {
    if (this.alive) this.child.stdin?.write(b);
  }

  private read(chunk: Buffer): void {
    this.input = this.input.length ? Buffer.concat([this.input, chunk]) : chunk;
    let at = 0;
    while (this.input.length - at >= 4) {
      const len = this.input.readUInt32LE(at);
      if (len < 9 || len > MAX_REPLY) return this.lost(`sent a malformed reply (${len} bytes)`);
      if (this.input.length - at - 4 < len) break;
      const job = this.input.readUInt32LE(at + 4);
      const us = this.input.readUInt32LE(at + 8);
      const complexity = this.input[at + 12]!;
      // A copy: the chunk's memory is reused by the stream.
      const packet = len > 9 ? Uint8Array.from(this.input.subarray(at + 13, at + 4 + len)) : undefined;
      at += 4 + len;
      const j = this.inFlight.get(job);
      this.inFlight.delete(job);
      if (j) this.hooks.done(j, packet, us, complexity);
    }
    this.input = at === this.input.length ? Buffer.alloc(0) : Buffer.from(this.input.subarray(at));
  }

  /** Exited, failed to start or broke the protocol, while in use (after close() its exit is expected). */
  private lost(reason: string): void {
    if (!this.alive) return;
    this.alive = false;
    this.log.error({ pid: this.child.pid, reason }, 'Opus encoder process lost; its devices encode elsewhere');
    this.child.kill();
    const jobs = [...this.inFlight.values()];
    this.inFlight.clear();
    for (const job of jobs) job.settle(undefined);
    this.hooks.died(this, reason);
  }
}

/** A message to the child with `extra` bytes after the op and the encoder id. */
function header(op: number, id: number, extra: number): Buffer {
  const m = Buffer.allocUnsafe(4 + 5 + extra);
  m.writeUInt32LE(5 + extra, 0);
  m[4] = op;
  m.writeUInt32LE(id, 5);
  return m;
}
