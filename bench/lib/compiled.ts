/**
 * The gateway as deployments run it: compiled (gateway/dist, `npm run build`), when that build is at least as
 * new as every source file. Compared with processes that run plain JavaScript, a gateway run from its
 * TypeScript sources through tsx would pay the loader's memory (about 100 MiB) the others do not.
 */
import { fork } from 'node:child_process';
import { once } from 'node:events';
import { existsSync, readFileSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { MEMORY_PROBE_IMPORT } from '../procs/ipc.js';
import { freePort, Proc, ROOT, spawnTs, type SpawnOptions } from './procs.js';

const ENTRY = 'gateway/dist/main.js';

/**
 * package.json's `start` script, `[NAME=value ...] exec node [options] gateway/dist/main.js`: the one place the gateway's
 * environment settings for the C library (e.g. malloc's trim threshold) and node options are set; the Dockerfile
 * (`ENV`, `CMD`) and the systemd example (`Environment=`, `ExecStart=`) repeat it, and their tests check that.
 */
function startScript(): { env: Record<string, string>; nodeArgs: string[] } {
  const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { scripts: Record<string, string> };
  const m = /^((?:[A-Z_][A-Z0-9_]*=\S*\s+)*)exec\s+(.*)$/.exec(pkg.scripts['start']!.trim());
  const words = m?.[2]!.split(/\s+/) ?? [];
  if (!m || words[0] !== 'node' || words.at(-1) !== ENTRY) throw new Error(`package.json start is not "[NAME=value ...] exec node [options] ${ENTRY}"`);
  const env = Object.fromEntries(
    m[1]!
      .split(/\s+/)
      .filter(Boolean)
      .map((kv) => [kv.slice(0, kv.indexOf('=')), kv.slice(kv.indexOf('=') + 1)] as const),
  );
  return { env, nodeArgs: words.slice(1, -1) };
}

/**
 * The node options the gateway runs with: those of package.json's `start` script, so the bench measures what users
 * run. `VOXGATE_GATEWAY_NODE_ARGS` (space-separated, empty for none) replaces them, for A/B runs of a setting
 * (docs/performance.md, "gcset").
 */
export function gatewayNodeArgs(): string[] {
  const override = process.env['VOXGATE_GATEWAY_NODE_ARGS'];
  if (override !== undefined) return override.split(/\s+/).filter(Boolean);
  return startScript().nodeArgs;
}

/**
 * The environment variables package.json's `start` sets for the gateway (docs/performance.md, "mcprss": malloc's
 * trim threshold). `VOXGATE_GATEWAY_START_ENV` (`NAME=value ...`, empty for none) replaces them, for A/B runs.
 */
export function gatewayStartEnv(): Record<string, string> {
  const override = process.env['VOXGATE_GATEWAY_START_ENV'];
  if (override === undefined) return startScript().env;
  return Object.fromEntries(
    override
      .split(/\s+/)
      .filter(Boolean)
      .map((kv) => [kv.slice(0, kv.indexOf('=')), kv.slice(kv.indexOf('=') + 1)] as const),
  );
}

function newestMtime(dir: string): number {
  let newest = 0;
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, e.name);
    newest = Math.max(newest, e.isDirectory() ? newestMtime(p) : statSync(p).mtimeMs);
  }
  return newest;
}

/** Why the compiled gateway cannot be used (missing or older than a source), or undefined when it can. */
export function compiledGatewayStale(): string | undefined {
  const entry = join(ROOT, ENTRY);
  if (!existsSync(entry)) return `${ENTRY} is not built (npm run build)`;
  // tsc -b rewrites only the outputs of changed sources: each package's newest output must be as new as its newest source.
  for (const pkg of ['gateway', 'protocol'])
    if (newestMtime(join(ROOT, pkg, 'src')) > newestMtime(join(ROOT, pkg, 'dist'))) return `${pkg}/dist is older than its sources (npm run build)`;
  return undefined;
}

/**
 * The compiled gateway when it is fresh, else the sources through tsx; says which. Either way with the node options
 * it ships with (`gatewayNodeArgs`), the bench's memory probe (`{cmd:'mem'}` after GC) and `o.nodeArgs` (e.g.
 * --cpu-prof) before it.
 */
