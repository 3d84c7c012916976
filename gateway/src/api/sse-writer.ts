import type { ServerResponse } from 'node:http';
import type { FastifyReply } from 'fastify';
import type { Metrics } from '../metrics.js';
import { REFUSAL_LINES, ThrottledLog, type LevelLog } from '../throttle/throttled-log.js';

/** Between events a tool may run for long, or no device event comes: a comment now and then keeps proxies from closing the stream. */
const HEARTBEAT_MS = 15_000;

/** Why a stream was cut past the unread bound, as `voxgate_sse_streams_dropped_total` counts it: a `/v1/events` reader, or a streamed assistant turn's. */
export type CutReason = 'slow' | 'slow_turn';
/** … and past the write timeout, whichever the route (the log line names it). */
const STALLED = 'write_timeout';

export interface SseWriter {
  /** Writes one frame; false when it was not: the client is gone, the answer is over, or this write cut the stream. */
  write(frame: string): boolean;
  /** Ends the answer; nothing when it is over already. */
  end(): void;
}

/**
 * The API's Server-Sent Events answers (`GET /v1/events`, a streamed assistant turn or chat completion): one bound
 * on what a client may leave unread (`events.maxBufferedBytes`), cut, counted and logged alike. Past the bound, the
 * next write cuts the stream instead of queuing more in the gateway's memory; checked before a write, so one large
 * event always goes out whole. Without it, a caller that stopped reading (a zero TCP window keeps the connection
 * alive) had a whole turn's answer queued for it while the model, paid per token, talked on for nobody.
 *
 * A second bound, in time: once bytes wait, the socket must take some of them within `writeTimeoutMs` (each chunk it
 * takes restarts the clock), or the stream is cut alike. Below the unread bound, and above all once a turn's answer
 * has ended (no later write checks the bound), a caller that stopped reading held that memory and the socket for as
 * long as it liked.
 */
export class SseAnswers {
  private readonly cuts: ThrottledLog;

  constructor(private readonly o: { maxUnreadBytes: number; writeTimeoutMs: number; metrics: Pick<Metrics, 'sseDropped'>; log: LevelLog }) {
    this.cuts = new ThrottledLog(o.log, 'warn', REFUSAL_LINES);
  }

  /**
   * Takes the reply over (hijacked) and starts the stream: headers, and a heartbeat unless `heartbeat: false`. `onCut`
   * stops what feeds the stream (a turn is cancelled as a disconnect would). A write after the client went away is
   * dropped, never thrown.
   */
  open(reply: FastifyReply, o: { reason: CutReason; onCut?: () => void; fields?: Record<string, unknown>; heartbeat?: boolean }): SseWriter {
    reply.hijack();
    const res = reply.raw;
    writeSseHead(res);
    const over = () => res.destroyed || res.writableEnded;
    const cut = (reason: string, fields: Record<string, unknown>) => {
      this.o.metrics.sseDropped.inc({ reason });
      const route = reply.request.routeOptions.url;
      this.cuts.write({ ...o.fields, route, reason, ...fields }, 'SSE client stopped reading; its stream was cut', route);
      const ended = res.writableEnded;
      res.destroy();
      if (!ended) o.onCut?.();
    };
    // The write timeout. One timer at a time, not one per write (a busy /v1/events stream writes often): when it
    // fires it looks at when the socket last took a chunk, and re-arms for the rest, or cuts, or stops once none wait.
    const limit = this.o.writeTimeoutMs;
    let takenAt = 0;
    let stall: ReturnType<typeof setTimeout> | undefined;
    const taken = () => void (takenAt = performance.now());
    const check = () => {
      stall = undefined;
      if (res.destroyed || res.writableLength === 0) return;
      const idle = performance.now() - takenAt;
      if (idle >= limit) return cut(STALLED, { unread: res.writableLength, writeTimeoutMs: limit });
      stall = setTimeout(check, limit - idle);
    };
    const watch = () => {
      if (stall !== undefined) return;
      taken();
      stall = setTimeout(check, limit);
    };
    res.on('close', () => clearTimeout(stall));
    const write = (frame: string): boolean => {
      if (over()) return false;
      const unread = res.writableLength;
      if (unread <= this.o.maxUnreadBytes) return (res.write(frame, taken), watch(), true);
      cut(o.reason, { unread, maxUnreadBytes: this.o.maxUnreadBytes });
      return false;
    };
    if (o.heartbeat !== false) {
      const heartbeat = setInterval(() => write(': ping\n\n'), HEARTBEAT_MS);
      res.on('close', () => clearInterval(heartbeat));
    }
    return { write, end: () => void (over() || (res.end(taken), watch())) };
  }
}

/** An SSE frame: an event name (or none) and its data as JSON (a string goes as it is, as OpenAI's `[DONE]`). */
export function sseEvent(event: string | undefined, data: unknown): string {
  return `${event === undefined ? '' : `event: ${event}\n`}data: ${typeof data === 'string' ? data : JSON.stringify(data)}\n\n`;
}

/** Starts a Server-Sent Events answer: no caching or transforming, and no buffering by a proxy in front. */
function writeSseHead(res: ServerResponse): void {
  res.writeHead(200, {
    'content-type': 'text/event-stream; charset=utf-8',
    'cache-control': 'no-cache, no-transform',
    connection: 'keep-alive',
    'x-accel-buffering': 'no',
  });
}
