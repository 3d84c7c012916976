import { describe, expect, it } from 'vitest';
import { voiceTenantOf } from '../../src/voice/modes.js';

type ProfileConfig = Parameters<typeof voiceTenantOf>[0];

describe('voiceTenantOf: whose rights a device speaks with (issue 20 item 6)', () => {
  const listed = '02:00:00:00:00:01';
  const config = (hubTenant?: string) => ({ tenants: { kitchen: { devices: [listed] } }, ...(hubTenant ? { hubTenant } : {}) }) as unknown as ProfileConfig;

  it("the voice tenant that lists the device, else the device's own tenant, else voice.hubTenant", () => {
    expect(voiceTenantOf(config('hub'), listed, 'acme')).toBe('kitchen');
    expect(voiceTenantOf(config('hub'), '02:00:00:00:00:02', 'acme')).toBe('acme');
    expect(voiceTenantOf(config('hub'), '02:00:00:00:00:02')).toBe('hub');
    expect(voiceTenantOf(config(), '02:00:00:00:00:02')).toBeUndefined();
  });
});