export function spawnGateway(name: string, o: SpawnOptions): { proc: Proc; how: string } {
  const stale = compiledGatewayStale();
  const nodeArgs = [...gatewayNodeArgs(), ...(o.nodeArgs ?? [])];
  const startEnv = gatewayStartEnv();
  const settings = [...Object.entries(startEnv).map(([k, v]) => `${k}=${v}`), ...nodeArgs];
  const shown = settings.length > 0 ? ` with ${settings.join(' ')}` : '';
  const env = { ...startEnv, ...o.env };
  if (stale !== undefined)
    return { proc: spawnTs(name, 'bench/procs/gateway.ts', { ...o, env, nodeArgs }), how: `from sources through tsx (${stale})${shown}` };
  const child = fork(join(ROOT, ENTRY), [], {
    cwd: ROOT,
    execArgv: ['--expose-gc', ...nodeArgs, '--import', MEMORY_PROBE_IMPORT],
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
    serialization: 'json',
  });
  return { proc: new Proc(name, child), how: `compiled (${ENTRY})${shown}` };
}

/**
 * The compiled gateway with a probe of the tool's own (a `data:` module, e.g. one answering `{cmd:'heap'}` over IPC)
 * and `--expose-gc`: for the tools that read the gateway's heap or memory maps rather than the bench's rows.
 */
export function forkCompiledWithProbe(name: string, env: Record<string, string>, probeJs: string): Proc {
  const child = fork(join(ROOT, ENTRY), [], {
    cwd: ROOT,
    execArgv: ['--expose-gc', ...gatewayNodeArgs(), '--import', `data:text/javascript,${encodeURIComponent(probeJs)}`],
    env: { ...process.env, ...gatewayStartEnv(), ...env },
    stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
    serialization: 'json',
  });
  return new Proc(name, child);
}

/** Where a started gateway listens. */
export interface GatewayPorts {
  httpPort: number;
  mqttPort: number;
}

export interface StartedGateway extends GatewayPorts {
  proc: Proc;
  how: string;
  /** `http://127.0.0.1:<httpPort>` */
  url: string;
  /** Starts made (more than one when a picked port was taken before the gateway bound it). */
  attempts: number;
}

/** Starts made before giving up on ports taken under the gateway (each start picks new ones). */
const START_ATTEMPTS = 5;

/** Two TCP ports free now on 127.0.0.1 (the OS picks them; released before the gateway binds them). */
const pickPorts = async (): Promise<GatewayPorts> => ({ httpPort: await freePort(), mqttPort: await freePort() });

/**
 * `spawnGateway` on ports picked for it, resolved once its /readyz answers 200. A picked port is free when picked and
 * bound by the gateway a moment later (seconds, on a machine running two test suites): any process's outgoing
 * connection may take it in between, and that gateway exits with EADDRINUSE. Such a start is made again on new ports
 * (up to START_ATTEMPTS in all). Any other exit before ready fails at once with the gateway's last output lines,
 * instead of waiting out `readyMs` for a process that is gone.
 */
export async function startGateway(
  name: string,
  o: Omit<SpawnOptions, 'env'> & { env: (ports: GatewayPorts) => Record<string, string> | Promise<Record<string, string>>; readyMs: number },
  ports: () => Promise<GatewayPorts> = pickPorts,
): Promise<StartedGateway> {
  for (let attempt = 1; ; attempt++) {
    const picked = await ports();
    const { proc, how } = spawnGateway(name, { ...o, env: await o.env(picked) });
    const url = `http://127.0.0.1:${picked.httpPort}`;
    // 'close' comes after 'exit', once the output pipes are drained: the lines read below are all there is.
    const closed = once(proc.child, 'close');
    let exit: { code: number | null } | undefined;
    // `once` rejects on the child's 'error' (it could not be spawned, or signalled): that ends this wait too, as a failed start.
    void closed.then(
      () => (exit = { code: proc.child.exitCode }),
      () => (exit = { code: proc.child.exitCode }),
    );
    for (const end = Date.now() + o.readyMs; exit === undefined; await sleep(100)) {
      // Each probe bounded: whoever holds a taken port may accept and never answer; the loop then checks the exit.
      const probe = await fetch(`${url}/readyz`, { signal: AbortSignal.timeout(2000) }).catch(() => undefined);
      if (probe?.status === 200) return { ...picked, proc, how, url, attempts: attempt };
      if (Date.now() > end) {
        await proc.stop();
        throw new Error(`timed out after ${o.readyMs} ms waiting for ${name} to be ready (${url})`);
      }
    }
    const output = [...proc.stdout.slice(-5), ...proc.stderr.slice(-5)].join(' | ');
    if (!output.includes('EADDRINUSE') || attempt >= START_ATTEMPTS)
      throw new Error(`${name} exited (${String(exit.code)}) before it was ready, start ${attempt} of at most ${START_ATTEMPTS}: ${output}`);
  }
}
