import { getHeapSpaceStatistics, setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { performance, type EventLoopUtilization } from 'node:perf_hooks';

/**
 * Gives V8's young generation back to the system once the gateway goes quiet.
 *
 * Start-up (and any burst of load) allocates with high survival, so V8 grows the young generation's two semispaces
 * to their 16 MiB maximum; it shrinks them only at a collection that runs while the allocation rate is low, and an
 * idle gateway allocates so little that no collection comes: ~30 MiB of an idle gateway's resident memory stayed
 * committed and empty for as long as it stayed idle (docs/performance.md, "lightidle" and "idlegc"). A young-generation
 * collection (a scavenge: ~2 ms at idle, nothing old is walked) at a quiet moment is such a collection.
 *
 * Every `everyMs` the event loop's utilization over the window is read; after `quietWindows` windows in a row under
 * `maxUtilization`, with the young generation above `minYoungBytes`, one scavenge runs. After it the young generation
 * is at its minimum, so an idle gateway scavenges once, not once a window. `check` says whether it freed any.
 *
 * The price is paid by the next burst: V8 regrows the young generation over several scavenges, promoting more of the
 * burst's short-lived objects meanwhile. A fleet that dialled in right after a reclaim took 1.3–1.45× the CPU per device
 * (docs/performance.md, "idlegc"), so the default waits a minute of quiet, not a window: a pause between bursts keeps
 * the grown young generation, an idle gateway gives it back.
 */
export interface IdleReclaimOptions {
  everyMs: number;
  /** The busiest window (event-loop utilization, 0–1) still counted as quiet. */
  maxUtilization: number;
  /** Quiet windows in a row before a reclaim. */
  quietWindows: number;
  /** Committed young-generation bytes above which a quiet window reclaims (V8's minimum is 2 MiB: two 1 MiB semispaces). */
  minYoungBytes: number;
  /** After each scavenge that gave memory back (a metric). */
  onReclaim?: (freedBytes: number) => void;
}

/** What the reclaimer reads and does; the defaults are V8's, tests pass their own. */
export interface IdleReclaimProbes {
  /** Event-loop utilization since the last call (0–1). */
  utilization: () => number;
  youngBytes: () => number;
  /** One young-generation collection. */
  scavenge: () => void;
}

export const IDLE_RECLAIM_DEFAULTS: IdleReclaimOptions = { everyMs: 10_000, maxUtilization: 0.05, quietWindows: 6, minYoungBytes: 4 * 2 ** 20 };

export interface IdleReclaim {
  /** One window's check, as the timer runs it (tests call it directly). */
  check(): boolean;
  stop(): void;
}

export function startIdleReclaim(o: IdleReclaimOptions = IDLE_RECLAIM_DEFAULTS, probes: IdleReclaimProbes | undefined = v8Probes()): IdleReclaim | undefined {
  if (!probes) return undefined;
  probes.utilization();
  // V8 reads its allocation rate from what was allocated since the last collection: start-up's tail (~10 MiB) would
  // make the first quiet window's rate read high and its scavenge futile. One scavenge now closes that account.
  probes.scavenge();
  let quiet = 0;
  const check = (): boolean => {
    // Read every window, so each check sees only its own window's utilization.
    const busy = probes.utilization();
    quiet = busy > o.maxUtilization ? 0 : quiet + 1;
    if (quiet < o.quietWindows) return false;
    const before = probes.youngBytes();
    if (before <= o.minYoungBytes) return false;
    probes.scavenge();
    // V8 shrinks only when its own allocation rate reads low: otherwise this scavenge (~1 ms) frees nothing and the
    // next quiet window tries again.
    const freed = before - probes.youngBytes();
    if (freed > 0) o.onReclaim?.(freed);
    return freed > 0;
  };
  const timer = setInterval(check, o.everyMs).unref();
  return { check, stop: () => clearInterval(timer) };
}

/**
 * V8's own probes. The collection needs V8's `gc` function: the global one when node runs with `--expose-gc`, else one
 * made for a fresh context (the flag set, the function taken, the flag cleared: what jest's leak detector does), so
 * the gateway's own global object gets no `gc`. Undefined if neither works: the reclaimer then does not run.
 */
export function v8Probes(): IdleReclaimProbes | undefined {
  const gc = v8Gc();
  if (!gc) return undefined;
  let last: EventLoopUtilization = performance.eventLoopUtilization();
  return {
    utilization: () => {
      const now = performance.eventLoopUtilization();
      const window = performance.eventLoopUtilization(now, last);
      last = now;
      return window.utilization;
    },
    youngBytes: () => getHeapSpaceStatistics().find((s) => s.space_name === 'new_space')?.space_size ?? 0,
    scavenge: () => gc({ type: 'minor', execution: 'sync' }),
  };
}

type Gc = (options: { type: 'minor' | 'major'; execution: 'sync' }) => void;

function v8Gc(): Gc | undefined {
  const global = (globalThis as { gc?: unknown }).gc;
  if (typeof global === 'function') return global as Gc;
  try {
    setFlagsFromString('--expose-gc');
    const gc: unknown = runInNewContext('gc');
    return typeof gc === 'function' ? (gc as Gc) : undefined;
  } catch {
    return undefined;
  } finally {
    setFlagsFromString('--no-expose-gc');
  }
}
