import { createHmac, timingSafeEqual } from 'node:crypto';

/**
 * The xiaozhi server's device token: `base64url(HMAC-SHA256(key, "clientId|deviceId|ts")).ts`, ts in
 * seconds. The same construction mints vision tokens, with a different subject.
 */
export function mintDeviceToken(key: string, clientId: string, deviceId: string, tsSeconds: number): string {
  const ts = Math.floor(tsSeconds);
  return `${sign(key, `${clientId}|${deviceId}|${ts}`)}.${ts}`;
}

export type TokenCheck = { ok: true; issuedAt: number } | { ok: false; reason: 'malformed' | 'bad_signature' | 'expired' | 'future' };

export interface VerifyOptions {
  nowSeconds: number;
  /** A token older than this is refused. */
  maxAgeSeconds: number;
  /** Clock skew tolerated for tokens dated in the future. */
  skewSeconds?: number;
}

export function verifyDeviceToken(key: string, token: string, clientId: string, deviceId: string, opts: VerifyOptions): TokenCheck {
  const m = /^([A-Za-z0-9_-]{43})\.(\d{1,12})$/.exec(token);
  if (!m) return { ok: false, reason: 'malformed' };
  const ts = Number(m[2]);
  const expected = Buffer.from(sign(key, `${clientId}|${deviceId}|${ts}`));
  const given = Buffer.from(m[1]!);
  if (expected.length !== given.length || !timingSafeEqual(expected, given)) return { ok: false, reason: 'bad_signature' };
  if (ts > opts.nowSeconds + (opts.skewSeconds ?? 300)) return { ok: false, reason: 'future' };
  if (opts.nowSeconds - ts > opts.maxAgeSeconds) return { ok: false, reason: 'expired' };
  return { ok: true, issuedAt: ts };
}

function sign(key: string, message: string): string {
  return createHmac('sha256', key).update(message).digest('base64url');
}

/** Constant-time string comparison for secrets of any length. */
export function safeEqual(a: string, b: string): boolean {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
}

/**
 * A short-lived token for a device's vision (camera "explain") requests:
 * `base64url(HMAC-SHA256(key, "vision|deviceId|exp")).exp`, exp in seconds. A vision service holding the
 * key checks it with `verifyVisionToken`.
 */
export function mintVisionToken(key: string, deviceId: string, expiresAtSeconds: number): string {
  const exp = Math.floor(expiresAtSeconds);
  return `${sign(key, `vision|${deviceId}|${exp}`)}.${exp}`;
}

export function verifyVisionToken(key: string, token: string, deviceId: string, nowSeconds: number): boolean {
  const m = /^([A-Za-z0-9_-]{43})\.(\d{1,12})$/.exec(token);
  if (!m || Number(m[2]) < nowSeconds) return false;
  return safeEqual(sign(key, `vision|${deviceId}|${m[2]}`), m[1]!);
}
