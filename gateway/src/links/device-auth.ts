import { createHash } from 'node:crypto';
import { parseMqttClientId, safeEqual, verifyDeviceToken, verifyMqttPassword } from '@voxgate/protocol';
import type { EnrollmentCredentials } from '../enrollment/credentials.js';
import type { Binding } from '../enrollment/records.js';
import type { RefusedDevices } from '../enrollment/refused.js';

export type DeviceAuthMode = 'open' | 'token' | 'hmac';
/**
 * `credential` names what the connection proved (never the secret itself): a live connection can only be
 * replaced by one that proved the same thing.
 */
export type AuthVerdict = { ok: true; credential: string } | { ok: false; reason: string };

/** Enrolled devices: their binding, and how to check credentials derived from it. */
export interface EnrollmentAuthority {
  binding(deviceId: string): Binding | undefined;
  readonly credentials: EnrollmentCredentials;
  /** Where refused devices are kept for the operator (and logged, throttled per device). */
  readonly refused?: RefusedDevices;
}

export interface DeviceAuthPolicy {
  mode: DeviceAuthMode;
  tokens: readonly string[];
  secret: string;
  tokenMaxAgeSeconds: number;
  /** An enrolled device accepts only the credentials of its binding. */
  enrollment?: EnrollmentAuthority | undefined;
  /** The credential of the device's live connection, if it has one. */
  liveCredential?: ((deviceId: string) => string | undefined) | undefined;
}

/** WebSocket: `Authorization: Bearer <token>` checked by mode. */
export function checkWebSocketAuth(p: DeviceAuthPolicy, token: string | undefined, clientId: string, deviceId: string): AuthVerdict {
  if (p.mode === 'open') return { ok: true, credential: '' };
  if (!token) return { ok: false, reason: 'missing_token' };
  if (p.mode === 'token')
    return p.tokens.some((t) => safeEqual(t, token)) ? sameAsLive(p, deviceId, `token:${digest(token)}`) : { ok: false, reason: 'unknown_token' };
  const bound = p.enrollment?.binding(deviceId);
  if (bound)
    return p.enrollment!.credentials.checkToken(bound, token, clientId)
      ? sameAsLive(p, deviceId, `enrolled:${bound.credId}`)
      : { ok: false, reason: 'bad_signature' };
  // Not enrolled: a token signed with the device secret (issued before enrollment, or by its holder).
  const r = verifyDeviceToken(p.secret, token, clientId, deviceId, { nowSeconds: Date.now() / 1000, maxAgeSeconds: p.tokenMaxAgeSeconds });
  return r.ok ? sameAsLive(p, deviceId, `token:${digest(token)}`) : { ok: false, reason: r.reason };
}

/** MQTT: the xiaozhi password HMAC over client id and username; every mode but `open` checks it. */
export function checkMqttDeviceAuth(p: DeviceAuthPolicy, clientId: string, username: string | undefined, password: string | undefined): AuthVerdict {
  if (p.mode === 'open') return { ok: true, credential: '' };
  if (username === undefined || password === undefined) return { ok: false, reason: 'missing_credentials' };
  const deviceId = parseMqttClientId(clientId)?.deviceId;
  const bound = deviceId === undefined ? undefined : p.enrollment?.binding(deviceId);
  if (bound)
    return p.enrollment!.credentials.checkMqtt(bound, clientId, username, password)
      ? sameAsLive(p, bound.deviceId, `enrolled:${bound.credId}`)
      : { ok: false, reason: 'bad_password' };
  if (!verifyMqttPassword(p.secret, clientId, username, password)) return { ok: false, reason: 'bad_password' };
  return deviceId === undefined
    ? { ok: true, credential: `mqtt:${digest(`${clientId}|${username}`)}` }
    : sameAsLive(p, deviceId, `mqtt:${digest(`${clientId}|${username}`)}`);
}

/** A takeover of a live connection needs the credentials the live one proved. */
function sameAsLive(p: DeviceAuthPolicy, deviceId: string, credential: string): AuthVerdict {
  const live = p.liveCredential?.(deviceId);
  return live === undefined || live === credential ? { ok: true, credential } : { ok: false, reason: 'takeover_refused' };
}

const digest = (s: string): string => createHash('sha256').update(s).digest('base64url').slice(0, 22);

/** `Bearer x` -> `x`; the firmware prepends `Bearer ` only when the token has no space. */
export function bearerToken(header: string | undefined): string | undefined {
  if (!header) return undefined;
  const m = /^Bearer\s+(.+)$/i.exec(header.trim());
  return (m ? m[1]! : header).trim() || undefined;
}
