import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';

/** The gateway as a real process: the compiled entry (built by test/support/build.ts) or `npm start`. */
export const ROOT = fileURLToPath(new URL('../../', import.meta.url));
export const GATEWAY_MAIN = join(ROOT, 'gateway/dist/main.js');
export const WEATHER_MAIN = join(ROOT, 'mcp_servers/weather/dist/main.js');

export type LogLine = Record<string, unknown> & { msg?: string };

export interface GatewayProcess {
  readonly child: ChildProcess;
  readonly pid: number;
  /** Every stdout line parsed as a pino JSON line (other lines are skipped). */
  readonly logs: LogLine[];
  readonly stderr: () => string;
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  /** The first log line (past or future) with this `msg`; rejects if the process exits before it. */
  logLine(msg: string): Promise<LogLine>;
  /** Resolves once stderr contains `text` (stdout and stderr are separate pipes: no order between them). */
  stderrIncludes(text: string): Promise<void>;
}

/**
 * GATEWAY_* for a process on 127.0.0.1 with OS-chosen ports, its own data dir and an empty config file
 * there (a developer's gateway.config.json never leaks in). The config file must exist: see emptyConfig.
 */
export function isolatedEnv(dataDir: string, extra: Record<string, string> = {}): Record<string, string> {
  return {
    GATEWAY_DATA_DIR: dataDir,
    GATEWAY_CONFIG: join(dataDir, 'gateway.config.json'),
    GATEWAY_HTTP_HOST: '127.0.0.1',
    GATEWAY_HTTP_PORT: '0',
    GATEWAY_MQTT_HOST: '127.0.0.1',
    GATEWAY_MQTT_PORT: '0',
    ...extra,
  };
}

export function spawnGateway(command: string, args: string[], env: Record<string, string>, cwd = ROOT): GatewayProcess {
  const child = spawn(command, args, { cwd, env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  if (child.pid === undefined) throw new Error(`could not start ${command}`);
  const logs: LogLine[] = [];
  const stderr: string[] = [];
  let waiters: Array<{ msg: string; resolve: (l: LogLine) => void }> = [];
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.on('exit', (code, signal) => resolve({ code, signal })),
  );
  createInterface({ input: child.stdout! }).on('line', (text) => {
    let line: LogLine;
    try {
      line = JSON.parse(text) as LogLine;
    } catch {
      return; // npm's own banner lines
    }
    logs.push(line);
    waiters = waiters.filter((w) => (w.msg === line.msg ? (w.resolve(line), false) : true));
  });
  let stderrWaiters: Array<{ text: string; resolve: () => void }> = [];
  child.stderr!.on('data', (b: Buffer) => {
    stderr.push(b.toString());
    const all = stderr.join('');
    stderrWaiters = stderrWaiters.filter((w) => (all.includes(w.text) ? (w.resolve(), false) : true));
  });
  const stderrIncludes = (text: string) =>
    stderr.join('').includes(text)
      ? Promise.resolve()
      : new Promise<void>((resolve, reject) => {
          stderrWaiters.push({ text, resolve });
          void exited.then(({ code, signal }) => reject(new Error(`the gateway exited (${code ?? signal}) before printing the expected text on stderr`)));
        });
  const logLine = (msg: string) => {
    const hit = logs.find((l) => l.msg === msg);
    if (hit) return Promise.resolve(hit);
    return new Promise<LogLine>((resolve, reject) => {
      waiters.push({ msg, resolve });
      void exited.then(({ code, signal }) =>
        reject(new Error(`the gateway exited (${code ?? signal}) before logging "${msg}"; stderr: ${stderr.join('').slice(-2000)}`)),
      );
    });
  };
  return { child, pid: child.pid, logs, stderr: () => stderr.join(''), exited, logLine, stderrIncludes };
}

/** `node gateway/dist/main.js`, the production start (package.json's `start` passes no node options). */
export const startCompiledGateway = (env: Record<string, string>) => spawnGateway(process.execPath, [GATEWAY_MAIN], env);

/**
 * A compiled gateway process that joins the cluster on `natsUrl` as `instanceId`, with a data dir of its own;
 * `dispose` kills it if it still runs and removes the dir (for a test's `finally`).
 */
export function startClusterMember(natsUrl: string, instanceId: string, heartbeatMs: number, apiKey: string): GatewayProcess & { dispose(): void } {
  const dataDir = mkdtempSync(join(tmpdir(), 'voxgate-cluster-'));
  writeFileSync(join(dataDir, 'gateway.config.json'), '{}');
  const proc = startCompiledGateway(
    isolatedEnv(dataDir, {
      GATEWAY_API_KEYS: apiKey,
      GATEWAY_CLUSTER_ENABLED: 'true',
      GATEWAY_CLUSTER_INSTANCE_ID: instanceId,
      GATEWAY_CLUSTER_NATS_SERVERS: natsUrl,
      GATEWAY_CLUSTER_HEARTBEAT_MS: String(heartbeatMs),
    }),
  );
  return Object.assign(proc, {
    dispose: () => {
      if (proc.child.exitCode === null && proc.child.signalCode === null) proc.child.kill('SIGKILL');
      rmSync(dataDir, { recursive: true, force: true });
    },
  });
}

/** Every descendant of `pid` alive now (Linux /proc), children before grandchildren. */
export function descendants(pid: number): number[] {
  const parentOf = new Map<number, number>();
  for (const e of readdirSync('/proc')) {
    if (!/^\d+$/.test(e)) continue;
    const stat = procStat(Number(e));
    if (stat) parentOf.set(Number(e), stat.ppid);
  }
  const out: number[] = [];
  for (let frontier = [pid]; frontier.length;) {
    frontier = [...parentOf].filter(([, ppid]) => frontier.includes(ppid)).map(([child]) => child);
    out.push(...frontier);
  }
  return out;
}

/** State and parent of a process from /proc/<pid>/stat; undefined once it is gone. */
export function procStat(pid: number): { state: string; ppid: number } | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const rest = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return { state: rest[0]!, ppid: Number(rest[1]) };
  } catch {
    return undefined;
  }
}

export function commandLine(pid: number): string[] {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').filter(Boolean);
  } catch {
    return [];
  }
}

/** True when nothing listens on host:port any more (we can bind it ourselves). */
export function portIsFree(port: number, host = '127.0.0.1'): Promise<boolean> {
  return new Promise((resolve) => {
    const s = createServer();
    s.once('error', () => resolve(false));
    s.listen({ port, host, exclusive: true }, () => s.close(() => resolve(true)));
  });
}
