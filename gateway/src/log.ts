import { isatty } from 'node:tty';
import { pino, type Logger } from 'pino';
import { build as prettyStream } from 'pino-pretty';

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

export type { Logger };
