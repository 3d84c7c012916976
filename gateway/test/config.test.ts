import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { pino } from 'pino';
import { Registry } from 'prom-client';
import { afterEach, describe, expect, it, onTestFinished } from 'vitest';
import { ConfigError, ENV_MAP, loadConfig } from '../src/config.js';
import { createModelGates } from '../src/throttle/model-gates.js';
import { ROOT } from '../../test/support/gateway-process.js';

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

/** The problems loadConfig reports for this config file. */
function problemsFor(file: unknown): string[] {
  const dir = tempDir();
  writeFileSync(join(dir, 'gateway.config.json'), JSON.stringify(file));
  try {
    loadConfig({ GATEWAY_CONFIG: join(dir, 'gateway.config.json') });
  } catch (e) {
    expect(e).toBeInstanceOf(ConfigError);
    return (e as ConfigError).problems;
  }
  throw new Error('the configuration was accepted');
}

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
    const dir = tempDir();
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

  // Deliberate change (issue 18 move 2): these five sections used to accept any key silently.
  it('refuses misspelled keys in voice, cluster, tls, assistant and console too, at every depth', () => {
    const problems = problemsFor({
      voice: { mdoe: 'relay', upstream: { tokn: 'x' }, udp: { prot: 1 } },
      cluster: { enabeld: true, nats: { server: ['nats://a:4222'] }, events: { maxMsg: 5 } },
      tls: { certfile: 'a.pem' },
      assistant: { maxToolRound: 3, models: { local: { provider: 'openai', model: 'm', tolMode: 'none' } } },
      console: { enable: false },
    });
    expect(problems).toEqual(
      expect.arrayContaining([
        'voice.mdoe: unknown setting; did you mean "mode"?',
        'voice.upstream.tokn: unknown setting; did you mean "token"?',
        'voice.udp.prot: unknown setting; did you mean "port"?',
        'cluster.enabeld: unknown setting; did you mean "enabled"?',
        'cluster.nats.server: unknown setting; did you mean "servers"?',
        'cluster.events.maxMsg: unknown setting; did you mean "maxMsgs"?',
        'tls.certfile: unknown setting; did you mean "certFile"?',
        'assistant.maxToolRound: unknown setting; did you mean "maxToolRounds"?',
        'console.enable: unknown setting; did you mean "enabled"?',
      ]),
    );
    expect(problems.some((p) => p.startsWith('assistant.models.local.tolMode: unknown setting'))).toBe(true);
    expect(problems.filter((p) => p.includes('unknown setting'))).toHaveLength(10);
  });

  it('refuses misspelled keys in the conversation settings (voice.asr, voice.tts, voice.converse, voice.tenants)', () => {
    const problems = problemsFor({
      voice: { asr: { modle: 'whisper-1' }, tts: { voicee: 'alloy' }, converse: { leadFrame: 5 }, tenants: { acme: { persona: 'x', langauge: 'en' } } },
    });
    expect(problems).toEqual(
      expect.arrayContaining([
        'voice.asr.modle: unknown setting; did you mean "model"?',
        'voice.tts.voicee: unknown setting; did you mean "voice"?',
        'voice.converse.leadFrame: unknown setting; did you mean "leadFrames"?',
      ]),
    );
    // Inside a record (tenants by name) the key is refused too, without a suggestion.
    expect(problems.some((p) => p.startsWith('voice.tenants.acme.langauge: unknown setting'))).toBe(true);
  });
});

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

