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

/** Peak resident bytes (root alone and tree) sampled every `everyMs` until stopped. */
export function rssSampler(root: number, everyMs = 100): { stop(): { root: number; tree: number } } {
  const peak = treeRss(root);
  const timer = setInterval(() => {
    const now = treeRss(root);
    peak.root = Math.max(peak.root, now.root);
    peak.tree = Math.max(peak.tree, now.tree);
  }, everyMs);
  return {
    stop() {
      clearInterval(timer);
      const now = treeRss(root);
      return { root: Math.max(peak.root, now.root), tree: Math.max(peak.tree, now.tree) };
    },
  };
}
