import { defaultServerConditions } from 'vite';
import { defineConfig } from 'vitest/config';

/** Workspace packages export their TypeScript sources under this condition (dist JS otherwise). */
const SOURCE = 'voxgate-source';

export default defineConfig({
  // Tests run the TypeScript sources of @voxgate/* packages, never a possibly stale dist/.
  ssr: { resolve: { conditions: [SOURCE, ...defaultServerConditions] } },
  test: {
    include: ['protocol/test/**/*.test.ts', 'gateway/test/**/*.test.ts', 'test/**/*.test.ts', 'bench/test/**/*.test.ts', 'mcp_servers/*/test/**/*.test.ts'],
    // Build dist/ once per run: process tests start the compiled gateway (test/support/gateway-process.ts).
    // temp-guard: a temp folder per run, and the run fails if a test leaves a folder of its own behind.
    globalSetup: ['./test/support/temp-guard.ts', './test/support/build.ts'],
    // Hang guards, not budgets: tests await the events they need, and two runs side by side on 2 cores
    // (or a CI machine starting gateway processes through tsx) can take several times a quiet run's time.
    testTimeout: 60_000,
    hookTimeout: 60_000,
    // expect.poll's own default (1 s) is a budget a loaded machine exceeds: the same hang guard instead.
    expect: { poll: { timeout: 30_000 } },
    // Two cores: files run in parallel forks, each with its own ports (port 0).
    pool: 'forks',
    reporters: ['default', './test/support/summary-reporter.ts'],
    maxWorkers: 2,
  },
});
