import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../src/config.js';
import { createLogger } from '../src/log.js';

const isJson = (line: string) => {
  try {
    JSON.parse(line);
    return true;
  } catch {
    return false;
  }
};

describe('GATEWAY_LOG_FORMAT=pretty: readable logs for people, JSON stays the default (issue 9 item 20; the started gateway: e2e/start.test.ts)', () => {
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
});
