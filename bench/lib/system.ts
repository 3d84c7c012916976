/** The machine and the kernel limits a fleet runs into; read, never changed. */
import { readFileSync } from 'node:fs';
import { cpus, totalmem } from 'node:os';

export interface Machine {
  cpus: number;
  model: string;
  memGiB: number;
  node: string;
}

export function machine(): Machine {
  const c = cpus();
  return { cpus: c.length, model: c[0]?.model.trim() ?? 'unknown', memGiB: Math.round((totalmem() / 2 ** 30) * 10) / 10, node: process.version };
}

function read(path: string): string | undefined {
  try {
    return readFileSync(path, 'utf8').trim();
  } catch {
    return undefined;
  }
}

export interface Limits {
  nofileSoft: number;
  nofileHard: number;
  /** Ephemeral ports per (source address, destination) pair. */
  ephemeralPorts: number;
  portRange: string;
  fileMax: number;
  somaxconn: number;
  synBacklog: number;
  tcpTwReuse: number;
  /** CAP_SYS_RESOURCE: without it even root cannot raise the hard open-file limit. */
  canRaiseNofile: boolean;
}

export function limits(): Limits {
  const lim = read('/proc/self/limits') ?? '';
  const m = /Max open files\s+(\d+|unlimited)\s+(\d+|unlimited)/.exec(lim);
  const num = (s: string | undefined) => (s === undefined || s === 'unlimited' ? Number.MAX_SAFE_INTEGER : Number(s));
  const range = (read('/proc/sys/net/ipv4/ip_local_port_range') ?? '32768 60999').split(/\s+/).map(Number);
  const capEff = /CapEff:\s+([0-9a-f]+)/.exec(read('/proc/self/status') ?? '')?.[1] ?? '0';
  return {
    nofileSoft: num(m?.[1]),
    nofileHard: num(m?.[2]),
    ephemeralPorts: (range[1] ?? 60999) - (range[0] ?? 32768) + 1,
    portRange: range.join('-'),
    fileMax: Number(read('/proc/sys/fs/file-max') ?? 0),
    somaxconn: Number(read('/proc/sys/net/core/somaxconn') ?? 0),
    synBacklog: Number(read('/proc/sys/net/ipv4/tcp_max_syn_backlog') ?? 0),
    tcpTwReuse: Number(read('/proc/sys/net/ipv4/tcp_tw_reuse') ?? 0),
    canRaiseNofile: (BigInt('0x' + capEff) & (1n << 24n)) !== 0n,
  };
}