describe('API key tenants', () => {
  it('parses key tenants from the environment, keeping plain GATEWAY_API_KEYS valid', () => {
    const empty = join(mkdtempSync(join(tmpdir(), 'voxgate-cfg-')), 'gateway.config.json');
    writeFileSync(empty, '{}');
    onTestFinished(() => rmSync(dirname(empty), { recursive: true, force: true }));
    const c = loadConfig({ GATEWAY_CONFIG: empty, GATEWAY_API_KEYS: 'k1,k2,k3', GATEWAY_API_KEY_TENANTS: 'k1=acme, k2=globex' });
    expect(c.apiKeys).toEqual(['k1', 'k2', 'k3']);
    expect(c.apiKeyTenants).toEqual({ k1: 'acme', k2: 'globex' });
    expect(() => loadConfig({ GATEWAY_CONFIG: empty, GATEWAY_API_KEYS: 'k1', GATEWAY_API_KEY_TENANTS: 'other=acme' })).toThrow(/apiKeyTenants: names a key/);
    expect(() => loadConfig({ GATEWAY_CONFIG: empty }, { mcp: { servers: { 'bad name!': { command: 'x' } } } })).toThrow(/a server name is/);
    expect(() => loadConfig({ GATEWAY_CONFIG: empty }, { mcp: { servers: { s: { url: 'ftp://x' } } } })).toThrow(/mcpServers\.s\.url/);
  });
});

