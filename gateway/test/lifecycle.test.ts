import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, statSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../../gateway/src/config.js';
import { ReferenceDevice } from '../../test/support/reference-device.js';
import { withTimeout } from '../../test/support/wait.js';

const root = fileURLToPath(new URL('../../', import.meta.url));
const tsx = join(root, 'node_modules/.bin/tsx');

function runGateway(env: Record<string, string>): { child: ChildProcess; stdout: string[]; stderr: string[]; exited: Promise<number | null> } {
  const child = spawn(tsx, ['gateway/src/main.ts'], { cwd: root, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  const stdout: string[] = [];
  const stderr: string[] = [];
  child.stdout!.on('data', (b: Buffer) => stdout.push(b.toString()));
  child.stderr!.on('data', (b: Buffer) => stderr.push(b.toString()));
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  return { child, stdout, stderr, exited };
}

describe('configuration', () => {
  it('layers defaults < file < environment', () => {
    const dir = mkdtempSync(join(tmpdir(), 'voxgate-cfg-'));
    const file = join(dir, 'gateway.config.json');
    writeFileSync(file, JSON.stringify({ http: { port: 9000 }, calls: { queueLimit: 4 }, logLevel: 'warn' }));
    const c = loadConfig({ GATEWAY_CONFIG: file, GATEWAY_HTTP_PORT: '9100', GATEWAY_API_KEYS: 'a, b ,,c' });
    expect(c.http.port).toBe(9100);
    expect(c.calls.queueLimit).toBe(4);
    expect(c.logLevel).toBe('warn');
    expect(c.apiKeys).toEqual(['a', 'b', 'c']);
    expect(c.mqtt.port).toBe(1883);
    expect(c.ws.path).toBe('/xiaozhi/v1/');
    rmSync(dir, { recursive: true });
  });

  it('reports every bad field, with its source', () => {
    let err: unknown;
    try {
      loadConfig({ GATEWAY_CONFIG: '/nonexistent/none.json' });
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(ConfigError);
    try {
      loadConfig({ GATEWAY_HTTP_PORT: '70000', GATEWAY_DEVICE_AUTH: 'maybe', GATEWAY_VISION_URL: 'ftp://x', GATEWAY_LOG_LEVEL: 'loud' });
      expect.unreachable();
    } catch (e) {
      const problems = (e as ConfigError).problems.join('\n');
      expect(problems).toContain('http.port');
      expect(problems).toContain('GATEWAY_HTTP_PORT');
      expect(problems).toContain('deviceAuth');
      expect(problems).toContain('vision.url');
      expect(problems).toContain('logLevel');
    }
  });

  it('exits with code 2 and names the bad fields when started with an invalid configuration', async () => {
    const run = runGateway({ GATEWAY_HTTP_PORT: 'eighty', GATEWAY_LOG_LEVEL: 'loud', GATEWAY_DEVICE_AUTH: 'token' });
    expect(await withTimeout(run.exited, 15_000, 'the gateway to exit')).toBe(2);
    const err = run.stderr.join('');
    expect(err).toContain('http.port');
    expect(err).toContain('logLevel');
    // Cross-field rules are reported in the same start, not only once the other fields are fixed.
    expect(err).toContain('deviceTokens');
  });

  it('checks settings that depend on each other', () => {
    expect(() => loadConfig({ GATEWAY_CONFIG: '/dev/null/x', GATEWAY_DEVICE_AUTH: 'token' })).toThrow(ConfigError);
    const dir = mkdtempSync(join(tmpdir(), 'voxgate-cfg-'));
    writeFileSync(join(dir, 'c.json'), '{}');
    expect(() => loadConfig({ GATEWAY_CONFIG: join(dir, 'c.json'), GATEWAY_DEVICE_AUTH: 'token' })).toThrow(/deviceTokens/);
    expect(() => loadConfig({ GATEWAY_CONFIG: join(dir, 'c.json'), GATEWAY_CALL_TIMEOUT_MS: '9000', GATEWAY_CALL_MAX_TIMEOUT_MS: '8000' })).toThrow(/calls.defaultTimeoutMs/);
    rmSync(dir, { recursive: true });
  });
});

describe('process lifecycle', () => {
  it('starts on its defaults, prints a generated API key once, and stops on SIGTERM closing devices with a close frame', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'voxgate-life-'));
    writeFileSync(join(dataDir, 'none.json'), '{}');
    const run = runGateway({ GATEWAY_DATA_DIR: dataDir, GATEWAY_HTTP_PORT: '0', GATEWAY_MQTT_PORT: '0', GATEWAY_HTTP_HOST: '127.0.0.1', GATEWAY_MQTT_HOST: '127.0.0.1', GATEWAY_CONFIG: join(dataDir, 'none.json'), GATEWAY_API_KEYS: '' });
    try {
      const started = await withTimeout(
        new Promise<{ http: string }>((resolve) => {
          const scan = () => {
            for (const line of run.stdout.join('').split('\n')) if (line.includes('voxgate started')) return resolve(JSON.parse(line) as { http: string });
            setTimeout(scan, 50);
          };
          scan();
        }),
        15_000,
        'the gateway to start',
      );
      const base = `http://${started.http}`;
      const secrets = JSON.parse(readFileSync(join(dataDir, 'secrets.json'), 'utf8')) as { apiKey: string };
      expect(statSync(join(dataDir, 'secrets.json')).mode & 0o777).toBe(0o600);
      expect(run.stderr.join('')).toContain(secrets.apiKey);
      expect(run.stdout.join('')).not.toContain(secrets.apiKey);
      const devices = await fetch(`${base}/v1/devices`, { headers: { authorization: `Bearer ${secrets.apiKey}` } });
      expect(devices.status).toBe(200);

      const d = new ReferenceDevice({ deviceId: '02:00:00:00:03:01' });
      await d.connectWebSocket(`ws://${started.http}/xiaozhi/v1/`);
      run.child.kill('SIGTERM');
      expect((await d.closed()).code).toBe(1001);
      expect(await withTimeout(run.exited, 5000, 'the gateway to exit after SIGTERM')).toBe(0);
    } finally {
      run.child.kill('SIGKILL');
      rmSync(dataDir, { recursive: true, force: true });
    }
  });
});
