import { ServerResponse } from 'node:http';

const flushNow = (res: ServerResponse) => ServerResponse.prototype.flushHeaders.call(res);

/**
 * The SDK's Node adapter writes an SSE answer to a POST (a tools/call's result, say) in two writes to the
 * socket: the headers on their own as soon as the stream opens (`flushHeaders`), then the event with the
 * end. Most calls answer within milliseconds: their headers wait for the first event and leave with it, one
 * write instead of two (that write alone was ~15 % of the gateway's CPU per call at 50 sessions; issue 21).
 * A stream with no event within `maxDelayMs` gets its headers then, as before. One sweep for all waiting
 * answers, armed only while some wait.
 */
export class DeferredHeaders {
  private readonly waiting = new Map<ServerResponse, number>();
  private timer: NodeJS.Timeout | undefined;

  constructor(private readonly maxDelayMs = 1000) {}

  /** Before the adapter sees `res`: its `flushHeaders` now waits for the first event, at most `maxDelayMs`. */
  defer(res: ServerResponse): void {
    // (`headersSent` cannot tell: it is true from `writeHead` on, before anything reached the socket.
    // Flushing headers that already left with an event writes nothing.)
    res.flushHeaders = () => {
      this.waiting.set(res, Date.now() + this.maxDelayMs);
      this.timer ??= setInterval(() => this.sweep(), Math.max(10, this.maxDelayMs / 4)).unref();
    };
  }

  /** Answers still waiting (for the sessions test: none once every answer has gone). */
  get size(): number {
    return this.waiting.size;
  }

  private sweep(): void {
    const now = Date.now();
    for (const [res, due] of this.waiting) {
      if (res.writableEnded || res.destroyed) this.waiting.delete(res);
      else if (due <= now) {
        this.waiting.delete(res);
        flushNow(res);
      }
    }
    if (this.waiting.size === 0) this.close();
  }

  close(): void {
    clearInterval(this.timer);
    this.timer = undefined;
    this.waiting.clear();
  }
}
