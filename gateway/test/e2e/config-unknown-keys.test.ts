import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../../src/config.js';
import { isolatedEnv, startCompiledGateway } from '../../../test/support/gateway-process.js';

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

  it('exits with code 2 on a misspelled key inside a section, as for a top-level one', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'voxgate-cfg-'));
    dirs.push(dir);
    writeFileSync(join(dir, 'gateway.config.json'), JSON.stringify({ voice: { mdoe: 'relay' } }));
    const run = startCompiledGateway(isolatedEnv(dir));
    expect((await run.exited).code).toBe(2);
    expect(run.stderr()).toContain('voice.mdoe: unknown setting; did you mean "mode"?');
  }, 60_000);
});
