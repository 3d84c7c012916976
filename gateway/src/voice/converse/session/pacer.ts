/**
 * Downlink pacing: the device plays 60 ms frames from a decode queue of 40 (audio_service.h,
 * MAX_DECODE_PACKETS_IN_QUEUE) and drops what does not fit, so frames go out at real time with a small
 * lead (growing from `leadFrames` to `maxLeadFrames`). Frame n of a segment is due `lead` frames before it plays; when the sender falls behind (a slow
 * synthesiser, a busy loop) the device has run dry, so the clock restarts from now rather than bursting.
 * JSON markers (`tts sentence_start`, `tts stop`) ride in the same queue so they reach the device in order
 * with the audio they announce. Bounded: `push` waits while the queue is full. Frames may be queued unencoded
 * (see PacedItem): Opus encoders are stateful, and the queue's order is the encoder's order.
 */
import type { EncodeJob, ScheduledEncoder } from '../contracts.js';
import type { ConverseSessionDeps } from './ports.js';

/**
 * A frame is its Opus packet, or how to make it: encoded when it is due (a plain encoder), or PCM handed to a
 * scheduled encoder at once with the time the device will need it (earliest deadline first across devices, off the
 * main thread); either way no whole sentence is encoded in one go while every other device's frames wait.
 */
export type PacedItem =
  { kind: 'frame'; opus: Uint8Array | (() => Uint8Array) } | { kind: 'pcm'; pcm: Int16Array; encoder: ScheduledEncoder } | { kind: 'json'; message: object };

type Queued = { kind: 'frame'; opus: Uint8Array | (() => Uint8Array) } | { kind: 'job'; job: EncodeJob } | { kind: 'json'; message: object };

/**
 * Frames already waiting for the encoder (all devices) above which a segment's first frame is held until its first
 * `leadFrames` + 1 are encoded: when a hundred answers start together the encoder works through them row by row (every
 * device's frame k before anyone's k + 1), so a device that started on its first frame alone would run dry as soon as
 * the rows fall behind real time; started with its lead in hand it rides that out. Below it (one answer, a few) the
 * frames come in the same few ms and holding would only delay the first one.
 */
const HOLD_START_BACKLOG = 30;

/** Why a frame went out late: queued in time (a busy loop), arrived late (synthesis), or its encoding finished late. */
export type LateCause = 'waiting' | 'arrived' | 'encoding';

export interface PacerSink {
  frame(opus: Uint8Array, timestampMs: number): void;
  json(message: object): void;
}

export interface PacerOptions {
  frameMs: number;
  /** Frames sent ahead of playback (a jitter buffer for the network), far below the device's 40. */
  leadFrames: number;
  /**
   * The lead then grows to this (default: `leadFrames`), one frame every second frame sent (twice real time), so
   * the first frame goes out at once and the device soon holds enough to ride out a busy moment of the sender.
   */
  maxLeadFrames?: number;
  /** Items queued at most; `push` waits for room beyond it. */
  maxQueued: number;
  now?: () => number;
  /**
   * A frame went out more than one period after the device's playback ran out (it heard a gap): `waiting` when
   * the frame had been queued in time and the event loop sent it late, `arrived` when it came late (synthesis).
   */
  onLate?: (cause: LateCause) => void;
}

export class DownlinkPacer {
  private readonly queue: Queued[] = [];
  /** Frames (not markers) in the queue: where a new frame falls in the segment. */
  private framesQueued = 0;
  /** The head frame's encoding, waited for (cleared queues forget it). */
  private awaiting: EncodeJob | undefined;
  private readonly roomWaiters: Array<() => void> = [];
  private readonly idleWaiters: Array<() => void> = [];
  private timer: NodeJS.Timeout | undefined;
  /** When frame 0 of this segment plays (restarted on an underrun). */
  private t0 = 0;
  private sentInSegment = 0;
  /** Frames sent since the clock last (re)started: the lead grows with them. */
  private sinceStart = 0;
  private closed = false;
  private readonly now: () => number;

  constructor(
    private readonly sink: PacerSink,
    private readonly o: PacerOptions,
  ) {
    this.now = o.now ?? (() => performance.now());
  }

  /** Frames sent since the segment began (the last `newSegment`). */
  get framesSent(): number {
    return this.sentInSegment;
  }

  get queued(): number {
    return this.queue.length;
  }

  /**
   * When the device will have played every frame of the segment sent so far (this pacer's clock; 0 before a frame):
   * the last frame leaves up to the lead ahead of its playback.
   */
  get playedOutAt(): number {
    return this.sentInSegment > 0 ? this.t0 + this.sentInSegment * this.o.frameMs : 0;
  }

  /** The clock frames are paced by. */
  get clock(): number {
    return this.now();
  }

  /**
   * Queue an item; resolves once it is queued (waits while the queue is full). False, and nothing queued,
   * once the pacer is closed or `signal` aborted (a cleared queue must not refill from a stale speaker).
   */
  async push(item: PacedItem, signal?: AbortSignal): Promise<boolean> {
    while (!this.closed && !signal?.aborted && this.queue.length >= this.o.maxQueued) await new Promise<void>((r) => this.roomWaiters.push(r));
    if (this.closed || signal?.aborted) return false;
    if (item.kind === 'pcm') this.queue.push({ kind: 'job', job: item.encoder.schedule(item.pcm, this.deadlineOfNext()) });
    else this.queue.push(item);
    if (item.kind !== 'json') this.framesQueued++;
    this.pump(this.queue.length === 1 ? 'arrived' : 'waiting');
    return true;
  }

