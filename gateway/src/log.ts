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
    return pino(opts, prettyStream({ destination: destination ?? 1, sync: true, colorize: destination === undefined && process.stdout.isTTY, ignore: 'service' }));
  }
  return destination ? pino(opts, destination as pino.DestinationStream) : pino(opts);
}

export type { Logger };
