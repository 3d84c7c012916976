import { mintDeviceToken, mqttPassword } from '@voxgate/protocol';
import { describe, expect, it } from 'vitest';
import { bearerToken, checkMqttDeviceAuth, checkWebSocketAuth, type DeviceAuthPolicy } from '../../src/links/device-auth.js';

const SECRET = 'device-secret-0123456789abcdef0123';
const ID = '02:00:00:00:0a:01';
const CLIENT = 'c0ffee00-0000-4000-8000-000000000001';
const MQTT_CLIENT = `GID_test@@@02_00_00_00_0a_01@@@${CLIENT}`;

const policy = (o: Partial<DeviceAuthPolicy> = {}): DeviceAuthPolicy => ({ mode: 'hmac', tokens: [], secret: SECRET, tokenMaxAgeSeconds: 3600, ...o });
const now = () => Math.floor(Date.now() / 1000);

/** Device credentials as a part: each mode's verdict, and who may take over a live connection. */
describe('device authentication', () => {
  it('open admits anyone; token mode admits the configured tokens only', () => {
    expect(checkWebSocketAuth(policy({ mode: 'open' }), undefined, CLIENT, ID)).toEqual({ ok: true, credential: '' });
    const p = policy({ mode: 'token', tokens: ['tok-a', 'tok-b'] });
    expect(checkWebSocketAuth(p, 'tok-b', CLIENT, ID)).toMatchObject({ ok: true });
    expect(checkWebSocketAuth(p, 'tok-c', CLIENT, ID)).toEqual({ ok: false, reason: 'unknown_token' });
    expect(checkWebSocketAuth(p, undefined, CLIENT, ID)).toEqual({ ok: false, reason: 'missing_token' });
  });

  it('hmac mode checks the token against the device and client it was minted for, and its age', () => {
    const token = mintDeviceToken(SECRET, CLIENT, ID, now());
    expect(checkWebSocketAuth(policy(), token, CLIENT, ID)).toMatchObject({ ok: true });
    expect(checkWebSocketAuth(policy(), token, CLIENT, '02:00:00:00:0a:02')).toEqual({ ok: false, reason: 'bad_signature' });
    expect(checkWebSocketAuth(policy(), mintDeviceToken('another-secret-0123456789abcdef', CLIENT, ID, now()), CLIENT, ID)).toEqual({
      ok: false,
      reason: 'bad_signature',
    });
    expect(checkWebSocketAuth(policy(), mintDeviceToken(SECRET, CLIENT, ID, now() - 7200), CLIENT, ID)).toEqual({ ok: false, reason: 'expired' });
    expect(checkWebSocketAuth(policy(), 'not-a-token', CLIENT, ID)).toEqual({ ok: false, reason: 'malformed' });
  });

  it('MQTT: the xiaozhi password over client id and username', () => {
    const username = Buffer.from('{"ip":"10.0.0.2"}').toString('base64');
    const password = mqttPassword(SECRET, MQTT_CLIENT, username);
    expect(checkMqttDeviceAuth(policy(), MQTT_CLIENT, username, password)).toMatchObject({ ok: true });
    expect(checkMqttDeviceAuth(policy(), MQTT_CLIENT, username, password.slice(1) + 'A')).toEqual({ ok: false, reason: 'bad_password' });
    expect(checkMqttDeviceAuth(policy(), MQTT_CLIENT, undefined, password)).toEqual({ ok: false, reason: 'missing_credentials' });
  });

  it('a live connection is replaced only by one that proved the same credential', () => {
    const mine = mintDeviceToken(SECRET, CLIENT, ID, now());
    const first = checkWebSocketAuth(policy(), mine, CLIENT, ID);
    if (!first.ok) throw new Error('expected the first connection in');
    const live = policy({ liveCredential: (id) => (id === ID ? first.credential : undefined) });
    expect(checkWebSocketAuth(live, mine, CLIENT, ID)).toEqual(first);
    // Another valid token for the same device (another client id) cannot push the live one off.
    const other = mintDeviceToken(SECRET, 'c0ffee00-0000-4000-8000-000000000002', ID, now());
    expect(checkWebSocketAuth(live, other, 'c0ffee00-0000-4000-8000-000000000002', ID)).toEqual({ ok: false, reason: 'takeover_refused' });
    // The credential names what was proved, never the secret itself.
    expect(first.credential).not.toContain(mine);
  });

  it('reads the token with or without "Bearer " (the firmware adds it only when the token has no space)', () => {
    expect(bearerToken('Bearer abc')).toBe('abc');
    expect(bearerToken('bearer   abc ')).toBe('abc');
    expect(bearerToken('abc')).toBe('abc');
    expect(bearerToken('   ')).toBeUndefined();
    expect(bearerToken(undefined)).toBeUndefined();
  });
});