  /** Resolves when everything queued has been sent (or dropped). */
  drained(): Promise<void> {
    if (!this.queue.length || this.closed) return Promise.resolve();
    return new Promise<void>((r) => this.idleWaiters.push(r));
  }

  /** A new segment (a new `tts start`): playback starts afresh at the device. */
  newSegment(): void {
    this.sentInSegment = 0;
  }

  /** Drop everything queued (abort, barge-in); waiters are released. Returns how many frames were dropped. */
  clear(): number {
    const dropped = this.framesQueued;
    for (const i of this.queue) if (i.kind === 'job') i.job.cancel();
    this.queue.length = 0;
    this.framesQueued = 0;
    this.awaiting = undefined;
    clearTimeout(this.timer);
    this.timer = undefined;
    this.release();
    return dropped;
  }

  close(): void {
    this.closed = true;
    this.clear();
  }

  private release(): void {
    for (const r of this.roomWaiters.splice(0)) r();
    if (!this.queue.length) for (const r of this.idleWaiters.splice(0)) r();
  }

  /**
   * When the device would run dry without the frame being queued now: when it plays, at least one period from now
   * (a frame that comes after the device ran dry restarts the clock; its encoder gets one period, as the device does).
   */
  private deadlineOfNext(): number {
    const now = this.now();
    const plays = this.sentInSegment > 0 ? this.t0 + (this.sentInSegment + this.framesQueued) * this.o.frameMs : now + this.framesQueued * this.o.frameMs;
    return Math.max(plays, now) + this.o.frameMs;
  }

  private pump(cause: LateCause = 'waiting'): void {
    if (this.timer || this.closed) return;
    const { frameMs, leadFrames } = this.o;
    while (this.queue.length) {
      const item = this.queue[0]!;
      if (item.kind === 'json') {
        this.queue.shift();
        this.sink.json(item.message);
        continue;
      }
      const now = this.now();
      const n = this.sentInSegment;
      // Underrun (or the segment's first frame): frame n plays now.
      if (n === 0 || now > this.t0 + n * frameMs) {
        if (n > 0 && now > this.t0 + (n + 1) * frameMs) this.o.onLate?.(cause);
        this.t0 = now - n * frameMs;
        this.sinceStart = 0;
      }
      // The first `leadFrames` + 1 go at once; after them one extra frame per two sent, up to the most lead.
      const lead = Math.min(Math.max(leadFrames, this.o.maxLeadFrames ?? 0), leadFrames + (Math.max(0, this.sinceStart - leadFrames) >> 1));
      const due = this.t0 + (n - lead) * frameMs;
      if (now < due) {
        this.timer = setTimeout(
          () => {
            this.timer = undefined;
            this.pump();
          },
          Math.ceil(due - now),
        );
        break;
      }
      if (item.kind === 'job' && !item.job.settled) {
        this.awaitEncoding(item.job);
        break;
      }
      const held = n === 0 && item.kind === 'job' && (item.job.backlog ?? 0) > HOLD_START_BACKLOG ? this.unencodedIn(leadFrames + 1) : undefined;
      if (held) {
        this.awaitEncoding(held);
        break;
      }
      this.queue.shift();
      this.framesQueued--;
      const opus = item.kind === 'job' ? item.job.packet : packet(item.opus);
      if (!opus) continue;
      this.sentInSegment++;
      this.sinceStart++;
      this.sink.frame(opus, n * frameMs);
    }
    if (this.queue.length < this.o.maxQueued) for (const r of this.roomWaiters.splice(0)) r();
    if (!this.queue.length) for (const r of this.idleWaiters.splice(0)) r();
  }

  /** The first frame among the next `count` queued whose encoding has not finished. */
  private unencodedIn(count: number): EncodeJob | undefined {
    for (const i of this.queue) {
      if (i.kind === 'json') continue;
      if (i.kind === 'job' && !i.job.settled) return i.job;
      if (--count <= 0) return undefined;
    }
    return undefined;
  }

  /** The head frame is due but still being encoded: go on when it is. */
  private awaitEncoding(job: EncodeJob): void {
    if (this.awaiting === job) return;
    this.awaiting = job;
    job.onSettled(() => {
      if (this.awaiting !== job) return;
      this.awaiting = undefined;
      this.pump('encoding');
    });
  }
}

/** The frame's packet; a frame that cannot be encoded (its session is closing) is dropped, never thrown into a timer. */
function packet(opus: Uint8Array | (() => Uint8Array)): Uint8Array | undefined {
  if (typeof opus !== 'function') return opus;
  try {
    return opus();
  } catch {
    return undefined;
  }
}

/** A conversation's pacer: its device's downlink, its limits and metrics; `beforeFrame` runs as each frame goes out. */
export function sessionPacer(d: ConverseSessionDeps, beforeFrame: () => void): DownlinkPacer {
  return new DownlinkPacer(
    {
      frame: (opus, ts) => {
        beforeFrame();
        d.metrics.framesDown.inc();
        d.out.frame(opus, ts);
      },
      json: (m) => d.out.json(m),
    },
    {
      frameMs: d.limits.frameMs,
      leadFrames: d.limits.leadFrames,
      maxLeadFrames: d.limits.maxLeadFrames,
      maxQueued: d.limits.maxQueuedFrames,
      onLate: (cause) => d.metrics.framesLate[cause].inc(),
      ...(d.now ? { now: d.now } : {}),
    },
  );
}
