import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['protocol/test/**/*.test.ts', 'gateway/test/**/*.test.ts', 'test/**/*.test.ts', 'bench/test/**/*.test.ts', 'mcp_servers/*/test/**/*.test.ts'],
    testTimeout: 20_000,
    hookTimeout: 20_000,
    // Two cores: files run in parallel forks, each with its own ports (port 0).
    pool: 'forks',
    reporters: ['default', './test/support/summary-reporter.ts'],
    maxWorkers: 2,
  },
});
