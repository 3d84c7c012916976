import type { ServerResponse } from 'node:http';

/** The SSE headers the SDK's transport sends (and the session id once there is one). */
export function sseHeaders(sessionId: string | undefined): Record<string, string> {
  const h: Record<string, string> = {
    'content-type': 'text/event-stream',
    'cache-control': 'no-cache, no-transform',
    connection: 'keep-alive',
    'x-accel-buffering': 'no',
  };
  if (sessionId !== undefined) h['mcp-session-id'] = sessionId;
  return h;
}

/** How long a POST's answer may hold its headers (and priming event) waiting for the answer itself. */
export const HOLD_MS = 1000;
/** A comment on open streams this often, so proxies keep them (the SDK's default). */
export const KEEP_ALIVE_MS = 15_000;
/**
 * What a client may leave unread on a started stream: past it, the next write cuts the stream instead of queuing more
 * in the gateway's memory (the client resumes with Last-Event-ID: its events are in the event store). Checked before
 * a write, so one large answer always goes out whole. Without it, a client that held a GET stream and stopped reading
 * (a zero TCP window keeps the connection alive; the idle sweep leaves a session with an open stream) had every
 * notification of its session queued in Node's write buffer, without bound.
 */
export const MAX_UNREAD_BYTES = 1 << 20;

/**
 * The same bound on a response another writer streams: the SDK's Node adapter, for the stateless path's
 * `subscriptions/listen` streams and SSE answers. The adapter honours backpressure (a `write` that returns false makes
 * it wait for `drain`), so a client that read nothing kept Node's buffer small, but the SDK's listen stream (a web
 * ReadableStream its notifications are enqueued on whether read or not) queued every change notification, without
 * bound. Here every write is accepted into Node's buffer, where what waits is seen, and once more than `maxBytes`
 * waits the next write destroys the response instead (`oncut` once; its 'close' ends the adapter's loop and the
 * SDK's subscription). Checked before a write, so one large answer always goes out whole.
 */
export function boundUnread(res: ServerResponse, oncut: () => void, maxBytes = MAX_UNREAD_BYTES): void {
  const write = res.write.bind(res) as (...args: unknown[]) => boolean;
  res.write = ((...args: unknown[]) => {
    if (res.writableLength <= maxBytes) return (write(...args), true);
    if (!res.destroyed) {
      res.destroy();
      oncut();
    }
    return false;
  }) as ServerResponse['write'];
}

/**
 * Streams whose start is held: a POST's headers and priming event wait for its first real event, so an answer
 * that comes within `HOLD_MS` leaves with them in one write (and, when it ends the stream, as one body with
 * its length). One sweep for all, armed only while some wait.
 */
export class HeldStreams {
  private readonly waiting = new Map<SseStream, number>();
  private timer: NodeJS.Timeout | undefined;

  constructor(private readonly holdMs = HOLD_MS) {}

  /** @internal */ hold(s: SseStream): void {
    this.waiting.set(s, Date.now() + this.holdMs);
    this.timer ??= setInterval(() => this.sweep(), Math.max(10, this.holdMs / 4)).unref();
  }
  /** @internal */ release(s: SseStream): void {
    this.waiting.delete(s);
  }

  get size(): number {
    return this.waiting.size;
  }

  private sweep(): void {
    const now = Date.now();
    for (const [s, due] of this.waiting) if (due <= now) s.flush();
    if (this.waiting.size === 0) this.close();
  }

  close(): void {
    clearInterval(this.timer);
    this.timer = undefined;
    this.waiting.clear();
  }
}

/**
 * One SSE answer on a Node `ServerResponse`: events are text written straight to the socket, without web
 * streams. Until `flush` (or the end), what is written is kept and leaves with the headers in one write.
 */
export class SseStream {
  private pending = '';
  /**
   * The priming event not yet made: it is made (and its id stored) only when the stream starts as SSE, so that an
   * answer which comes alone within the hold leaves as plain JSON, with no event a client could resume from.
   */
  private primeFor: string | undefined;
  private started = false;
  private ended = false;
  private keepAlive: NodeJS.Timeout | undefined;
  private flushQueued = false;
  /** Called once, with this stream, when the client goes away before the stream ended (the SDK's `cancel`). */
  oncancel: ((stream: SseStream) => void) | undefined;
  /** Called when the stream is cut for what its client left unread (before `oncancel`): for the operator's count. */
  oncut: (() => void) | undefined;

