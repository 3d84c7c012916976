import { chmodSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { resolveSecrets } from '../src/secrets.js';

const posix = process.platform !== 'win32';

describe('resolveSecrets', () => {
  let dir: string;
  let file: string;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'voxgate-secrets-'));
    file = join(dir, 'secrets.json');
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it('generates an API key and a device secret once, keeps them 0600, and reads the same ones back', () => {
    const first = resolveSecrets(dir, { apiKeys: [] });
    expect(first.generatedApiKey).toMatch(/^vxg_[A-Za-z0-9_-]{32}$/);
    expect(first.apiKeys).toEqual([first.generatedApiKey]);
    expect(first.deviceSecret.length).toBeGreaterThanOrEqual(32);
    if (posix) expect(statSync(file).mode & 0o777).toBe(0o600);
    const again = resolveSecrets(dir, { apiKeys: [] });
    expect(again).toEqual({ apiKeys: first.apiKeys, deviceSecret: first.deviceSecret });
  });

  it('uses configured secrets over stored ones, and generates only what is missing', () => {
    const s = resolveSecrets(dir, { apiKeys: ['configured-key-0123456789'], deviceSecret: 'configured-secret-0123456789' });
    expect(s).toEqual({ apiKeys: ['configured-key-0123456789'], deviceSecret: 'configured-secret-0123456789' });
    // Nothing needed generating: no file written.
    expect(() => statSync(file)).toThrow();
    const onlyKeys = resolveSecrets(dir, { apiKeys: ['configured-key-0123456789'] });
    expect(onlyKeys.generatedApiKey).toBeUndefined();
    expect(JSON.parse(readFileSync(file, 'utf8'))).toEqual({ deviceSecret: onlyKeys.deviceSecret });
  });

  it('refuses a file that is not JSON or has short secrets, without quoting it', () => {
    writeFileSync(file, '{"apiKey": "hunter2-leaked', { mode: 0o600 });
    expect(() => resolveSecrets(dir, { apiKeys: [] })).toThrow(/unreadable secrets file \(not valid JSON\)$/);
    try {
      resolveSecrets(dir, { apiKeys: [] });
    } catch (e) {
      expect((e as Error).message).not.toContain('hunter2');
    }
    writeFileSync(file, JSON.stringify({ apiKey: 'short' }), { mode: 0o600 });
    expect(() => resolveSecrets(dir, { apiKeys: [] })).toThrow(/not \{apiKey\?, deviceSecret\?\} with 16\+ character strings/);
  });

  it.skipIf(!posix)('tightens a file others may read to 0600 and says what it was', () => {
    writeFileSync(file, JSON.stringify({ apiKey: 'stored-key-0123456789', deviceSecret: 'stored-secret-0123456789' }));
    chmodSync(file, 0o644);
    const s = resolveSecrets(dir, { apiKeys: [] });
    expect(s).toEqual({ apiKeys: ['stored-key-0123456789'], deviceSecret: 'stored-secret-0123456789', tightenedFrom: '0644' });
    expect(statSync(file).mode & 0o777).toBe(0o600);
    expect(resolveSecrets(dir, { apiKeys: [] }).tightenedFrom).toBeUndefined();
  });
});

describe('resolveSecrets on files left by an earlier start (from the e2e config-secrets test, issue 8 defect 10d)', () => {
  const KEY = 'api-key-that-must-stay-secret-4242';
  let dataDir: string;
  beforeEach(() => {
    dataDir = mkdtempSync(join(tmpdir(), 'voxgate-secrets-'));
  });
  afterEach(() => rmSync(dataDir, { recursive: true, force: true }));

  it('leaves a 0600 file alone, and never quotes a corrupt one', () => {
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
