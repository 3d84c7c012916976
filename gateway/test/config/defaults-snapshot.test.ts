import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/config.js';

/**
 * Every default, as `loadConfig` produced it before the config was split by concern (issue 18 move 2):
 * the split must not change one of them. A deliberate change of a default updates the snapshot file.
 */
describe('configuration defaults', () => {
  it('are byte-identical to the committed snapshot', () => {
    const snapshot = readFileSync(join(import.meta.dirname, 'defaults.snapshot.json'), 'utf8');
    // No environment variable, and no gateway.config.json in the working directory (the checkout's root).
    const config = loadConfig({});
    expect(`${JSON.stringify(config, null, 2)}\n`).toBe(snapshot);
  });

  it("give up on a voice server before the firmware gives up on the gateway's hello (10 s), so the device reads the alert", () => {
    expect(loadConfig({}).voice.upstream.connectTimeoutMs).toBeLessThan(10_000);
  });
});
