import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';
import { startIdleReclaim, type IdleReclaimProbes } from '../src/idle-reclaim.js';

const SCRIPT = fileURLToPath(new URL('fixtures/idle-reclaim-v8.ts', import.meta.url));
const MiB = 2 ** 20;

/** Probes a test sets: the window's utilization, the young generation's size, and what a scavenge leaves. */
function fake(young: number, afterScavenge: number) {
  const state = { busy: 0, young, afterScavenge, scavenges: 0 };
  const probes: IdleReclaimProbes = {
    utilization: () => state.busy,
    youngBytes: () => state.young,
    scavenge: () => {
      state.scavenges++;
      state.young = state.afterScavenge;
    },
  };
  return { state, probes };
}

describe('idle reclaim: the young generation given back when the gateway is quiet', () => {
  const opts = { everyMs: 3_600_000, maxUtilization: 0.05, quietWindows: 1, minYoungBytes: 4 * MiB };

  it('scavenges once in a quiet window with a grown young generation, and reports what it freed', () => {
    // The scavenge at start leaves it grown (V8 still reads start-up's allocation rate); the quiet window's shrinks it.
    const { state, probes } = fake(32 * MiB, 32 * MiB);
    const freed: number[] = [];
    const r = startIdleReclaim({ ...opts, onReclaim: (b) => freed.push(b) }, probes)!;
    state.afterScavenge = 2 * MiB;
    expect(r.check()).toBe(true);
    expect(freed).toEqual([30 * MiB]);
    // At its minimum now: the next quiet windows leave it alone.
    expect(r.check()).toBe(false);
    expect(r.check()).toBe(false);
    // One at start (closing start-up's allocation in V8's accounting), one in the quiet window.
    expect(state.scavenges).toBe(2);
    r.stop();
  });

  it('leaves a busy gateway alone, and one whose young generation is at its minimum', () => {
    const { state, probes } = fake(32 * MiB, 32 * MiB);
    const r = startIdleReclaim(opts, probes)!;
    state.busy = 0.2;
    expect(r.check()).toBe(false);
    state.busy = 0.01;
    state.young = 2 * MiB;
    expect(r.check()).toBe(false);
    expect(state.scavenges).toBe(1);
    r.stop();
  });

  it('a scavenge V8 did not shrink after (its allocation rate still read high) counts nothing, and the next quiet window tries again', () => {
    const { state, probes } = fake(32 * MiB, 32 * MiB);
    const freed: number[] = [];
    const r = startIdleReclaim({ ...opts, onReclaim: (b) => freed.push(b) }, probes)!;
    expect(r.check()).toBe(false);
    state.afterScavenge = 1 * MiB;
    expect(r.check()).toBe(true);
    expect(state.scavenges).toBe(3);
    expect(freed).toEqual([31 * MiB]);
    r.stop();
  });

  it('waits for its quiet windows in a row: a busy window starts the count again', () => {
    const { state, probes } = fake(32 * MiB, 32 * MiB);
    const r = startIdleReclaim({ ...opts, quietWindows: 3 }, probes)!;
    state.afterScavenge = 2 * MiB;
    expect(r.check()).toBe(false);
    expect(r.check()).toBe(false);
    state.busy = 0.5;
    expect(r.check()).toBe(false);
    state.busy = 0;
    expect(r.check()).toBe(false);
    expect(r.check()).toBe(false);
    expect(state.scavenges).toBe(1); // the one at start
    expect(r.check()).toBe(true);
    expect(state.scavenges).toBe(2);
    r.stop();
  });

  it("with V8's own probes, in a process started without --expose-gc, the grown young generation is given back and no global gc appears", async () => {
    const { stdout } = await promisify(execFile)(process.execPath, ['--import', 'tsx', SCRIPT], { timeout: 240_000 });
    const r = JSON.parse(stdout) as { grown: number; after: number; freed: number; exposed: boolean };
    expect(r.grown).toBeGreaterThan(8 * MiB);
    expect(r.after).toBeLessThanOrEqual(4 * MiB);
    expect(r.freed).toBe(r.grown - r.after);
    expect(r.exposed).toBe(false);
  }, 300_000);
});
