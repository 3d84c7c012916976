import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { resolveSecrets } from '../src/secrets.js';

const KEY = 'api-key-that-must-stay-secret-4242';

const dirs: string[] = [];
function tempDir(): string {
  const d = mkdtempSync(join(tmpdir(), 'voxgate-secrets-'));
  dirs.push(d);
  return d;
}
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

describe('resolveSecrets', () => {
  it('generates an API key and a device secret once, keeps them 0600, and gives the same ones at the next start', () => {
    const dataDir = join(tempDir(), 'data');
    const first = resolveSecrets(dataDir, { apiKeys: [] });
    expect(first.generatedApiKey).toMatch(/^vxg_[A-Za-z0-9_-]{32}$/);
    expect(first.apiKeys).toEqual([first.generatedApiKey]);
    expect(first.deviceSecret.length).toBeGreaterThanOrEqual(32);
    const file = join(dataDir, 'secrets.json');
    expect(statSync(file).mode & 0o777).toBe(0o600);
    const again = resolveSecrets(dataDir, { apiKeys: [] });
    expect(again).toEqual({ apiKeys: first.apiKeys, deviceSecret: first.deviceSecret });
  });

  it('uses configured secrets over stored ones, and writes nothing when both are configured', () => {
    const dataDir = tempDir();
    const r = resolveSecrets(dataDir, { apiKeys: [KEY], deviceSecret: 'configured-device-secret-000' });
    expect(r).toEqual({ apiKeys: [KEY], deviceSecret: 'configured-device-secret-000' });
    expect(() => statSync(join(dataDir, 'secrets.json'))).toThrow(/ENOENT/);
  });

  it('tightens a pre-existing secrets file that others can read to 0600, and returns the old mode', () => {
    const dataDir = tempDir();
    const file = join(dataDir, 'secrets.json');
    const deviceSecret = 'stored-device-secret-0123456789';
    writeFileSync(file, JSON.stringify({ deviceSecret }), { mode: 0o644 });
    expect(statSync(file).mode & 0o777).toBe(0o644);
    const r = resolveSecrets(dataDir, { apiKeys: [KEY] });
    expect(statSync(file).mode & 0o777).toBe(0o600);
    expect(r.tightenedFrom).toBe('0644');
    expect(r.deviceSecret).toBe(deviceSecret);
  });

  it('leaves a 0600 file alone, and never quotes a corrupt one', () => {
    const dataDir = tempDir();
    const file = join(dataDir, 'secrets.json');
    writeFileSync(file, JSON.stringify({ deviceSecret: 'stored-device-secret-0123456789' }), { mode: 0o600 });
    expect(resolveSecrets(dataDir, { apiKeys: [KEY] }).tightenedFrom).toBeUndefined();
    writeFileSync(file, `{"deviceSecret": "corrupt-secret-value-77" oops`);
    expect(() => resolveSecrets(dataDir, { apiKeys: [KEY] })).toThrow(/unreadable secrets file \(not valid JSON\)/);
    try {
      resolveSecrets(dataDir, { apiKeys: [KEY] });
    } catch (e) {
      expect((e as Error).message).not.toContain('corrupt-secret-value-77');
    }
    writeFileSync(file, JSON.stringify({ deviceSecret: 'short-secret' }));
    expect(() => resolveSecrets(dataDir, { apiKeys: [KEY] })).toThrow(/not \{apiKey\?, deviceSecret\?\}/);
    expect(readFileSync(file, 'utf8')).toContain('short-secret'); // refused, not overwritten
  });
});
