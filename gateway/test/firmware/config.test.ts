import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { type ConfigError, loadConfig, type ConfigInput } from '../../src/config.js';

const rollout = (over: Record<string, unknown> = {}) => ({ version: '1.1.0', url: 'fw.bin', percent: 10, ...over });

describe('ota.rollout configuration', () => {
  const emptyFile = join(mkdtempSync(join(tmpdir(), 'voxgate-cfg-')), 'gateway.config.json');
  writeFileSync(emptyFile, '{}');
  afterAll(() => rmSync(dirname(emptyFile), { recursive: true, force: true }));
  const load = (env: Record<string, string>, over: ConfigInput = {}) => loadConfig({ GATEWAY_CONFIG: emptyFile, ...env }, over);

  it('comes from GATEWAY_OTA_ROLLOUT_* or the file, and is validated', () => {
    const c = load({
      GATEWAY_OTA_ROLLOUT_VERSION: '1.4.0',
      GATEWAY_OTA_ROLLOUT_URL: 'devkit-1.4.0.bin',
      GATEWAY_OTA_ROLLOUT_PERCENT: '12.5',
      GATEWAY_OTA_ROLLOUT_DEVICES: 'AA_BB_CC_DD_EE_01, aabbccddee02',
      GATEWAY_OTA_ROLLOUT_BOARDS: 'voxgate-devkit',
    });
    expect(c.ota.rollout).toEqual([
      { version: '1.4.0', url: 'devkit-1.4.0.bin', percent: 12.5, devices: ['aa:bb:cc:dd:ee:01', 'aa:bb:cc:dd:ee:02'], boards: ['voxgate-devkit'] },
    ]);
    const list = load({}, { ota: { rollout: [rollout(), rollout({ url: 'https://cdn.example.com/fw.bin', sha256: 'A'.repeat(64), size: 10 })] } });
    expect(list.ota.rollout?.map((r) => r.url)).toEqual(['fw.bin', 'https://cdn.example.com/fw.bin']);

    const problems = (over: ConfigInput) => {
      try {
        load({}, over);
      } catch (e) {
        return (e as ConfigError).problems.join('\n');
      }
      return '';
    };
    expect(problems({ ota: { rollout: rollout({ url: '../data/secrets.json' }) } })).toMatch(/ota\.rollout/);
    expect(problems({ ota: { rollout: rollout({ version: 'latest' }) } })).toMatch(/semantic version/);
    expect(problems({ ota: { rollout: rollout({ percent: 101 }) } })).toMatch(/ota\.rollout/);
    expect(problems({ ota: { rollout: rollout({ devices: ['not-a-mac'] }) } })).toMatch(/MAC/);
    expect(() => load({ GATEWAY_OTA_ROLLOUT_VERSION: '1.4.0', GATEWAY_OTA_ROLLOUT_URL: 'a.bin', GATEWAY_OTA_ROLLOUT_PERCENT: 'half' })).toThrow(
      /GATEWAY_OTA_ROLLOUT_PERCENT/,
    );
  });
});
