import { describe, expect, it } from 'vitest';
import { EnrollmentCredentials, mqttUuid } from '../../src/enrollment/credentials.js';
import type { Binding } from '../../src/enrollment/records.js';

const SECRET = 'device-secret-0123456789abcdef';
const binding = (o: Partial<Binding> = {}): Binding => ({
  deviceId: 'aa:bb:cc:dd:ee:01',
  clientId: '0b7e3a52-6f1c-4c2e-9d7a-000000000001',
  credId: 'cred-0123456789abcdef',
  issuedAt: 1_790_000_000,
  delivered: true,
  via: 'approve',
  enrolledAt: '2026-11-26T08:00:00.000Z',
  ...o,
});

describe('EnrollmentCredentials', () => {
  const creds = new EnrollmentCredentials(SECRET, 'voxgate');

  it('derives the same token and MQTT credentials from the same binding, and checks them', () => {
    const b = binding();
    expect(creds.token(b)).toBe(creds.token(binding()));
    expect(creds.checkToken(b, creds.token(b), b.clientId)).toBe(true);
    const clientId = creds.mqttClientId(b);
    expect(clientId).toContain('aa_bb_cc_dd_ee_01');
    const password = creds.mqttPassword(b, 'user');
    expect(creds.checkMqtt(b, clientId, 'user', password)).toBe(true);
    expect(creds.proves(b, { bearer: creds.token(b) })).toBe(true);
    expect(creds.proves(b, { basic: { username: 'user', password } })).toBe(true);
  });

  it('revokes every earlier credential when the binding is replaced (a new credId)', () => {
    const old = binding();
    const renewed = binding({ credId: 'cred-fedcba9876543210' });
    expect(creds.checkToken(renewed, creds.token(old), old.clientId)).toBe(false);
    expect(creds.checkMqtt(renewed, creds.mqttClientId(old), 'user', creds.mqttPassword(old, 'user'))).toBe(false);
    expect(creds.proves(renewed, { bearer: creds.token(old), basic: { username: 'user', password: creds.mqttPassword(old, 'user') } })).toBe(false);
  });

  it('refuses a token for another client id, device or secret', () => {
    const b = binding();
    expect(creds.checkToken(b, creds.token(b), 'another-client')).toBe(false);
    expect(creds.checkToken(b, creds.token(binding({ deviceId: 'aa:bb:cc:dd:ee:02' })), b.clientId)).toBe(false);
    expect(creds.checkToken(b, new EnrollmentCredentials('another-secret-0123456789ab', 'voxgate').token(b), b.clientId)).toBe(false);
    expect(creds.checkToken(b, 'not-a-token', b.clientId)).toBe(false);
  });

  it('refuses MQTT credentials of another device, another uuid, a wrong password or a malformed client id', () => {
    const b = binding();
    const password = creds.mqttPassword(b, 'user');
    const other = binding({ deviceId: 'aa:bb:cc:dd:ee:02' });
    expect(creds.checkMqtt(b, creds.mqttClientId(other), 'user', creds.mqttPassword(other, 'user'))).toBe(false);
    expect(creds.checkMqtt(b, creds.mqttClientId(binding({ clientId: 'another-client' })), 'user', password)).toBe(false);
    expect(creds.checkMqtt(b, creds.mqttClientId(b), 'user', `${password}x`)).toBe(false);
    expect(creds.checkMqtt(b, creds.mqttClientId(b), 'other-user', password)).toBe(false);
    expect(creds.checkMqtt(b, 'GID_voxgate@@@aa_bb_cc_dd_ee_01', 'user', password)).toBe(false); // no uuid part
    expect(creds.checkMqtt(b, 'garbage', 'user', password)).toBe(false);
  });

  it('proves nothing without a proof', () => {
    expect(creds.proves(binding(), {})).toBe(false);
  });

  it('writes a client id with colons as underscores in the MQTT uuid part', () => {
    expect(mqttUuid('aa:bb:cc')).toBe('aa_bb_cc');
    const b = binding({ clientId: 'aa:bb:cc:dd:ee:01' });
    expect(creds.checkMqtt(b, creds.mqttClientId(b), 'u', creds.mqttPassword(b, 'u'))).toBe(true);
  });
});
