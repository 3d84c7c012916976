/**
 * What the compiled gateway holds at idle (issue 21: "load what idle does not need lazily"):
 *   npm run build && nice -n 10 npx tsx bench/tools/idle-mem.ts [runs=3] [--mcp] [--modules] [--snapshot]
 * Starts gateway/dist/main.js as `npm start` runs it (embedded defaults, a fresh data dir; with --mcp the /mcp
 * bench's config: server-everything hosted over stdio, one /mcp session opened, called and closed first),
 * waits until it is ready and quiet, and prints per run the gateway process's RSS (VmRSS; hosted servers are
 * their own processes) and `process.memoryUsage()` before and after forced GCs. --modules lists every module
 * loaded by then (ES modules through a loader hook, CommonJS from the require cache), grouped by package,
 * with their source bytes; --smaps prints the resident memory by mapping before and after the GC; --spaces prints V8's heap spaces after GC; --node=<flag> passes a node/V8 flag to the
 * gateway (e.g. --node=--enable-source-maps, which `npm start` does not pass); --snapshot writes a heap snapshot (bench/results/prof/idle.heapsnapshot) and prints
 * its self sizes by constructor. The hook and the snapshot cost memory: read RSS from runs without them.
 */
import { fork } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { gatewayNodeArgs, gatewayStartEnv } from '../lib/compiled.js';
import { McpLoadSession } from '../lib/mcp-load.js';
import { gatewayEnv, ipcAsk } from '../lib/gateway-env.js';
import { ROOT } from '../lib/procs.js';
import { until } from '../scenarios/measure.js';

const args = process.argv.slice(2);
const runs = Number(args.find((a) => /^\d+$/.test(a)) ?? 3);
const withMcp = args.includes('--mcp');
const listModules = args.includes('--modules');
const snapshot = args.includes('--snapshot');
const spaces = args.includes('--spaces');
/** --smaps: the gateway's resident memory by mapping (/proc/<pid>/smaps: the node binary, malloc, anonymous), before and after the GC. */
const smaps = args.includes('--smaps');
/** --node=<flag> (repeatable): node/V8 flags for the gateway after those it ships with (bench/lib/compiled.ts), e.g. --node=--enable-source-maps. */
/** --quiet=<s>: how long the gateway stays idle before the reading (default 3). */
const quietMs = 1000 * Number(args.find((a) => a.startsWith('--quiet='))?.slice('--quiet='.length) ?? 3);
const nodeArgs = args.filter((a) => a.startsWith('--node=')).map((a) => a.slice('--node='.length));
const API_KEY = 'idle-mem-key-0123456789abcdef';

/** Loaded into the gateway with --import: memory on request, and (with --modules) every ES module's URL. */
const PROBE = `import { register, createRequire } from 'node:module';
import { MessageChannel } from 'node:worker_threads';
import { writeHeapSnapshot, getHeapSpaceStatistics } from 'node:v8';
const urls = new Set();
if (process.env.IDLE_MEM_MODULES) {
  const { port1, port2 } = new MessageChannel();
  port1.on('message', (u) => urls.add(u));
  port1.unref();
  const hooks = 'export async function load(url, c, next) { globalThis.port?.postMessage(url); return next(url, c); }'
    + 'export function initialize(d) { globalThis.port = d.port; }';
  register('data:text/javascript,' + encodeURIComponent(hooks), { data: { port: port2 }, transferList: [port2] });
}
const mem = () => process.memoryUsage();
process.on('message', (m) => {
  if (m.cmd === 'mem') {
    const before = mem();
    globalThis.gc(); globalThis.gc();
    return process.send({ id: m.id, before, after: mem(), spaces: getHeapSpaceStatistics() });
  }
  if (m.cmd === 'modules') {
    const cjs = Object.keys(createRequire(process.cwd() + '/probe.js').cache);
    return process.send({ id: m.id, esm: [...urls], cjs });
  }
  if (m.cmd === 'snapshot') {
    globalThis.gc(); globalThis.gc();
    writeHeapSnapshot(m.file);
    return process.send({ id: m.id });
  }
});
process.on('disconnect', () => process.kill(process.pid, 'SIGTERM'));`;