describe('configuration layers and rules (from the e2e lifecycle tests)', () => {
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

describe('connection caps (from the e2e connection-limits tests)', () => {
  it('refuses a configuration that leaves the API no reserve, naming the variable', () => {
    const dir = mkdtempSync(join(tmpdir(), 'voxgate-limits-'));
    dirs.push(dir);
    writeFileSync(join(dir, 'config.json'), '{}');
    const env = { GATEWAY_CONFIG: join(dir, 'config.json'), GATEWAY_WS_MAX_CONNECTIONS: '100', GATEWAY_HTTP_MAX_CONNECTIONS: '100' };
    expect(() => loadConfig(env)).toThrow(ConfigError);
    expect(() => loadConfig(env)).toThrow(/http\.maxConnections: must exceed ws\.maxConnections.*GATEWAY_HTTP_MAX_CONNECTIONS/);
    expect(loadConfig({ ...env, GATEWAY_HTTP_MAX_CONNECTIONS: '101' }).http.maxConnections).toBe(101);
  });
});

describe('TLS configuration (from the e2e TLS tests)', () => {
  it('reads the tls block from GATEWAY_TLS_* and wants certificate and key together', () => {
    const c = loadConfig({
      GATEWAY_TLS_CERT_FILE: '/c.pem',
      GATEWAY_TLS_KEY_FILE: '/k.pem',
      GATEWAY_TLS_MQTT_PORT: '8884',
      GATEWAY_TLS_ADVERTISE: 'plain',
      GATEWAY_TRUST_PROXY: '10.0.0.0/8, loopback',
    });
    expect(c.tls).toMatchObject({ certFile: '/c.pem', keyFile: '/k.pem', mqttPort: 8884, mqttEnabled: true, advertise: 'plain' });
    expect(c.http.trustProxy).toEqual(['10.0.0.0/8', 'loopback']);
    expect(loadConfig({}).tls).toMatchObject({ mqttPort: 8883, advertise: 'auto' });
    expect(() => loadConfig({ GATEWAY_TLS_CERT_FILE: '/c.pem' })).toThrow(/tls.keyFile: tls.certFile and tls.keyFile go together/);
    expect(() => loadConfig({ GATEWAY_TLS_CA_FILE: '/ca.pem' })).toThrow(/tls.caFile: needs tls.certFile/);
    // Checked here (exit 2, the variable named), not by fastify at start.
    expect(() => loadConfig({ GATEWAY_TRUST_PROXY: '10.0.0.1,proxy.example' })).toThrow(/http.trustProxy: addresses, CIDRs.*\(from GATEWAY_TRUST_PROXY\)/);
  });

  it('is a ConfigError, not a crash, for a bad advertise value', () => {
    expect(() => loadConfig({ GATEWAY_TLS_ADVERTISE: 'sometimes' })).toThrow(ConfigError);
  });
});

describe('one OpenAI key is a whole setup (issue 19: npm start plus one API key)', () => {
  const withFile = (file: unknown, env: Record<string, string>) => {
    const dir = tempDir();
    writeFileSync(join(dir, 'gateway.config.json'), JSON.stringify(file));
    return loadConfig({ GATEWAY_CONFIG: join(dir, 'gateway.config.json'), ...env });
  };

  it('assumes one OpenAI model when no model is configured and OPENAI_API_KEY is set', () => {
    const c = withFile({}, { OPENAI_API_KEY: 'sk-test-key-0000', GATEWAY_VOICE_MODE: 'converse' });
    expect(c.assistant.models).toEqual({
      openai: { provider: 'openai', model: 'gpt-4o-mini', apiKeyEnv: 'OPENAI_API_KEY', vision: true, toolMode: 'native', maxTokens: 1024, maxRetries: 1 },
    });
    // The key itself is never copied into the configuration: only the variable's name.
    expect(JSON.stringify(c)).not.toContain('sk-test-key-0000');
  });

  it('assumes nothing without the key, or when models are configured', () => {
    expect(withFile({}, {}).assistant.models).toEqual({});
    expect(withFile({}, { OPENAI_API_KEY: '' }).assistant.models).toEqual({});
    const own = withFile(
      { assistant: { models: { local: { provider: 'openai', baseUrl: 'http://127.0.0.1:11434/v1', model: 'qwen2.5' } } } },
      { OPENAI_API_KEY: 'sk-x' },
    );
    expect(Object.keys(own.assistant.models)).toEqual(['local']);
  });
});

describe('model request gates from the environment alone (Docker, systemd)', () => {
  it('GATEWAY_MODEL_REQUESTS_<KIND>_* set the gates the gateway builds, and a bad value is refused, the variable named', async () => {
    const file = join(tempDir(), 'gateway.config.json');
    writeFileSync(file, '{}');
    const c = loadConfig({
      GATEWAY_CONFIG: file,
      GATEWAY_MODEL_REQUESTS_TTS_MAX_CONCURRENT: '1',
      GATEWAY_MODEL_REQUESTS_TTS_MAX_WAITING: '0',
      GATEWAY_MODEL_REQUESTS_TTS_MAX_WAIT_MS: '3000',
      GATEWAY_MODEL_REQUESTS_LLM_MAX_CONCURRENT_PER_TENANT: '5',
      GATEWAY_MODEL_REQUESTS_VISION_MAX_WAITING_PER_TENANT: '7',
    });
    expect(c.modelRequests.tts).toEqual({ maxConcurrent: 1, maxWaiting: 0, maxWaitingPerTenant: 64, maxWaitMs: 3000 });
    expect(c.modelRequests.llm.maxConcurrentPerTenant).toBe(5);
    expect(c.modelRequests.vision.maxWaitingPerTenant).toBe(7);
    expect(c.modelRequests.asr).toEqual(loadConfig({ GATEWAY_CONFIG: file }).modelRequests.asr);

    // The gates built from that config (as gateway.ts builds them): one speech request at a time, none waiting.
    const gates = createModelGates(c.modelRequests, new Registry(), pino({ level: 'silent' }));
    expect(gates.tts.retryAfterSeconds).toBe(3);
    const slot = await gates.tts.acquire('t1');
    await expect(gates.tts.acquire('t2')).rejects.toMatchObject({ code: 'MODEL_BUSY', extra: { kind: 'tts', reason: 'queue_full' } });
    slot.release();
    (await gates.tts.acquire('t2')).release();

    expect(() => loadConfig({ GATEWAY_CONFIG: file, GATEWAY_MODEL_REQUESTS_ASR_MAX_CONCURRENT: '0' })).toThrow(
      /modelRequests\.asr\.maxConcurrent: .*\(from GATEWAY_MODEL_REQUESTS_ASR_MAX_CONCURRENT\)/,
    );
    expect(() => loadConfig({ GATEWAY_CONFIG: file, GATEWAY_MODEL_REQUESTS_LLM_MAX_WAIT_MS: 'soon' })).toThrow(
      /modelRequests\.llm\.maxWaitMs: .*\(from GATEWAY_MODEL_REQUESTS_LLM_MAX_WAIT_MS\)/,
    );
  });
});
