import { execFileSync } from 'node:child_process';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';

/**
 * vitest globalSetup: `npm run build` once per test run (the console only when stale), so tests that start the gateway as a process
 * start the compiled entry (`gateway/dist/main.js`), as production does, instead of compiling per test.
 * `tsc -b` is incremental: about a second when dist/ is up to date.
 */
export default function buildOnce(): void {
  const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');
  const root = fileURLToPath(new URL('../../', import.meta.url));
  execFileSync(process.execPath, [tsc, '-b', 'tsconfig.build.json'], { cwd: root, stdio: 'inherit' });
  // The console's static files, for the tests that drive it in a browser (skipped when up to date).
  execFileSync('sh', ['scripts/build-console-if-needed.sh'], { cwd: root, stdio: 'inherit' });
}
