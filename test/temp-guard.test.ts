import { existsSync, mkdirSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import guardTempFolders from './support/temp-guard.js';

describe('the temp-folder guard of the test run (issue 9 item 20: npm test leaves nothing in /tmp)', () => {
  const exitCode = process.exitCode;
  afterEach(() => {
    process.exitCode = exitCode;
  });

  it('gives the run a folder of its own, fails the run naming a project folder left in it, and removes it all', () => {
    const outer = tmpdir();
    const teardown = guardTempFolders();
    const root = tmpdir();
    expect(root).not.toBe(outer);
    const leaked = mkdtempSync(join(tmpdir(), 'voxgate-leaked-'));
    mkdirSync(join(root, 'tsx-0')); // another tool's cache: not a test's leftover
    expect(teardown).toThrow(/left temp folders behind.*voxgate-leaked-/);
    expect(process.exitCode).toBe(1);
    expect(tmpdir()).toBe(outer);
    expect(existsSync(leaked)).toBe(false);
    expect(existsSync(root)).toBe(false);
  });

  it('passes quietly when the tests cleaned up', () => {
    const teardown = guardTempFolders();
    const root = tmpdir();
    mkdirSync(join(root, 'tsx-0'));
    expect(teardown).not.toThrow();
    expect(existsSync(root)).toBe(false);
  });
});
