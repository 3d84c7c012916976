/**
 * Young-generation figures of a process run with node's `--trace-gc-nvp`, read from its stdout while a window is open:
 * scavenges, what they copied within the young generation (`new_space_survived`) and promoted to the old one
 * (`promoted`), their main-thread pauses and their helper threads' time (`background.scavenge.parallel`), and the
 * full collections. Exact counts that the machine's load does not move (unlike CPU or wall clock), for judging a
 * change to what a call allocates and keeps.
 */
import type { Readable } from 'node:stream';

export interface GcWindow {
  /** Collections of any kind seen in the window (0: the process does not trace, or did not collect). */
  lines: number;
  scavenges: number;
  /** Bytes the heap grew between collections (the nvp line's `allocated`), summed: what was allocated, ± one young generation. */
  allocated: number;
  promoted: number;
  survived: number;
  pauseMs: number;
  helpersMs: number;
  fullCollections: number;
  fullPauseMs: number;
  /** The heap's size after the window's last collection, MB (the nvp line's `total_size_after`). */
  heapAfterMb: number;
  /** The scavenges' phases (`scavenge.roots`, `scavenge.parallel`, …), ms summed. */
  phases: Record<string, number>;
}

const empty = (): GcWindow => ({
  lines: 0,
  scavenges: 0,
  allocated: 0,
  promoted: 0,
  survived: 0,
  pauseMs: 0,
  helpersMs: 0,
  fullCollections: 0,
  fullPauseMs: 0,
  heapAfterMb: 0,
  phases: {},
});

/** Collects the nvp lines of `stdout` into a window between `open()` and `close()`. */
export class GcNvp {
  private window: GcWindow | undefined;
  private partial = '';

  constructor(stdout: Readable | null | undefined) {
    stdout?.on('data', (chunk: Buffer) => {
      // Nothing is read between windows (the process's other output costs the bench's own process nothing).
      if (!this.window) return void (this.partial = '');
      const lines = (this.partial + chunk.toString()).split('\n');
      this.partial = lines.pop() ?? '';
      for (const line of lines) this.line(line);
    });
  }

  open(): void {
    this.window = empty();
  }

  close(): GcWindow {
    const w = this.window ?? empty();
    this.window = undefined;
    return w;
  }

  private line(line: string): void {
    if (this.window) addLine(this.window, line);
  }
}

/** The window of `lines` (a process's stdout, e.g. between two markers it printed). */
export function gcWindowOf(lines: readonly string[]): GcWindow {
  const w = empty();
  for (const line of lines) addLine(w, line);
  return w;
}

function addLine(w: GcWindow, line: string): void {
  if (!line.includes(' gc=')) return;
  const num = (key: string) => Number(new RegExp(`(?:^| )${key.replace(/\./g, '\\.')}=([0-9.]+)`).exec(line)?.[1] ?? 0);
  const kind = / gc=([a-z]+)/.exec(line)?.[1];
  w.lines++;
  w.allocated += num('allocated');
  w.heapAfterMb = num('total_size_after') / 2 ** 20;
  if (kind === 's') {
    w.scavenges++;
    w.promoted += num('promoted');
    w.survived += num('new_space_survived');
    w.pauseMs += num('pause');
    w.helpersMs += num('background.scavenge.parallel');
    for (const m of line.matchAll(/ (scavenge\.[a-z_.]+|time_to_safepoint|heap\.[a-z_.]+)=([0-9.]+)/g)) w.phases[m[1]!] = (w.phases[m[1]!] ?? 0) + Number(m[2]);
  } else if (kind === 'ms' || kind === 'mc') {
    w.fullCollections++;
    w.fullPauseMs += num('pause');
  }
}

/** Several windows of one process as one (the last one's heap size). */
export function mergeWindows(ws: readonly GcWindow[]): GcWindow {
  const out = empty();
  for (const w of ws) {
    for (const k of ['lines', 'scavenges', 'allocated', 'promoted', 'survived', 'pauseMs', 'helpersMs', 'fullCollections', 'fullPauseMs'] as const)
      out[k] += w[k];
    for (const [k, ms] of Object.entries(w.phases)) out.phases[k] = (out.phases[k] ?? 0) + ms;
    out.heapAfterMb = w.heapAfterMb;
  }
  return out;
}

/** One line per window: per 10 000 calls, per call and per scavenge. */
export function describeGc(w: GcWindow, calls: number): string {
  const per = (x: number) => (w.scavenges > 0 ? x / w.scavenges : 0);
  return (
    `scavenges ${((w.scavenges / calls) * 1e4).toFixed(1)} per 10k calls, allocated ~${(w.allocated / calls).toFixed(0)} B/call, ` +
    `per scavenge promoted ${(per(w.promoted) / 1024).toFixed(0)} KB, copied ${(per(w.survived) / 1024).toFixed(0)} KB, ` +
    `pause ${per(w.pauseMs).toFixed(1)} ms (${((w.pauseMs / calls) * 1000).toFixed(1)} µs/call, helpers ${((w.helpersMs / calls) * 1000).toFixed(1)} µs/call); ` +
    `full ${w.fullCollections} (${w.fullPauseMs.toFixed(0)} ms); heap after ${w.heapAfterMb.toFixed(1)} MB`
  );
}

/** The scavenges' phases that took time, ms per scavenge. */
export function describePhases(w: GcWindow): string {
  return Object.entries(w.phases)
    .map(([k, ms]) => [k, ms / Math.max(1, w.scavenges)] as const)
    .filter(([, ms]) => ms >= 0.05)
    .sort((a, b) => b[1] - a[1])
    .map(([k, ms]) => `${k} ${ms.toFixed(2)}`)
    .join(', ');
}
