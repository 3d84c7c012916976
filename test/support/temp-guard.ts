import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** Temp folders the project's tests create start with this (mkdtemp(join(tmpdir(), 'voxgate-…'))). */
const PROJECT_PREFIX = 'voxgate-';

/**
 * vitest globalSetup: the run gets a temp folder of its own (TMPDIR, inherited by every test worker and
 * every process a test starts), so that what this run leaves behind can be told apart from what another
 * run beside it is still using. At the end, a project folder still there is a test that did not clean
 * up: the run fails naming it. The run's folder is removed either way, so `npm test` leaves nothing in /tmp.
 */
export default function guardTempFolders(): () => void {
  const previous = process.env['TMPDIR'];
  const root = mkdtempSync(join(tmpdir(), 'voxgate-run-'));
  process.env['TMPDIR'] = root;
  return () => {
    if (previous === undefined) delete process.env['TMPDIR'];
    else process.env['TMPDIR'] = previous;
    const left = readdirSync(root).filter((name) => name.startsWith(PROJECT_PREFIX));
    rmSync(root, { recursive: true, force: true });
    if (left.length === 0) return;
    // vitest reports an error thrown here but keeps exit code 0: set it, so the run fails.
    process.exitCode = 1;
    throw new Error(`tests left temp folders behind (each test must remove what it creates): ${left.join(', ')}`);
  };
}
