import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../../src/config.js';
import { firmwareVersionProblem, isNewerFirmware } from '../../src/firmware/version.js';

const problems = (env: NodeJS.ProcessEnv, overrides: Parameters<typeof loadConfig>[1] = {}): string[] => {
  try {
    loadConfig({ GATEWAY_CONFIG: undefined, ...env }, overrides);
  } catch (e) {
    if (e instanceof ConfigError) return e.problems;
    throw e;
  }
  return [];
};

describe('firmware versions the firmware can parse (issue 24 item 12)', () => {
  it('accepts numbers separated by dots only: each part goes through std::stoi on the device', () => {
    for (const v of ['0.0.0', '1.4.0', '2', '1.7.6.3', '10.20.300']) expect(firmwareVersionProblem(v)).toBeUndefined();
    for (const v of ['v2.6.0', '2.6.0-beta.rc', '1.4.0-rc.1', '1.4.0+build', '1..4', '.1', '1.', '', 'latest', '1.x.0', '1234567890.0'])
      expect(firmwareVersionProblem(v), v).toMatch(/firmware can read/);
  });

  it('refuses an unreadable ota.firmwareVersion or rollout version at start, naming the field and its variable', () => {
    expect(problems({ GATEWAY_FIRMWARE_VERSION: 'v2.6.0' }).join('\n')).toMatch(/ota\.firmwareVersion: a version the firmware can read.*\(from GATEWAY_FIRMWARE_VERSION\)/);
    const rollout = problems({ GATEWAY_OTA_ROLLOUT_VERSION: '2.6.0-beta.rc', GATEWAY_OTA_ROLLOUT_URL: 'fw.bin', GATEWAY_OTA_ROLLOUT_PERCENT: '10' });
    expect(rollout.join('\n')).toMatch(/ota\.rollout\.0\.version: a version the firmware can read.*\(from GATEWAY_OTA_ROLLOUT_VERSION\)/);
    expect(problems({}, { ota: { rollout: [{ version: 'v1.0.0', url: 'fw.bin', percent: 5 }] } })).toHaveLength(1);
    expect(problems({ GATEWAY_FIRMWARE_VERSION: '2.6.0' })).toEqual([]);
  });

  it('compares like Ota::IsNewVersionAvailable: part by part as numbers, then the longer one', () => {
    expect(isNewerFirmware('1.4.0', '1.10.0')).toBe(true);
    expect(isNewerFirmware('1.10.0', '1.9.9')).toBe(false);
    expect(isNewerFirmware('1.4.0', '1.4.0')).toBe(false);
    expect(isNewerFirmware('1.4', '1.4.0')).toBe(true);
    expect(isNewerFirmware('1.4.0', '1.4')).toBe(false);
    expect(isNewerFirmware('01.4', '1.5')).toBe(true);
    expect(isNewerFirmware('2.0.0', '1.99.99')).toBe(false);
  });
});
