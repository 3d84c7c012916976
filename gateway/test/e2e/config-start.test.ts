import { mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { startTestGateway } from '../../../test/support/gateway-harness.js';
import { isolatedEnv, startCompiledGateway } from '../../../test/support/gateway-process.js';

/** How a start uses its configuration and secrets; the rules themselves: ../config.test.ts, ../secrets.test.ts. */
const dirs: string[] = [];
function tempDir(): string {
  const d = mkdtempSync(join(tmpdir(), 'voxgate-config-'));
  dirs.push(d);
  return d;
}
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

describe('a misspelled key stops the start (issue 9 item 20, issue 18 move 2)', () => {
  it('exits with code 2 on a misspelled key inside a section, as for a top-level one', async () => {
    const dir = tempDir();
    writeFileSync(join(dir, 'gateway.config.json'), JSON.stringify({ voice: { mdoe: 'relay' } }));
    const run = startCompiledGateway(isolatedEnv(dir));
    expect((await run.exited).code).toBe(2);
    expect(run.stderr()).toContain('voice.mdoe: unknown setting; did you mean "mode"?');
  }, 60_000);
});

describe('data/secrets.json permissions (issue 8, defect 10d)', () => {
  it('tightens a pre-existing secrets file that others can read to 0600, and says so in the log', async () => {
    const dataDir = tempDir();
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
