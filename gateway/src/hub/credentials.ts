import { z } from 'zod';
import { GatewayError } from '../errors.js';

/**
 * Per-request credentials. A caller passes tokens (body `tokens`, or header `X-Voxgate-Tokens` as base64
 * JSON); `${name}` placeholders in a server's `headers_template` are filled from them for that request only.
 * Tokens are never stored and never logged (see REDACT_PATHS).
 */
export type Tokens = Readonly<Record<string, string>>;

const TOKEN_NAME = /^[A-Za-z0-9_.-]{1,64}$/;
export const TokensSchema = z
  .record(z.string().regex(TOKEN_NAME, 'token names: letters, digits, _ . - (1-64)'), z.string().max(8192))
  .refine((t) => Object.keys(t).length <= 64, 'at most 64 tokens');
export const MAX_TOKENS_HEADER = 64 * 1024;

const PLACEHOLDER = /\$\{([^}]*)\}/g;

/**
 * Fill a template. A missing token is a clear error naming it (`MISSING_TOKEN`); with `lenient`, headers
 * whose tokens are missing are left out instead (used for connections opened at start, with no caller).
 */
export function fillHeaders(template: Readonly<Record<string, string>>, tokens: Tokens | undefined, server: string, lenient = false): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [header, value] of Object.entries(template)) {
    let missing: string | undefined;
    const filled = value.replace(PLACEHOLDER, (_m, name: string) => {
      const v = tokens?.[name];
      if (v === undefined) {
        missing ??= name;
        return '';
      }
      return v;
    });
    if (missing !== undefined) {
      if (lenient) continue;
      throw new GatewayError('MISSING_TOKEN', `server "${server}" needs the token "${missing}" (header ${header}); pass it in "tokens" or X-Voxgate-Tokens`, {
        token: missing,
        server,
      });
    }
    if (/[\r\n\0]/.test(filled)) throw new GatewayError('INVALID_REQUEST', `a token for header ${header} of server "${server}" contains a line break`);
    out[header] = filled;
  }
  return out;
}

/** `X-Voxgate-Tokens: base64(JSON object)`. Bad input is a 400 that never echoes the value. */
export function parseTokensHeader(value: string | string[] | undefined): Tokens | undefined {
  if (value === undefined) return undefined;
  const v = Array.isArray(value) ? value.join('') : value;
  if (v.length > MAX_TOKENS_HEADER) throw new GatewayError('INVALID_REQUEST', 'X-Voxgate-Tokens is too large');
  let json: unknown;
  try {
    json = JSON.parse(Buffer.from(v, 'base64').toString('utf8'));
  } catch {
    throw new GatewayError('INVALID_REQUEST', 'X-Voxgate-Tokens must be base64 of a JSON object {"name": "token"}');
  }
  return parseTokens(json, 'X-Voxgate-Tokens');
}

export function parseTokens(json: unknown, where = 'tokens'): Tokens {
  const r = TokensSchema.safeParse(json);
  if (!r.success)
    throw new GatewayError('INVALID_REQUEST', `${where} must be a JSON object of up to 64 string tokens: ${r.error.issues[0]?.message ?? 'invalid'}`);
  return r.data;
}

/** Body tokens win over header tokens of the same name. */
export function mergeTokens(a: Tokens | undefined, b: Tokens | undefined): Tokens | undefined {
  if (!a) return b;
  if (!b) return a;
  return { ...a, ...b };
}
