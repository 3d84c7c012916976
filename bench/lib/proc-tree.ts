/**
 * A process and everything it started, read from /proc: a proxy that fronts a stdio server is the proxy
 * plus its child (or one child per session), so CPU and memory are counted over the whole tree.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { cpuUs } from './cpu.js';

/** The pid and every live descendant of it (Linux; just the pid elsewhere). */
export function treePids(root: number): number[] {
  const children = new Map<number, number[]>();
  let entries: string[] = [];
  try {
    entries = readdirSync('/proc');
  } catch {
    return [root];
  }
  for (const e of entries) {
    if (!/^\d+$/.test(e)) continue;
    try {
      const stat = readFileSync(`/proc/${e}/stat`, 'utf8');
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      const list = children.get(ppid) ?? [];
      list.push(Number(e));
      children.set(ppid, list);
    } catch {
      /* exited meanwhile */
    }
  }
  const out: number[] = [];
  const todo = [root];
  while (todo.length > 0) {
    const p = todo.pop()!;
    out.push(p);
    todo.push(...(children.get(p) ?? []));
  }
  return out;
}

/** Resident bytes of one process (VmRSS), 0 when it is gone. */
export function rssBytes(pid: number): number {
  try {
    const m = /^VmRSS:\s+(\d+) kB$/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Number(m[1]) * 1024 : 0;
  } catch {
    return 0;
  }
}

/** Resident bytes of the root alone and of its whole tree. */
export function treeRss(root: number): { root: number; tree: number } {
  return { root: rssBytes(root), tree: treePids(root).reduce((n, p) => n + rssBytes(p), 0) };
}

/** CPU µs of the given processes together (those that exited count 0: sample the tree while it runs). */
export function cpuOf(pids: readonly number[]): number {
  return pids.reduce((n, p) => {
    const us = cpuUs(p);
    return n + (Number.isFinite(us) ? us : 0);
  }, 0);
}

/**
 * Peak resident bytes (the first pid alone, and all of them) sampled every `everyMs` until stopped. The pids
 * are asked for at each sample and read directly: scanning all of /proc each time (treePids) took ~14 ms
 * on a loaded machine, time the load generator in this same process would lose.
 */
export function rssSampler(pids: () => readonly number[], everyMs = 250): { stop(): { root: number; tree: number } } {
  const peak = { root: 0, tree: 0 };
  const sample = () => {
    const list = pids();
    const each = list.map(rssBytes);
    peak.root = Math.max(peak.root, each[0] ?? 0);
    peak.tree = Math.max(
      peak.tree,
      each.reduce((n, x) => n + x, 0),
    );
  };
  const timer = setInterval(sample, everyMs);
  return {
    stop() {
      clearInterval(timer);
      sample();
      return { ...peak };
    },
  };
}
