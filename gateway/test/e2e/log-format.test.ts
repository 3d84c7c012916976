import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { isolatedEnv, startCompiledGateway } from '../../../test/support/gateway-process.js';
import { loadConfig } from '../../src/config.js';
import { createLogger } from '../../src/log.js';

const isJson = (line: string) => {
  try {
    JSON.parse(line);
    return true;
  } catch {
    return false;
  }
};

describe('GATEWAY_LOG_FORMAT=pretty: readable logs for people, JSON stays the default (issue 9 item 20)', () => {
  it('defaults to json and accepts pretty from the environment', () => {
    const dir = mkdtempSync(join(tmpdir(), 'voxgate-cfg-'));
    const file = join(dir, 'gateway.config.json');
    writeFileSync(file, '{}');
    try {
      expect(loadConfig({ GATEWAY_CONFIG: file }).logFormat).toBe('json');
      expect(loadConfig({ GATEWAY_CONFIG: file, GATEWAY_LOG_FORMAT: 'pretty' }).logFormat).toBe('pretty');
      expect(() => loadConfig({ GATEWAY_CONFIG: file, GATEWAY_LOG_FORMAT: 'fancy' })).toThrow(/logFormat.*GATEWAY_LOG_FORMAT/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('writes readable lines that still hide secrets', () => {
    let out = '';
    const sink = new Writable({
      write(chunk: Buffer, _enc, cb) {
        out += chunk.toString();
        cb();
      },
    });
    createLogger('info', sink, 'pretty').info({ token: 'device-token-that-is-secret', deviceId: 'aa:bb:cc:dd:ee:ff' }, 'device connected');
    expect(out).toMatch(/INFO.*device connected/);
    expect(out).toContain('aa:bb:cc:dd:ee:ff');
    expect(out).toContain('[REDACTED]');
    expect(out).not.toContain('device-token-that-is-secret');
    expect(out.split('\n').filter(Boolean).some(isJson)).toBe(false);
  });

  it('is what the started gateway prints with GATEWAY_LOG_FORMAT=pretty', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'voxgate-logs-'));
    writeFileSync(join(dataDir, 'gateway.config.json'), '{}');
    const run = startCompiledGateway(isolatedEnv(dataDir, { GATEWAY_API_KEYS: 'log-format-test-key', GATEWAY_LOG_FORMAT: 'pretty' }));
    try {
      let out = '';
      await new Promise<void>((resolve, reject) => {
        run.child.stdout!.on('data', (b: Buffer) => {
          out += b.toString();
          if (out.includes('voxgate started')) resolve();
        });
        void run.exited.then(() => reject(new Error(`exited before starting; stderr: ${run.stderr()}`)));
      });
      run.child.kill('SIGTERM');
      expect((await run.exited).code).toBe(0);
      expect(out).toMatch(/INFO.*voxgate started/);
      // The startup summary, as lines for a person: where to go and what was read.
      expect(out).toMatch(/OTA URL {6}http:\/\/127\.0\.0\.1:\d+\/xiaozhi\/ota\//);
      expect(out).toContain(`Config file  ${join(dataDir, 'gateway.config.json')}`);
      expect(out).toContain('API key      from GATEWAY_API_KEYS');
      expect(out).toContain('! listening on 127.0.0.1 only');
      expect(out).not.toContain('log-format-test-key');
      expect(out).toContain('stopped');
      expect(run.logs).toEqual([]); // no JSON line at all
    } finally {
      run.child.kill('SIGKILL');
      rmSync(dataDir, { recursive: true, force: true });
    }
  }, 60_000);
});
