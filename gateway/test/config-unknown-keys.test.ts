import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../src/config.js';

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

function problemsFor(file: unknown): string[] {
  const dir = mkdtempSync(join(tmpdir(), 'voxgate-cfg-'));
  dirs.push(dir);
  writeFileSync(join(dir, 'gateway.config.json'), JSON.stringify(file));
  try {
    loadConfig({ GATEWAY_CONFIG: join(dir, 'gateway.config.json') });
  } catch (e) {
    expect(e).toBeInstanceOf(ConfigError);
    return (e as ConfigError).problems;
  }
  throw new Error('the configuration was accepted');
}

describe('misspelled keys in gateway.config.json are refused, not ignored (issue 9 item 20)', () => {
  it('names every unknown key at every level, with a suggestion, beside the other bad fields', () => {
    const problems = problemsFor({
      htpp: { port: 9000 },
      http: { prot: 9000 },
      mcp: { endpoint: { allowedHost: ['gw.local'] } },
      ota: { rollout: [{ version: '1.2.0', url: 'fw.bin', precent: 10, percent: 10 }] },
      logLevel: 'loud',
      somethingElse: true,
    });
    expect(problems).toEqual(
      expect.arrayContaining([
        'htpp: unknown setting; did you mean "http"?',
        'http.prot: unknown setting; did you mean "port"?',
        'mcp.endpoint.allowedHost: unknown setting; did you mean "allowedHosts"?',
        'ota.rollout.0.precent: unknown setting; did you mean "percent"?',
        'somethingElse: unknown setting',
      ]),
    );
    // The same start also reports an ordinary bad value.
    expect(problems.some((p) => p.startsWith('logLevel:'))).toBe(true);
    expect(problems).toHaveLength(6);
  });

  it('still accepts every known key, and free-form records (mcp.servers, apiKeyTenants)', () => {
    const dir = mkdtempSync(join(tmpdir(), 'voxgate-cfg-'));
    dirs.push(dir);
    writeFileSync(
      join(dir, 'gateway.config.json'),
      JSON.stringify({
        http: { port: 9000, host: '127.0.0.1' },
        apiKeys: ['key-one-0123456789'],
        apiKeyTenants: { 'key-one-0123456789': 'acme' },
        mcp: { servers: { utils: { type: 'builtin', tools: ['calculator'] } }, endpoint: { allowedHosts: ['gw.local'] } },
      }),
    );
    const c = loadConfig({ GATEWAY_CONFIG: join(dir, 'gateway.config.json') });
    expect(c.http.port).toBe(9000);
    expect(c.mcp.endpoint.allowedHosts).toEqual(['gw.local']);
  });
});
