import type { Logger } from 'pino';

/** Bad frames from one session logged one by one before the log thins out to one line per thousand. */
const BAD_INPUT_LOG_LINES = 20;

/**
 * Bad input from one device, logged within a budget: the first lines, then one line per thousand, so a
 * hostile device cannot flood the log (the metrics count every frame).
 */
export class BadInputLog {
  private count = 0;

  constructor(private readonly log: Logger) {}

  note(level: 'warn' | 'debug', obj: Record<string, unknown>, msg: string): void {
    const n = ++this.count;
    if (n <= BAD_INPUT_LOG_LINES || n % 1000 === 0) this.log[level]({ ...obj, badInputs: n }, msg);
  }
}
