/**
 * Process CPU time and the machine's load, read from /proc: on a shared machine wall-clock throughput moves with
 * the neighbours' load, CPU time per unit of work much less, so every row reports both.
 */
import { execFileSync } from 'node:child_process';
import { readFileSync, readdirSync } from 'node:fs';
import { loadavg } from 'node:os';

let ticksPerSecond = 100;
try {
  ticksPerSecond = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;
} catch {
  /* Linux's usual USER_HZ */
}

/** utime + stime of a process in µs (fields 14 and 15 of /proc/<pid>/stat); NaN when it cannot be read. */
export function cpuUs(pid: number | undefined): number {
  if (pid === undefined) return NaN;
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // The command name (field 2) may hold spaces: count fields after its closing parenthesis.
    const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return ((Number(f[11]) + Number(f[12])) / ticksPerSecond) * 1e6;
  } catch {
    return NaN;
  }
}

/** Minor page faults of a process, every thread (/proc/<pid>/stat field 10): memory touched for the first time, or again after it was given back. */
export function minorFaults(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[7]);
}

/** CPU spent by some processes while `work` runs, and the 1-minute load average at its start and end. */
export async function measured<T>(
  pids: ReadonlyArray<number | undefined>,
  work: () => Promise<T>,
): Promise<{ result: T; cpu: number[]; load: [number, number] }> {
  const load0 = loadavg()[0]!;
  const c0 = pids.map(cpuUs);
  const result = await work();
  const cpu = pids.map((p, i) => cpuUs(p) - c0[i]!);
  return { result, cpu, load: [Math.round(load0 * 100) / 100, Math.round(loadavg()[0]! * 100) / 100] };
}

/** CPU of one process by thread, in µs: its main thread (user, system) and the sum of its other threads (V8's GC
 * helpers and compilers, libuv's pool; a thread that ended between two readings drops out of the difference); NaN when it
 * cannot be read. */
export interface ThreadCpu {
  mainUser: number;
  mainSys: number;
  other: number;
}

export function threadCpuUs(pid: number | undefined): ThreadCpu {
  const out = { mainUser: NaN, mainSys: NaN, other: 0 };
  if (pid === undefined) return out;
  try {
    for (const tid of readdirSync(`/proc/${pid}/task`)) {
      try {
        const stat = readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8');
        const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
        const [user, sys] = [(Number(f[11]) / ticksPerSecond) * 1e6, (Number(f[12]) / ticksPerSecond) * 1e6];
        if (tid === String(pid)) [out.mainUser, out.mainSys] = [user, sys];
        else out.other += user + sys;
      } catch {
        /* the thread ended */
      }
    }
  } catch {
    /* the process ended */
  }
  return out;
}
