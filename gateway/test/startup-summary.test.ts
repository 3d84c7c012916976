import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import type { NetworkInterfaceInfo } from 'node:os';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { loadConfig, type ConfigInput } from '../src/config.js';
import { lanAddresses, startupSummary, summaryText } from '../src/startup-summary.js';

const dir = mkdtempSync(join(tmpdir(), 'voxgate-summary-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const file = join(dir, 'gateway.config.json');
writeFileSync(file, JSON.stringify({ logLevel: 'warn' }));

const iface = (address: string, family: 'IPv4' | 'IPv6', internal = false): NetworkInterfaceInfo =>
  ({ address, family, internal, netmask: '', mac: '00:00:00:00:00:00', cidr: null, ...(family === 'IPv6' ? { scopeid: 0 } : {}) }) as NetworkInterfaceInfo;
/** A host with loopback, one LAN address (and its IPv6), a link-local one and a second LAN interface. */
const HOST = {
  lo: [iface('127.0.0.1', 'IPv4', true), iface('::1', 'IPv6', true)],
  eth0: [iface('192.168.1.20', 'IPv4'), iface('fe80::1', 'IPv6')],
  usb0: [iface('169.254.7.7', 'IPv4')],
  wlan0: [iface('10.0.0.5', 'IPv4')],
};

const config = (env: Record<string, string> = {}, overrides: ConfigInput = {}) =>
  loadConfig({ GATEWAY_CONFIG: file, GATEWAY_DATA_DIR: join(dir, 'data'), ...env }, overrides);

describe('the startup summary', () => {
  it('on 0.0.0.0 hands out the LAN addresses, not localhost; names the config file, the models and where the key is kept', () => {
    const s = startupSummary(
      config(
        {},
        {
          assistant: {
            models: {
              local: { provider: 'openai', baseUrl: 'http://user:pass@127.0.0.1:11434/v1/?key=secret', model: 'qwen3' },
              cloud: { provider: 'anthropic', model: 'claude-x' },
            },
            defaultModel: 'cloud',
          },
        },
      ),
      { httpPort: 8000, tls: false, interfaces: HOST },
    );
    expect(s.ota).toEqual(['http://192.168.1.20:8000/xiaozhi/ota/', 'http://10.0.0.5:8000/xiaozhi/ota/']);
    expect(s.console).toEqual(['http://192.168.1.20:8000/console/', 'http://10.0.0.5:8000/console/']);
    expect(s.configFile).toBe(file);
    expect(s.models).toEqual([
      { name: 'local', provider: 'openai', model: 'qwen3', endpoint: 'http://127.0.0.1:11434/v1', default: false },
      { name: 'cloud', provider: 'anthropic', model: 'claude-x', default: true },
    ]);
    expect(s.apiKeys).toBe(join(dir, 'data', 'secrets.json'));
    expect(s.warnings).toEqual([]);

    const text = summaryText(s, { http: '0.0.0.0:8000', mqtt: '0.0.0.0:1883' });
    expect(text).toContain("OTA URL      http://192.168.1.20:8000/xiaozhi/ota/   (put this into a device's settings)");
    expect(text).toContain('             http://10.0.0.5:8000/xiaozhi/ota/');
    expect(text).toContain(`Config file  ${file}`);
    expect(text).toContain('local: openai qwen3 at http://127.0.0.1:11434/v1');
    expect(text).toContain('cloud: anthropic claude-x (default)');
    expect(text).toContain(`API key      kept in ${join(dir, 'data', 'secrets.json')}`);
    expect(text).toContain('Listening    http 0.0.0.0:8000, mqtt 0.0.0.0:1883');
    expect(text).not.toMatch(/user:pass|key=secret|localhost/);
  });

  it('uses http.publicUrl as given, https with TLS, and says where keys from the environment come from', () => {
    const pub = startupSummary(config({ GATEWAY_PUBLIC_URL: 'https://voice.example.org', GATEWAY_API_KEYS: 'a-key-of-sixteen-chars' }), {
      httpPort: 8000,
      tls: false,
      interfaces: HOST,
    });
    expect(pub.ota).toEqual(['https://voice.example.org/xiaozhi/ota/']);
    expect(pub.apiKeys).toBe('GATEWAY_API_KEYS');
    expect(JSON.stringify(pub)).not.toContain('a-key-of-sixteen-chars');
    expect(summaryText(pub, {})).toContain('API key      from GATEWAY_API_KEYS');

    const tls = startupSummary(config({ GATEWAY_HTTP_HOST: '192.168.1.20' }), { httpPort: 8443, tls: true, interfaces: HOST });
    expect(tls.ota).toEqual(['https://192.168.1.20:8443/xiaozhi/ota/']);
  });

  it('warns when no device can reach the URLs: a loopback listen address, or no LAN address at all', () => {
    const loop = startupSummary(config({ GATEWAY_HTTP_HOST: '127.0.0.1' }), { httpPort: 8000, tls: false, interfaces: HOST });
    expect(loop.ota).toEqual(['http://127.0.0.1:8000/xiaozhi/ota/']);
    expect(loop.warnings).toEqual([expect.stringContaining('listening on 127.0.0.1 only')]);
    expect(summaryText(loop, {})).toContain('  ! listening on 127.0.0.1 only');

    const alone = startupSummary(config(), { httpPort: 8000, tls: false, interfaces: { lo: HOST.lo } });
    expect(alone.ota).toEqual(['http://127.0.0.1:8000/xiaozhi/ota/']);
    expect(alone.warnings).toEqual([expect.stringContaining('no LAN IPv4 address')]);

    const v6 = startupSummary(config({ GATEWAY_HTTP_HOST: 'fd00::5' }), { httpPort: 8000, tls: false, interfaces: HOST });
    expect(v6.ota).toEqual(['http://[fd00::5]:8000/xiaozhi/ota/']);
  });

  it('says when no file was read, no model is set up, and the console is off', () => {
    // Without GATEWAY_CONFIG the default gateway.config.json is optional: loadConfig leaves configFile out when it is missing.
    const s = startupSummary({ ...config({ GATEWAY_CONSOLE_ENABLED: 'false' }), configFile: undefined }, { httpPort: 8000, tls: false, interfaces: HOST });
    expect(s.configFile).toBeNull();
    expect(s.console).toEqual([]);
    const text = summaryText(s, {});
    expect(text).toContain('Config file  none (defaults and GATEWAY_* variables)');
    expect(text).toContain('Models       none: the assistant and /v1/chat/completions need one');
    expect(text).not.toContain('Console');
  });

  it('lists non-loopback, non-link-local IPv4 addresses of this host', () => {
    expect(lanAddresses(HOST)).toEqual(['192.168.1.20', '10.0.0.5']);
  });
});
