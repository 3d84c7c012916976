import type { Logger } from 'pino';
import { ThrottledLog } from '../throttle/throttled-log.js';

/** Lines per kind and window: an operator onboarding devices sees the first ones; a flood is counted. */
const LINES_PER_WINDOW = 10;
const WINDOW_MS = 10_000;
/** Kinds of refusal a link writes (a handful each); a bound all the same. */
const MAX_KINDS = 32;

/**
 * The warn lines a device link writes about a connection it refused or dropped: bad credentials, a client that is
 * neither a device nor a backend, broken framing, a denied topic. Each takes only a new connection to cause, and a
 * key per device or client does not hold when the sender changes its id with every connection: without a bound per
 * kind, a flood of connections was a flood of log lines. The metrics count every refusal, `GET /v1/enrollments/refused`
 * lists the refused devices, and the next line written carries how many were held back (`suppressed`).
 */
export class RefusalLog {
  private readonly lines: ThrottledLog;

  constructor(log: Pick<Logger, 'warn' | 'info' | 'error' | 'debug'>) {
    this.lines = new ThrottledLog(log, 'warn', { linesPerWindow: LINES_PER_WINDOW, windowMs: WINDOW_MS, maxKeys: MAX_KINDS });
  }

  /** Writes the line unless `kind` has had its lines for this window. */
  warn(kind: string, fields: Record<string, unknown>, msg: string): boolean {
    return this.lines.write(fields, msg, kind);
  }
}
