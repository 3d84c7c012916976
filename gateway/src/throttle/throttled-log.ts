import { BoundedLru } from './bounded-lru.js';

export interface ThrottleOptions {
  /** Lines written per window and key; past it lines are only counted. */
  linesPerWindow: number;
  windowMs: number;
  /** Keys tracked at once (LRU); a forgotten key starts a fresh window. */
  maxKeys?: number;
}

type Level = 'debug' | 'info' | 'warn' | 'error';

/**
 * For the lines about input the gateway refused before it knew who sent it, or from a party it cannot slow down
 * otherwise (a device connection with bad credentials, an MQTT client that is neither a device nor a backend, broken
 * framing, a denied topic, an /mcp request from a foreign Host or Origin, a vision upload without a valid token, a
 * firmware download past its bound), keyed by kind: at most 10 of a kind per 10 s. Each takes one request or
 * connection to cause, and a key per device, client or address does not hold when the sender changes it every time:
 * without a bound per kind, a flood of requests was a flood of log lines. The metrics count every refusal, and the next
 * line written carries how many were held back (`suppressed`).
 */
export const REFUSAL_LINES: ThrottleOptions = { linesPerWindow: 10, windowMs: 10_000, maxKeys: 32 };

/** A pino logger, or fastify's (the levels this needs). */
export type LevelLog = { [L in Level]: (obj: Record<string, unknown>, msg: string) => void };

interface Window {
  start: number;
  written: number;
  suppressed: number;
}

/**
 * A log that writes at most `linesPerWindow` lines per `windowMs` for each key (a device, an address, or
 * the one key `''`): what a hostile peer can trigger comes in floods, and a flood must not become a log
 * flood (the metrics count every occurrence). The next line written after some were held back carries
 * their number as `suppressed`.
 */
export class ThrottledLog {
  private readonly windows: BoundedLru<string, Window>;
  private readonly now: () => number;

  constructor(
    private readonly log: LevelLog,
    private readonly level: Level,
    private readonly o: ThrottleOptions,
    now: () => number = Date.now,
  ) {
    this.windows = new BoundedLru(o.maxKeys ?? 1);
    this.now = now;
  }

  /** Writes the line unless this key's window is spent; says whether it was written. */
  write(fields: Record<string, unknown>, msg: string, key = ''): boolean {
    const suppressed = this.admit(key);
    if (suppressed === undefined) return false;
    this.log[this.level](suppressed > 0 ? { ...fields, suppressed } : fields, msg);
    return true;
  }

  /**
   * Takes a line of this key's window for a line written elsewhere (a budget shared by many loggers): undefined when
   * the window is spent (the line is counted as held back), else how many were held back before it.
   */
  admit(key = ''): number | undefined {
    const now = this.now();
    let w = this.windows.get(key);
    if (!w) {
      w = { start: now, written: 0, suppressed: 0 };
      this.windows.set(key, w);
    }
    // A wall clock stepped back (NTP) starts a window too: otherwise lines were held back until it caught up.
    if (now - w.start >= this.o.windowMs || now < w.start) {
      w.start = now;
      w.written = 0;
    }
    if (w.written >= this.o.linesPerWindow) {
      w.suppressed++;
      return undefined;
    }
    w.written++;
    const suppressed = w.suppressed;
    w.suppressed = 0;
    return suppressed;
  }

  forget(key: string): void {
    this.windows.delete(key);
  }
}
