import { spawnSync } from 'node:child_process';
import { copyFileSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const BIN = fileURLToPath(new URL('../../bin/voxgate.mjs', import.meta.url));

describe('the voxgate command before a build', () => {
  it('says to build first instead of printing a module-not-found stack', () => {
    // The bin as installed, beside no dist/: what `npx voxgate chat` meets on a fresh clone.
    const dir = mkdtempSync(join(tmpdir(), 'voxgate-bin-'));
    try {
      mkdirSync(join(dir, 'bin'));
      copyFileSync(BIN, join(dir, 'bin', 'voxgate.mjs'));
      const r = spawnSync(process.execPath, [join(dir, 'bin', 'voxgate.mjs'), 'chat'], { encoding: 'utf8' });
      expect(r.status).toBe(1);
      expect(r.stderr).toContain('Run `npm run build`');
      expect(r.stderr).not.toContain('ERR_MODULE_NOT_FOUND');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
