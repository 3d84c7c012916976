import { pino, type Logger } from 'pino';

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

export function createLogger(level: string, destination?: NodeJS.WritableStream): Logger {
  const opts = { level, redact: { paths: REDACT_PATHS, censor: '[REDACTED]' }, base: { service: 'voxgate' } };
  return destination ? pino(opts, destination as pino.DestinationStream) : pino(opts);
}

export type { Logger };