const EVERYTHING = join(ROOT, 'node_modules/@modelcontextprotocol/server-everything/dist/index.js');

/** Resident KiB by what is mapped: a file's path, `[heap]` (the main thread's malloc), `[anon]` (V8's pages, thread arenas, stacks). */
function smapsByMapping(pid: number): Map<string, number> {
  const by = new Map<string, number>();
  let name = '[anon]';
  for (const line of readFileSync(`/proc/${pid}/smaps`, 'utf8').split('\n')) {
    const head = /^[0-9a-f]+-[0-9a-f]+ \S+ \S+ \S+ \d+\s*(.*)$/.exec(line);
    if (head) name = head[1] || '[anon]';
    const rss = /^Rss:\s+(\d+) kB/.exec(line);
    if (rss) by.set(name, (by.get(name) ?? 0) + Number(rss[1]));
  }
  return by;
}

function printSmaps(label: string, by: Map<string, number>): void {
  const rows = [...by].filter(([, kb]) => kb >= 512).sort((a, b) => b[1] - a[1]);
  const short = (n: string) => (n.startsWith('/') ? n.slice(n.lastIndexOf('/', n.lastIndexOf('/') - 1) + 1) : n);
  process.stdout.write(`  resident by mapping, ${label} (MiB): ${rows.map(([n, kb]) => `${short(n)} ${MiB(kb * 1024)}`).join(', ')}\n`);
}

function vmRss(pid: number): number {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m ? Number(m[1]) * 1024 : NaN;
}

interface HeapSpaceInfo {
  space_name: string;
  space_size: number;
  space_used_size: number;
}

const MiB = (n: number) => Math.round((n / 2 ** 20) * 10) / 10;

async function oneRun(i: number): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'voxgate-idle-'));
  const { env, httpPort: port } = await gatewayEnv({ dataDir: dir, apiKey: API_KEY });
  if (withMcp) {
    writeFileSync(join(dir, 'config.json'), JSON.stringify({ mcp: { servers: { everything: { command: process.execPath, args: [EVERYTHING] } } } }));
    env.GATEWAY_CONFIG = join(dir, 'config.json');
  }
  if (listModules) env.IDLE_MEM_MODULES = '1';
  // IDLE_MEM_ROOT: another checkout's build (a before/after comparison in the same conditions).
  const root = process.env.IDLE_MEM_ROOT ?? ROOT;
  const child = fork(join(root, 'gateway/dist/main.js'), [], {
    cwd: ROOT,
    execArgv: ['--expose-gc', ...gatewayNodeArgs(), ...nodeArgs, '--import', `data:text/javascript,${encodeURIComponent(PROBE)}`],
    env: { ...process.env, ...gatewayStartEnv(), ...env },
    stdio: ['ignore', 'ignore', 'inherit', 'ipc'],
  });
  const ask = ipcAsk(child);
  try {
    const t0 = Date.now();
    await until('ready', async () => (await fetch(`http://127.0.0.1:${port}/readyz`)).status === 200, 60_000, 200);
    const readyMs = Date.now() - t0;
    if (withMcp) {
      const url = new URL(`http://127.0.0.1:${port}/mcp`);
      await until(
        'server-everything',
        async () => {
          const s = new McpLoadSession(url, { authorization: `Bearer ${API_KEY}` });
          try {
            await s.open();
            await s.call('mcp__everything__echo', { message: 'idle' });
            return true;
          } finally {
            await s.close().catch(() => undefined);
          }
        },
        60_000,
        200,
      );
    }
    // Quiet: what start allocated settles (timers, lazy compiles) before the reading.
    await new Promise((r) => setTimeout(r, quietMs));
    const rss = vmRss(child.pid!);
    const mapsBefore = smaps ? smapsByMapping(child.pid!) : undefined;
    const mem = await ask<{ before: NodeJS.MemoryUsage; after: NodeJS.MemoryUsage; spaces: HeapSpaceInfo[] }>({ cmd: 'mem' });
    const rssGc = vmRss(child.pid!);
    const m = mem.after;
    process.stdout.write(
      `run ${i}: ready in ${readyMs} ms; RSS ${MiB(rss)} MiB (after GC ${MiB(rssGc)}); heapUsed ${MiB(mem.before.heapUsed)} → ${MiB(m.heapUsed)}, ` +
        `heapTotal ${MiB(m.heapTotal)}, external ${MiB(m.external)}, arrayBuffers ${MiB(m.arrayBuffers)} MiB\n`,
    );
    if (spaces) {
      const row = (x: HeapSpaceInfo) => `${x.space_name} ${MiB(x.space_used_size)}/${MiB(x.space_size)}`;
      process.stdout.write(`  heap spaces after GC, used/committed MiB: ${mem.spaces.map(row).join(', ')}\n`);
    }
    if (mapsBefore) {
      printSmaps('before GC', mapsBefore);
      printSmaps('after GC', smapsByMapping(child.pid!));
    }
    if (listModules) printModules(await ask<{ esm: string[]; cjs: string[] }>({ cmd: 'modules' }));
    if (snapshot) {
      const file = join(ROOT, 'bench/results/prof/idle.heapsnapshot');
      await ask({ cmd: 'snapshot', file });
      printSnapshot(file);
    }
  } finally {
    child.kill('SIGTERM');
    await new Promise((r) => child.once('exit', r));
    rmSync(dir, { recursive: true, force: true });
  }
}

