import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ConfigSchema, loadConfig } from '../../src/config.js';

/** The HTTP side's slices of the configuration: the metrics key and the API keys' tenants. */
describe('api/config', () => {
  let dir: string;
  let file: string;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'voxgate-metrics-'));
    file = join(dir, 'gateway.config.json');
    writeFileSync(file, '{}');
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it('keeps the metrics key out of config errors', () => {
    expect(() => loadConfig({ GATEWAY_CONFIG: file, GATEWAY_METRICS_KEY: 'short-key' })).toThrow(
      /metrics\.key: at least 16 characters \(from GATEWAY_METRICS_KEY\)$/,
    );
  });

  it('reads API key tenants from the environment as key=tenant pairs', () => {
    const c = loadConfig({ GATEWAY_CONFIG: file, GATEWAY_API_KEYS: 'key-a-0123456789,key-b-0123456789', GATEWAY_API_KEY_TENANTS: 'key-a-0123456789=acme' });
    expect(c.apiKeyTenants).toEqual({ 'key-a-0123456789': 'acme' });
  });

  it('refuses a trusted proxy that is not an address, a CIDR or a named range', () => {
    expect(ConfigSchema.parse({ http: { trustProxy: ['10.0.0.0/8', 'loopback'] } }).http.trustProxy).toEqual(['10.0.0.0/8', 'loopback']);
    expect(() => ConfigSchema.parse({ http: { trustProxy: ['my-proxy.example'] } })).toThrow(/CIDR/);
  });
});
