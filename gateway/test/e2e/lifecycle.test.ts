import { mkdtempSync, rmSync, statSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ConfigError, ENV_MAP, loadConfig } from '../../src/config.js';
import { isolatedEnv, ROOT, startCompiledGateway } from '../../../test/support/gateway-process.js';
import { ReferenceDevice } from '../../../test/support/reference-device.js';

// Process tests wait for events (a log line, an exit), never for a fixed budget: a start on a loaded
// machine may be slow, so only the test's own timeout bounds them.
const PROCESS_TEST_MS = 60_000;

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

  it(
    'exits with code 2 and names the bad fields when started with an invalid configuration',
    async () => {
      const run = startCompiledGateway({ GATEWAY_HTTP_PORT: 'eighty', GATEWAY_LOG_LEVEL: 'loud', GATEWAY_DEVICE_AUTH: 'token' });
      expect((await run.exited).code).toBe(2);
      const err = run.stderr();
      expect(err).toContain('http.port');
      expect(err).toContain('logLevel');
      // Cross-field rules are reported in the same start, not only once the other fields are fixed.
      expect(err).toContain('deviceTokens');
    },
    PROCESS_TEST_MS,
  );

  it('.env.example lists every environment variable the gateway reads, and nothing else', () => {
    const listed = [...readFileSync(join(ROOT, '.env.example'), 'utf8').matchAll(/^#?([A-Z][A-Z0-9_]*)=/gm)].map((m) => m[1]);
    expect(new Set(listed)).toEqual(new Set(['GATEWAY_CONFIG', ...Object.keys(ENV_MAP)]));
  });

  it('checks settings that depend on each other', () => {
    expect(() => loadConfig({ GATEWAY_CONFIG: '/dev/null/x', GATEWAY_DEVICE_AUTH: 'token' })).toThrow(ConfigError);
    const dir = mkdtempSync(join(tmpdir(), 'voxgate-cfg-'));
    writeFileSync(join(dir, 'c.json'), '{}');
    expect(() => loadConfig({ GATEWAY_CONFIG: join(dir, 'c.json'), GATEWAY_DEVICE_AUTH: 'token' })).toThrow(/deviceTokens/);
    expect(() => loadConfig({ GATEWAY_CONFIG: join(dir, 'c.json'), GATEWAY_CALL_TIMEOUT_MS: '9000', GATEWAY_CALL_MAX_TIMEOUT_MS: '8000' })).toThrow(
      /calls.defaultTimeoutMs/,
    );
    rmSync(dir, { recursive: true });
  });
});

describe('process lifecycle', () => {
  it(
    'starts on its defaults, prints a generated API key once, and stops on SIGTERM closing devices with a close frame',
    async () => {
      const dataDir = mkdtempSync(join(tmpdir(), 'voxgate-life-'));
      writeFileSync(join(dataDir, 'gateway.config.json'), '{}');
      const run = startCompiledGateway(isolatedEnv(dataDir, { GATEWAY_API_KEYS: '' }));
      try {
        const started = (await run.logLine('voxgate started')) as { http: string };
        const base = `http://${started.http}`;
        const secrets = JSON.parse(readFileSync(join(dataDir, 'secrets.json'), 'utf8')) as { apiKey: string };
        expect(statSync(join(dataDir, 'secrets.json')).mode & 0o777).toBe(0o600);
        await run.stderrIncludes(secrets.apiKey);
        expect(JSON.stringify(run.logs)).not.toContain(secrets.apiKey);
        const devices = await fetch(`${base}/v1/devices`, { headers: { authorization: `Bearer ${secrets.apiKey}` } });
        expect(devices.status).toBe(200);

        const d = new ReferenceDevice({ deviceId: '02:00:00:00:03:01' });
        await d.connectWebSocket(`ws://${started.http}/xiaozhi/v1/`);
        run.child.kill('SIGTERM');
        expect((await d.closed()).code).toBe(1001);
        expect(await run.exited).toEqual({ code: 0, signal: null });
        expect(run.logs.map((l) => l.msg)).toContain('stopped');
      } finally {
        run.child.kill('SIGKILL');
        rmSync(dataDir, { recursive: true, force: true });
      }
    },
    PROCESS_TEST_MS,
  );

  it(
    'a SIGTERM that arrives while the gateway is starting stops it once it is up, gracefully',
    async () => {
      const dataDir = mkdtempSync(join(tmpdir(), 'voxgate-life-'));
      writeFileSync(join(dataDir, 'gateway.config.json'), '{}');
      const run = startCompiledGateway(isolatedEnv(dataDir, { GATEWAY_API_KEYS: 'life-test-key' }));
      try {
        // Logged by startGateway before any listener is up.
        await run.logLine('device auth is "open": any device may connect. Set GATEWAY_DEVICE_AUTH=hmac (or token) in production.');
        run.child.kill('SIGTERM');
        expect(await run.exited).toEqual({ code: 0, signal: null });
        expect(run.logs.map((l) => l.msg)).toEqual(expect.arrayContaining(['voxgate started', 'signal received', 'stopped']));
      } finally {
        run.child.kill('SIGKILL');
        rmSync(dataDir, { recursive: true, force: true });
      }
    },
    PROCESS_TEST_MS,
  );
});