function packageOf(path: string): string {
  const nm = path.lastIndexOf('node_modules/');
  if (nm < 0) return path.startsWith(join(ROOT, 'gateway/dist')) ? 'gateway/dist' : path.startsWith(join(ROOT, 'protocol')) ? 'protocol' : path;
  const rest = path.slice(nm + 'node_modules/'.length).split('/');
  return rest[0]!.startsWith('@') ? `${rest[0]}/${rest[1]}` : rest[0]!;
}

function printModules(m: { esm: string[]; cjs: string[] }): void {
  const byPkg = new Map<string, { files: number; bytes: number }>();
  const files = new Set([...m.esm.filter((u) => u.startsWith('file:')).map((u) => fileURLToPath(u)), ...m.cjs]);
  for (const f of files) {
    const p = packageOf(f);
    const e = byPkg.get(p) ?? { files: 0, bytes: 0 };
    e.files++;
    try {
      e.bytes += statSync(f).size;
    } catch {
      /* gone */
    }
    byPkg.set(p, e);
  }
  const rows = [...byPkg].sort((a, b) => b[1].bytes - a[1].bytes);
  process.stdout.write(`modules loaded at idle: ${files.size} files, ${MiB(rows.reduce((s, r) => s + r[1].bytes, 0))} MiB of source\n`);
  for (const [p, e] of rows) process.stdout.write(`  ${String(Math.round(e.bytes / 1024)).padStart(6)} KiB ${String(e.files).padStart(4)} files  ${p}\n`);
  const builtins = m.esm.filter((u) => u.startsWith('node:')).sort();
  process.stdout.write(`  node builtins imported as ES modules: ${builtins.join(' ')}\n`);
}

interface Snap {
  snapshot: { meta: { node_fields: string[]; node_types: [string[], ...unknown[]] } };
  nodes: number[];
  strings: string[];
}

function printSnapshot(file: string): void {
  const s = JSON.parse(readFileSync(file, 'utf8')) as Snap;
  const f = s.snapshot.meta.node_fields;
  const types = s.snapshot.meta.node_types[0];
  const [iType, iName, iSize, n] = [f.indexOf('type'), f.indexOf('name'), f.indexOf('self_size'), f.length];
  const tally = new Map<string, number>();
  for (let i = 0; i < s.nodes.length; i += n) {
    const type = types[s.nodes[i + iType]!]!;
    const name = type === 'object' || type === 'native' ? s.strings[s.nodes[i + iName]!]! : `(${type})`;
    tally.set(name, (tally.get(name) ?? 0) + s.nodes[i + iSize]!);
  }
  const total = [...tally.values()].reduce((a, b) => a + b, 0);
  process.stdout.write(`heap snapshot: ${MiB(total)} MiB self size; largest by constructor or node type:\n`);
  for (const [k, v] of [...tally].sort((a, b) => b[1] - a[1]).slice(0, 30)) process.stdout.write(`  ${String(MiB(v)).padStart(7)} MiB  ${k.slice(0, 100)}\n`);
}

for (let i = 1; i <= runs; i++) await oneRun(i);
