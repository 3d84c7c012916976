import { mkdtempSync, rmSync, statSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it, onTestFinished } from 'vitest';
import { startTestGateway, TEST_API_KEY } from '../../../test/support/gateway-harness.js';
import { isolatedEnv, startCompiledGateway } from '../../../test/support/gateway-process.js';
import { ReferenceDevice } from '../../../test/support/reference-device.js';

// Process tests wait for events (a log line, an exit), never for a fixed budget: a start on a loaded
// machine may be slow, so only the test's own timeout bounds them.
const PROCESS_TEST_MS = 60_000;

/** How a start uses its configuration; the rules themselves are part tests (../config.test.ts, ../secrets.test.ts). */
describe('configuration at start', () => {
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

  it('exits with code 2 on a misspelled key inside a section, as for a top-level one', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'voxgate-cfg-'));
    onTestFinished(() => rmSync(dir, { recursive: true, force: true }));
    writeFileSync(join(dir, 'gateway.config.json'), JSON.stringify({ voice: { mdoe: 'relay' } }));
    const run = startCompiledGateway(isolatedEnv(dir));
    expect((await run.exited).code).toBe(2);
    expect(run.stderr()).toContain('voice.mdoe: unknown setting; did you mean "mode"?');
  }, 60_000);
});

describe('data/secrets.json permissions (issue 8, defect 10d)', () => {
  it('tightens a pre-existing secrets file that others can read to 0600, and says so in the log', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'voxgate-config-'));
    onTestFinished(() => rmSync(dataDir, { recursive: true, force: true }));
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
});

describe('API keys at start', () => {
  it('warns about configured keys too short to resist guessing, counting them without naming them', async () => {
    const weak = 'short-key-1';
    const t = await startTestGateway({ apiKeys: [TEST_API_KEY, weak] });
    try {
      const warning = t.logs.find((l) => String(l['msg']).includes('shorter than'));
      expect(warning).toMatchObject({ level: 40, keys: 1, minChars: 20 });
      expect(JSON.stringify(t.logs)).not.toContain(weak);
    } finally {
      await t.close();
    }
    const strong = await startTestGateway();
    try {
      expect(strong.logs.some((l) => String(l['msg']).includes('shorter than'))).toBe(false);
    } finally {
      await strong.close();
    }
  });
});

describe('a start whose port is taken says which (issue 9 item 20; both ports at once: ../links/listeners.test.ts)', () => {
  it('reports the one port that is in use, and frees the other', async () => {
    const held = createServer();
    await new Promise<void>((resolve) => held.listen(0, '127.0.0.1', resolve));
    onTestFinished(() => new Promise<void>((resolve) => held.close(() => resolve())));
    const port = (held.address() as { port: number }).port;
    await expect(startTestGateway({ http: { port } })).rejects.toThrow(/^cannot listen: HTTP 127\.0\.0\.1:\d+ is already in use \(EADDRINUSE\)$/);
    await expect(startTestGateway({ mqtt: { port } })).rejects.toThrow(/^cannot listen: MQTT 127\.0\.0\.1:\d+ is already in use \(EADDRINUSE\)$/);
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
