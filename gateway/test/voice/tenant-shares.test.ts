import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { createMetrics } from '../../src/metrics.js';
import { createVoiceMetrics } from '../../src/voice/metrics.js';
import { VoiceTenantShares } from '../../src/voice/tenant-shares.js';

const tenants: Record<string, string> = { a1: 'acme', a2: 'acme', b1: 'globex' };
const tenancy = { tenantOf: (id: string) => tenants[id], tenantCount: () => 2 };
const shares = (config: { maxSessions: number; maxSessionsPerTenant?: number }) =>
  new VoiceTenantShares(config, createVoiceMetrics(createMetrics().registry), pino({ level: 'silent' }));

describe('voice.maxSessionsPerTenant (voice/tenant-shares.ts)', () => {
  it('refuses at start a share above voice.maxSessions, naming the field; equal to the whole is allowed', () => {
    expect(() => loadConfig({ GATEWAY_VOICE_MAX_SESSIONS: '10', GATEWAY_VOICE_MAX_SESSIONS_PER_TENANT: '11' })).toThrow(
      /voice\.maxSessionsPerTenant.*at most voice\.maxSessions/s,
    );
    expect(loadConfig({ GATEWAY_VOICE_MAX_SESSIONS: '10', GATEWAY_VOICE_MAX_SESSIONS_PER_TENANT: '10' }).voice.maxSessionsPerTenant).toBe(10);
    expect(loadConfig({}).voice.maxSessionsPerTenant).toBeUndefined();
  });

  it('unset: the whole until a device has a tenant, then 3/4 of it rounded up', () => {
    const s = shares({ maxSessions: 1000 });
    expect(s.limit).toBe(1000);
    s.useTenancy({ tenantOf: () => undefined, tenantCount: () => 0 });
    expect(s.limit).toBe(1000);
    s.useTenancy(tenancy);
    expect(s.limit).toBe(750);
    expect(shares({ maxSessions: 1000, maxSessionsPerTenant: 10 }).limit).toBe(10);
  });

  it('a slot is released once, however often; the tenant it was taken for frees it even after the device moved', () => {
    const s = shares({ maxSessions: 4, maxSessionsPerTenant: 2 });
    s.useTenancy(tenancy);
    const one = s.take('a1');
    s.take('a2');
    expect(s.full('a1')).toEqual({ tenant: 'acme', limit: 2 });
    expect(s.admits('a1', 'websocket')).toBe(false);
    expect(s.admits('b1', 'websocket')).toBe(true);
    expect(s.admits('nobody', 'websocket')).toBe(true); // devices without a tenant: their own bucket
    tenants['a1'] = 'globex';
    one.release();
    one.release();
    expect([s.heldBy('acme'), s.heldBy('globex')]).toEqual([1, 0]);
    tenants['a1'] = 'acme';
  });
});
