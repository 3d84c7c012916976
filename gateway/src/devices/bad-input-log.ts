import type { Logger } from 'pino';
import { ThrottledLog, type LevelLog, type ThrottleOptions } from '../throttle/throttled-log.js';

/** Bad frames from one session logged one by one, per minute, before the rest are only counted. */
const BAD_INPUT_LINES_PER_MINUTE = 20;

/** Bad-input lines of all sessions together, per 10 s: what one session may write is no bound on a flood of them. */
export const BAD_INPUT_LINES_ALL: ThrottleOptions = { linesPerWindow: 100, windowMs: 10_000 };

/**
 * The gateway's one budget for bad-input lines, shared by every session (a ThrottledLog whose windows are taken with
 * `admit`). Each new connection is a new session with a fresh budget of 20 lines, so a device that reconnected (or,
 * where any device may connect, took a new device id) for every burst of bad frames wrote 20 lines per connection
 * without end. A line past this budget is held back and counted; the next one written carries how many (`suppressedAll`).
 */
export type BadInputBudget = Pick<ThrottledLog, 'admit'>;

export function badInputBudget(log: LevelLog, o: ThrottleOptions = BAD_INPUT_LINES_ALL, now: () => number = Date.now): BadInputBudget {
  return new ThrottledLog(log, 'warn', o, now);
}

/**
 * Bad input from one device, logged within a budget (the shared ThrottledLog: 20 lines a minute, then the
 * next line says how many were held back), and within the gateway's budget for all sessions when one is given, so a
 * hostile device cannot flood the log; `badInputs` counts them all, and the metrics count every frame. Built on
 * first use: a well-behaved device never pays for it.
 */
export class BadInputLog {
  private count = 0;
  private throttles: Partial<Record<'warn' | 'debug', ThrottledLog>> | undefined;
  private readonly sink: LevelLog;

  constructor(
    log: Logger,
    private readonly now: () => number = Date.now,
    budget?: BadInputBudget,
  ) {
    this.sink = budget ? gated(log, budget) : log;
  }

  note(level: 'warn' | 'debug', obj: Record<string, unknown>, msg: string): void {
    const n = ++this.count;
    const throttle = ((this.throttles ??= {})[level] ??= new ThrottledLog(
      this.sink,
      level,
      { linesPerWindow: BAD_INPUT_LINES_PER_MINUTE, windowMs: 60_000 },
      this.now,
    ));
    throttle.write({ ...obj, badInputs: n }, msg);
  }
}

/** The session's logger, each line first through the gateway's budget. */
function gated(log: Logger, budget: BadInputBudget): LevelLog {
  const through =
    (level: keyof LevelLog) =>
    (obj: Record<string, unknown>, msg: string): void => {
      const held = budget.admit();
      if (held !== undefined) log[level](held > 0 ? { ...obj, suppressedAll: held } : obj, msg);
    };
  return { debug: through('debug'), info: through('info'), warn: through('warn'), error: through('error') };
}
