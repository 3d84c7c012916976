import { execFileSync } from 'node:child_process';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';

/**
 * vitest globalSetup: `npm run build` once per test run, so tests that start the gateway as a process
 * start the compiled entry (`gateway/dist/main.js`), as production does, instead of compiling per test.
 * `tsc -b` is incremental: about a second when dist/ is up to date.
 */
export default function buildOnce(): void {
  const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');
  execFileSync(process.execPath, [tsc, '-b', 'tsconfig.build.json'], { cwd: fileURLToPath(new URL('../../', import.meta.url)), stdio: 'inherit' });
}
