import { createRequire } from 'node:module';
import { isatty } from 'node:tty';
import { pino, type Bindings, type ChildLoggerOptions, type Level, type Logger } from 'pino';
import type { build as PrettyStream } from 'pino-pretty';

/** Secrets never reach a log line, wherever they sit in a logged object. */
export const REDACT_PATHS = [
  'password',
  'token',
  'apiKey',
  'secret',
  'deviceSecret',
  'authorization',
  '*.password',
  '*.token',
  '*.apiKey',
  '*.apiKeys',
  '*.secret',
  '*.deviceSecret',
  '*.deviceTokens',
  '*.authorization',
  'req.headers.authorization',
  'req.headers["x-voxgate-tokens"]',
  'headers.authorization',
  'vision.token',
  '*.vision.token',
  'explainerToken',
  '*.explainerToken',
  // MCP hub: caller tokens, filled header templates, stdio env (API keys live there)
  'tokens',
  '*.tokens',
  'headers_template',
  '*.headers_template',
  'headersTemplate',
  '*.headersTemplate',
  'headers["x-voxgate-tokens"]',
  '*.headers["x-voxgate-tokens"]',
  'env',
  '*.env',
  'apiKeyTenants',
  '*.apiKeyTenants',
  // voice relay upstream credentials
  'hmacSecret',
  '*.hmacSecret',
];

/** `json`: one JSON object per line, for machines (the default). `pretty`: colored lines for people. */
export type LogFormat = 'json' | 'pretty';

export function createLogger(level: string, destination?: NodeJS.WritableStream, format: LogFormat = 'json'): Logger {
  const opts = { level, redact: { paths: REDACT_PATHS, censor: '[REDACTED]' }, base: { service: 'voxgate' } };
  if (format === 'pretty') {
    // In this thread and synchronous (no transport worker): every line is written before a process.exit.
    // Redaction runs before formatting, so pretty lines hide the same secrets.
    const out = destination ?? standardOutput(true);
    // Loaded only for pretty logs (its formatters and colours are ~0.4 MiB of heap a JSON-logging gateway never uses);
    // synchronously, as the logger is made before anything else runs.
    const prettyStream = (createRequire(import.meta.url)('pino-pretty') as { build: typeof PrettyStream }).build;
    return pino(opts, prettyStream({ destination: out, sync: true, colorize: destination === undefined && process.stdout.isTTY, ignore: 'service' }));
  }
  // Synchronous to a terminal (as node's own process.stdout is): a write to a terminal that has hung up
  // then fails at once, where an asynchronous one could still be pending, and retried forever, at exit.
  return pino(opts, (destination as pino.DestinationStream | undefined) ?? standardOutput(isatty(1)));
}

/**
 * fd 1 as pino's destination, which goes quiet when standard output goes away: EIO once the terminal has
 * hung up (a closed SSH session), EPIPE once the reader has closed. Left alone, EIO makes every line an
 * uncaught error and the flush at exit retry forever, so a hung-up gateway would never exit.
 */
function standardOutput(sync: boolean): pino.DestinationStream {
  const out = pino.destination({ fd: 1, sync });
  const quiet = (err: NodeJS.ErrnoException) => {
    if (err.code !== 'EIO' && err.code !== 'EPIPE') throw err;
    out.write = () => true;
    out.flushSync = () => undefined;
    out.end = () => undefined;
  };
  out.on('error', quiet);
  return out;
}

/**
 * A logger whose lines carry `bindings`, as `parent.child(bindings)`'s would, without a pino child: a child
 * costs ~500 B of heap (its serialized bindings, formatters, level methods), and every connected device
 * held one for the few lines it writes in its life. Here the bindings are merged into each line instead
 * (the same keys, in the same place: after the base fields, before the line's own).
 */
class BoundLog {
  constructor(
    private readonly parent: Logger,
    private readonly bindings: Bindings,
  ) {}

  get level(): string {
    return this.parent.level;
  }

  isLevelEnabled(level: string): boolean {
    return this.parent.isLevelEnabled(level);
  }

  private write(level: Level, first: unknown, rest: unknown[]): void {
    if (!this.parent.isLevelEnabled(level)) return;
    const log = this.parent[level] as (obj: object, ...args: unknown[]) => void;
    if (typeof first === 'string') return log.call(this.parent, this.bindings, first, ...rest);
    // An Error is logged under `err`, as pino does with an Error as the first argument.
    const own = first instanceof Error ? { err: first } : (first as object | null | undefined);
    log.call(this.parent, { ...this.bindings, ...own }, ...rest);
  }

  fatal(first: unknown, ...rest: unknown[]): void {
    this.write('fatal', first, rest);
  }
  error(first: unknown, ...rest: unknown[]): void {
    this.write('error', first, rest);
  }
  warn(first: unknown, ...rest: unknown[]): void {
    this.write('warn', first, rest);
  }
  info(first: unknown, ...rest: unknown[]): void {
    this.write('info', first, rest);
  }
  debug(first: unknown, ...rest: unknown[]): void {
    this.write('debug', first, rest);
  }
  trace(first: unknown, ...rest: unknown[]): void {
    this.write('trace', first, rest);
  }
  silent(): void {}

  child(bindings: Bindings, opts?: ChildLoggerOptions): Logger {
    return this.parent.child({ ...this.bindings, ...bindings }, opts);
  }
}

/**
 * `parent.child(bindings)` for a logger held by something there are many of (a device's session): the
 * same lines, without a pino child per holder (see BoundLog). Its level is the parent's.
 */
export function boundLog(parent: Logger, bindings: Bindings): Logger {
  return new BoundLog(parent, bindings) as unknown as Logger;
}

export type { Logger };
