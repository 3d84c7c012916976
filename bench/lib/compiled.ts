/**
 * The gateway as deployments run it: compiled (gateway/dist, `npm run build`), when that build is at least as
 * new as every source file. Compared with processes that run plain JavaScript, a gateway run from its
 * TypeScript sources through tsx would pay the loader's memory (about 100 MiB) the others do not.
 */
import { fork } from 'node:child_process';
import { existsSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { MEMORY_PROBE_IMPORT } from '../procs/ipc.js';
import { Proc, ROOT, spawnTs, type SpawnOptions } from './procs.js';

const ENTRY = 'gateway/dist/main.js';

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
 * The compiled gateway when it is fresh, else the sources through tsx; says which. Either way with the bench's
 * memory probe (`{cmd:'mem'}` after GC) and `o.nodeArgs` (e.g. --cpu-prof) before it.
 */
export function spawnGateway(name: string, o: SpawnOptions): { proc: Proc; how: string } {
  const stale = compiledGatewayStale();
  if (stale !== undefined) return { proc: spawnTs(name, 'bench/procs/gateway.ts', o), how: `from sources through tsx (${stale})` };
  const child = fork(join(ROOT, ENTRY), [], {
    cwd: ROOT,
    execArgv: ['--expose-gc', ...(o.nodeArgs ?? []), '--import', MEMORY_PROBE_IMPORT],
    env: { ...process.env, ...o.env },
    stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
    serialization: 'json',
  });
  return { proc: new Proc(name, child), how: `compiled (${ENTRY})` };
}

/**
 * The compiled gateway with a probe of the tool's own (a `data:` module, e.g. one answering `{cmd:'heap'}` over IPC)
 * and `--expose-gc`: for the tools that read the gateway's heap or memory maps rather than the bench's rows.
 */
export function forkCompiledWithProbe(name: string, env: Record<string, string>, probeJs: string): Proc {
  const child = fork(join(ROOT, ENTRY), [], {
    cwd: ROOT,
    execArgv: ['--expose-gc', '--import', `data:text/javascript,${encodeURIComponent(probeJs)}`],
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
    serialization: 'json',
  });
  return new Proc(name, child);
}
