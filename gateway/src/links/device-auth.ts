import { safeEqual, verifyDeviceToken, verifyMqttPassword } from '@voxgate/protocol';

export type DeviceAuthMode = 'open' | 'token' | 'hmac';
export type AuthVerdict = { ok: true } | { ok: false; reason: string };

export interface DeviceAuthPolicy {
  mode: DeviceAuthMode;
  tokens: readonly string[];
  secret: string;
  tokenMaxAgeSeconds: number;
}

/** WebSocket: `Authorization: Bearer <token>` checked by mode. */
export function checkWebSocketAuth(p: DeviceAuthPolicy, token: string | undefined, clientId: string, deviceId: string): AuthVerdict {
  if (p.mode === 'open') return { ok: true };
  if (!token) return { ok: false, reason: 'missing_token' };
  if (p.mode === 'token') return p.tokens.some((t) => safeEqual(t, token)) ? { ok: true } : { ok: false, reason: 'unknown_token' };
  const r = verifyDeviceToken(p.secret, token, clientId, deviceId, { nowSeconds: Date.now() / 1000, maxAgeSeconds: p.tokenMaxAgeSeconds });
  return r.ok ? { ok: true } : { ok: false, reason: r.reason };
}

/** MQTT: the xiaozhi password HMAC over client id and username; every mode but `open` checks it. */
export function checkMqttDeviceAuth(p: DeviceAuthPolicy, clientId: string, username: string | undefined, password: string | undefined): AuthVerdict {
  if (p.mode === 'open') return { ok: true };
  if (username === undefined || password === undefined) return { ok: false, reason: 'missing_credentials' };
  return verifyMqttPassword(p.secret, clientId, username, password) ? { ok: true } : { ok: false, reason: 'bad_password' };
}

/** `Bearer x` -> `x`; the firmware prepends `Bearer ` only when the token has no space. */
export function bearerToken(header: string | undefined): string | undefined {
  if (!header) return undefined;
  const m = /^Bearer\s+(.+)$/i.exec(header.trim());
  return (m ? m[1]! : header).trim() || undefined;
}
