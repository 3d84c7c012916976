import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../../src/config.js';
import { resolveSecrets } from '../../src/secrets.js';
import { startTestGateway } from '../../../test/support/gateway-harness.js';

const KEY = 'api-key-that-must-stay-secret-4242';
const OTHER = 'another-secret-api-key-9393';

const dirs: string[] = [];
function tempDir(): string {
  const d = mkdtempSync(join(tmpdir(), 'voxgate-config-'));
  dirs.push(d);
  return d;
}
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

/** The ConfigError text loadConfig throws for this environment and config file. */
function configError(env: Record<string, string>, file: string = '{}'): string {
  const path = join(tempDir(), 'gateway.config.json');
  writeFileSync(path, file);
  try {
    loadConfig({ GATEWAY_CONFIG: path, ...env });
  } catch (e) {
    expect(e).toBeInstanceOf(ConfigError);
    return (e as Error).message;
  }
  throw new Error('the configuration was accepted');
}

describe('config errors never echo secrets (issue 8, defect 10d)', () => {
  it('names a bad tenant entry by position, not by its API key', () => {
    const msg = configError({ GATEWAY_API_KEYS: `${OTHER},${KEY}`, GATEWAY_API_KEY_TENANTS: `${OTHER}=ok,${KEY}=bad tenant!` });
    expect(msg).not.toContain(KEY);
    expect(msg).toContain('apiKeyTenants[entry 2]: a tenant is 1-64 letters');
    expect(msg).toContain('(from GATEWAY_API_KEY_TENANTS)');
    // An entry with no "=" at all is the key alone.
    const bare = configError({ GATEWAY_API_KEYS: KEY, GATEWAY_API_KEY_TENANTS: KEY });
    expect(bare).not.toContain(KEY);
    expect(bare).toContain('apiKeyTenants[entry 1]');
  });

  it('keeps tenant keys, tokens and the device secret out of file errors', () => {
    const secret = 'device-secret-too-short';
    const msg = configError(
      {},
      JSON.stringify({
        apiKeys: [KEY],
        apiKeyTenants: { [KEY]: 7, [OTHER]: 'x' },
        deviceTokens: ['tok-secret-1234', ''],
        deviceSecret: 42,
        deviceAuth: secret,
      }),
    );
    for (const s of [KEY, OTHER, 'tok-secret-1234', secret]) expect(msg).not.toContain(s);
    expect(msg).toContain('apiKeyTenants[entry 1]');
    expect(msg).toContain('deviceTokens.1');
  });

  it('never quotes the text of a config file that is not valid JSON', () => {
    const msg = configError({}, `{"apiKeys": ["${KEY}"] "deviceSecret": "${OTHER}"}`);
    expect(msg).toContain('not valid JSON');
    expect(msg).not.toContain(KEY);
    expect(msg).not.toContain(OTHER);
    const bareword = configError({}, `{"apiKeys": ${KEY}}`);
    expect(bareword).toContain('not valid JSON');
    expect(bareword).not.toContain('api-key'); // V8 would quote `..."apiKeys": api-key-th"...`
  });

  it('never quotes the MCP server file either', () => {
    const mcp = join(tempDir(), 'mcp.json');
    writeFileSync(mcp, `{"mcpServers": {"x": {"url": "https://example.com/mcp", "headers": {"authorization": Bearer-upstream-token-5555}}}}`);
    const msg = configError({ GATEWAY_MCP_CONFIG: mcp });
    expect(msg).toContain('not valid JSON');
    expect(msg).not.toContain('Bearer-up'); // V8 would quote `..."Bearer-up"...`
  });
});

describe('data/secrets.json permissions (issue 8, defect 10d)', () => {
  it('tightens a pre-existing secrets file that others can read to 0600, and says so in the log', async () => {
    const dataDir = tempDir();
    const file = join(dataDir, 'secrets.json');
    const deviceSecret = 'stored-device-secret-0123456789';
    writeFileSync(file, JSON.stringify({ deviceSecret }), { mode: 0o644 });
    expect(statSync(file).mode & 0o777).toBe(0o644);
    const t = await startTestGateway({ dataDir });
    try {
      expect(statSync(file).mode & 0o777).toBe(0o600);
      expect(t.gw.deviceSecret).toBe(deviceSecret);
      const warning = t.logs.find((l) => String(l['msg']).includes('secrets file was readable'));
      expect(warning).toMatchObject({ previousMode: '0644' });
      expect(JSON.stringify(t.logs)).not.toContain(deviceSecret);
    } finally {
      await t.close();
    }
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
