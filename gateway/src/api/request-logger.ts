import type { FastifyBaseLogger } from 'fastify';
import type { Bindings, ChildLoggerOptions, Level, Logger } from 'pino';

/**
 * A request's logger, made when the request first logs at an enabled level. Fastify makes a pino child
 * per request, and with redaction on, building its bindings went through the redactor: ~2 % of the
 * gateway's CPU per call (profile in docs/performance.md), for a logger most requests never use.
 */
class LazyChildLogger {
  private made: FastifyBaseLogger | undefined;

  constructor(
    private readonly parent: FastifyBaseLogger,
    private readonly bindings: Bindings,
    private readonly opts: ChildLoggerOptions,
  ) {}

  private real(): FastifyBaseLogger {
    return (this.made ??= this.parent.child(this.bindings, this.opts));
  }

  private log(level: Level, args: unknown[]): void {
    if (this.made === undefined && !(this.parent as Logger).isLevelEnabled(level)) return;
    (this.real()[level] as (...a: unknown[]) => void)(...args);
  }

  get level(): string {
    return this.made?.level ?? this.parent.level;
  }

  set level(level: string) {
    this.real().level = level;
  }

  fatal(...a: unknown[]): void {
    this.log('fatal', a);
  }
  error(...a: unknown[]): void {
    this.log('error', a);
  }
  warn(...a: unknown[]): void {
    this.log('warn', a);
  }
  info(...a: unknown[]): void {
    this.log('info', a);
  }
  debug(...a: unknown[]): void {
    this.log('debug', a);
  }
  trace(...a: unknown[]): void {
    this.log('trace', a);
  }
  silent(): void {}

  child(bindings: Bindings, opts?: ChildLoggerOptions): FastifyBaseLogger {
    return this.real().child(bindings, opts);
  }
}

/** Fastify's `childLoggerFactory`: the request's child logger, made only if it is used (see LazyChildLogger). */
export const lazyChildLogger = (logger: FastifyBaseLogger, bindings: Bindings, opts: ChildLoggerOptions): FastifyBaseLogger =>
  // A route with its own log level needs its child at once (the level lives on it).
  opts.level !== undefined ? logger.child(bindings, opts) : (new LazyChildLogger(logger, bindings, opts) as unknown as FastifyBaseLogger);

/**
 * `lazyChildLogger` under `parent`, for an app made without `loggerInstance` (whose own logger is then fastify's
 * null logger, the one it hands the factory): requests log through `parent` with their id, as with
 * `loggerInstance`, and fastify sets up no response listeners per request (it does whenever it has a logger of its
 * own, for its request-completed line, which `disableRequestLogging` turns off anyway).
 */
export function requestLoggers(parent: FastifyBaseLogger): (logger: FastifyBaseLogger, bindings: Bindings, opts: ChildLoggerOptions) => FastifyBaseLogger {
  return (_nullLogger, bindings, opts) => lazyChildLogger(parent, bindings, opts);
}
