import type { Logger } from 'pino';
import { ThrottledLog } from '../throttle/throttled-log.js';

/** Bad frames from one session logged one by one, per minute, before the rest are only counted. */
const BAD_INPUT_LINES_PER_MINUTE = 20;

/**
 * Bad input from one device, logged within a budget (the shared ThrottledLog: 20 lines a minute, then the
 * next line says how many were held back), so a hostile device cannot flood the log; `badInputs` counts
 * them all, and the metrics count every frame. Built on first use: a well-behaved device never pays for it.
 */
export class BadInputLog {
  private count = 0;
  private throttles: Partial<Record<'warn' | 'debug', ThrottledLog>> | undefined;

  constructor(
    private readonly log: Logger,
    private readonly now: () => number = Date.now,
  ) {}

  note(level: 'warn' | 'debug', obj: Record<string, unknown>, msg: string): void {
    const n = ++this.count;
    const throttle = ((this.throttles ??= {})[level] ??= new ThrottledLog(
      this.log,
      level,
      { linesPerWindow: BAD_INPUT_LINES_PER_MINUTE, windowMs: 60_000 },
      this.now,
    ));
    throttle.write({ ...obj, badInputs: n }, msg);
  }
}