  constructor(
    private readonly res: ServerResponse,
    private readonly headers: Record<string, string>,
    private readonly held: HeldStreams | undefined,
    /** Makes the priming event of a stream (its id stored first); one function per transport, not one per request. */
    private readonly primer?: (streamId: string) => string,
  ) {
    res.once('close', () => {
      if (this.ended) return;
      this.ended = true;
      this.stopTimers();
      this.oncancel?.(this);
    });
  }

  get open(): boolean {
    return !this.ended && !this.res.destroyed;
  }

  /** Holds the start (headers and whatever is written) for up to `HOLD_MS`, or until an event that does not wait. */
  hold(): void {
    if (!this.started && this.held) this.held.hold(this);
  }

  /** The stream starts with `streamId`'s priming event, made when the stream is first written, flushed or ended as SSE. */
  primeWith(streamId: string): void {
    if (this.primer) this.primeFor = streamId;
  }

  /** Makes the priming event now, if one is due: before the stream's next event is stored, so its id comes first. */
  primeNow(): void {
    const streamId = this.primeFor;
    if (streamId === undefined || !this.primer) return;
    this.primeFor = undefined;
    if (this.open) this.pending = this.primer(streamId) + this.pending;
  }

  /**
   * Answers with `text` as one `application/json` body, if nothing was started or written yet (a priming event
   * not yet made is dropped: the answer is whole, there is nothing to resume). False when the stream has begun.
   */
  answerJson(text: string, headers: Record<string, string>): boolean {
    if (this.started || this.pending !== '' || !this.open) return false;
    this.ended = true;
    this.primeFor = undefined;
    this.stopTimers();
    headers['content-length'] = String(Buffer.byteLength(text));
    this.res.writeHead(200, headers);
    this.res.end(text);
    return true;
  }

  /**
   * Writes `text` (whole SSE events). A held stream keeps it with its start: `wait` leaves it held (the priming
   * event), anything else is flushed on the next tick, unless the stream ends first (one write for both).
   */
  write(text: string, wait = false): boolean {
    if (!this.open) return false;
    if (this.started) return this.send(text);
    this.primeNow();
    this.pending += text;
    if (!wait && !this.flushQueued) {
      this.flushQueued = true;
      process.nextTick(() => this.flush());
    }
    return true;
  }

  /** Sends the headers and what was kept; from now on events leave as they are written. */
  flush(): void {
    this.held?.release(this);
    if (this.started || !this.open) return;
    this.primeNow();
    this.started = true;
    this.res.writeHead(200, this.headers);
    if (this.pending) this.res.write(this.pending);
    else this.res.flushHeaders();
    this.pending = '';
    this.keepAlive = setInterval(() => {
      if (this.open) this.send(': keepalive\n\n');
    }, KEEP_ALIVE_MS).unref();
  }

  /** Writes to the socket, or cuts the stream when the client left more than MAX_UNREAD_BYTES unread (false then). */
  private send(text: string): boolean {
    if (this.res.writableLength <= MAX_UNREAD_BYTES) return (this.res.write(text), true);
    // Gone as a client that went away is: forgotten by its transport (oncancel), so a new GET may take its place.
    this.ended = true;
    this.stopTimers();
    this.res.destroy();
    this.oncut?.();
    this.oncancel?.(this);
    return false;
  }

  /** Ends the answer; one never started leaves whole, with its length. */
  end(): void {
    if (this.ended) return;
    this.primeNow();
    this.ended = true;
    this.stopTimers();
    if (this.res.destroyed) return;
    if (this.started) {
      this.res.end();
      return;
    }
    this.res.writeHead(200, { ...this.headers, 'content-length': String(Buffer.byteLength(this.pending)) });
    this.res.end(this.pending);
    this.pending = '';
  }

  private stopTimers(): void {
    this.held?.release(this);
    clearInterval(this.keepAlive);
    this.keepAlive = undefined;
  }
}
