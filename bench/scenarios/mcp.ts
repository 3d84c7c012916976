import type { ChildProcess } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { loadavg } from 'node:os';
import { dirname, join } from 'node:path';
import { McpLoadSession, runMcpLoad, summarize, type LoadSession, type McpLoadResult } from '../lib/mcp-load.js';
import { installPeers, PEER_VERSIONS, servePeer, stopPeer, type PeerName } from '../lib/mcp-peers.js';
import { cpuOf, rssSampler, treePids, treeRss } from '../lib/proc-tree.js';
import { startGateway } from '../lib/compiled.js';
import { cpuUs } from '../lib/cpu.js';
import { gatewayEnv } from '../lib/gateway-env.js';
import { ROOT, spawnTs, type Proc } from '../lib/procs.js';
import { API_KEY, GATEWAY_START_MS, type Bench } from './bench.js';
import { ratio, round, until } from './measure.js';

/**
 * `jitCalls`: before the first row every system answers that many calls at concurrency 1 on one session (capped at
 * 60 s), all systems at once (the same work for each, in the wall time of the slowest rather than the sum), so that
 * no row counts a process's JIT warm-up as per-call CPU. That session stays open and is the first session of every
 * row: the c=1 row runs on the session (and, for a proxy that starts a server per session, the server) the warm-up
 * warmed. A warm-up in seconds gave the faster system the longer one; 600 calls left the gateway and its hosted
 * server still compiling through the c=1 row (~90 optimizations in the next 1 000 calls, the c=1 rate 0.6× its
 * steady rate; 3 000 calls: ~13, docs/performance.md, `mcpc1`), and a warm-up at concurrency 10 warms the c=1
 * path less per call than one at 1.
 */
const MCP = {
  full: { jitCalls: 6000, warmS: 2, callS: 8, slices: 8, concurrency: [1, 10, 50] },
  quick: { jitCalls: 3000, warmS: 0.25, callS: 1.2, slices: 4, concurrency: [1, 10, 50] },
  // Tiny checks the path only: Voxgate alone (no install, nothing from the network).
  tiny: { jitCalls: 0, warmS: 0, callS: 0.3, slices: 1, concurrency: [1, 4] },
};
const ECHO_ARGS = { message: 'hello from the bench' };
const MiB = 2 ** 20;

/** The official everything server, the repository's pinned dev dependency: the same program behind all three. */
const EVERYTHING = (() => {
  const require = createRequire(join(ROOT, 'package.json'));
  const pkgFile = require.resolve('@modelcontextprotocol/server-everything/package.json');
  const pkg = require(pkgFile) as { version: string; bin: Record<string, string> };
  return { bin: join(dirname(pkgFile), pkg.bin['mcp-server-everything']!), version: pkg.version };
})();

interface Served {
  /** `floor`: a bare Node proxy in front of the same server (bench/floors/mcp-relay.ts): the least a proxy can do, not a peer. */
  name: 'voxgate' | PeerName | 'floor';
  session: () => LoadSession;
  tool: string;
  pid: number;
  idle?: { root: number; tree: number };
}

interface Row {
  load: McpLoadResult;
  cpuUsPerCall: number;
  /** The proxy process alone (Voxgate: the gateway; without the server it runs). */
  processCpuUsPerCall: number;
  peak: { root: number; tree: number };
  loadAvg: [number, number];
}

/**
 * `/mcp` against the proxies users put in front of a stdio MCP server: Voxgate hosting server-everything
 * (mcp.servers, stdio) reached on /mcp, supergateway and mcp-proxy each fronting their own. The same client
 * load on each (one session per concurrent client, tools/call of `echo` back to back), one system after the
 * other at each concurrency. CPU and memory are the whole serving tree's: proxy plus the servers it started.
 */
export async function mcpScenarios(b: Bench, dataDir: string): Promise<void> {
  const s = MCP[b.mode];
  const dir = join(dataDir, 'mcp');
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, 'config.json'), JSON.stringify({ mcp: { servers: { everything: { command: process.execPath, args: [EVERYTHING.bin] } } } }));
  const profDir = join(ROOT, 'bench/results/prof');
  const {
    proc: gateway,
    how,
    url,
  } = await startGateway('mcp-gateway', {
    env: async (ports) => (await gatewayEnv({ dataDir: dir, apiKey: API_KEY, configFile: join(dir, 'config.json'), ...ports })).env,
    nodeArgs: b.profile && b.only.has('mcp') ? ['--cpu-prof', '--cpu-prof-dir', profDir] : [],
    readyMs: GATEWAY_START_MS,
  });
  const peers: Array<{ name: PeerName; child: ChildProcess }> = [];
  let floor: Proc | undefined;
  const notes: string[] = [`gateway ${how}`];
  const mcpUrl = new URL(`${url}/mcp`);
  try {
    const served: Served[] = [];
    const server = [process.execPath, EVERYTHING.bin, 'stdio'];
    if (b.mode === 'tiny') notes.push('tiny mode: Voxgate alone, the peers are not installed');
    else {
      const got = installPeers(b.log);
      notes.push(...got.notes);
      // The floor starts beside the peers; its port is its own pick (0), sent back in its hello.
      floor = spawnTs('mcp-floor', 'bench/floors/mcp-relay.ts', { env: { MCP_RELAY_SERVER: JSON.stringify(server) } });
      // Each on a port of its own, made again on a new one when the picked port was taken before the peer bound it.
      const started = await Promise.all(
        (Object.keys(got.bins) as PeerName[]).map(async (name) => {
          const answers = (url: URL) => probe({ name, session: () => new McpLoadSession(url), tool: 'echo', pid: 0 });
          return servePeer(name, got.bins[name]!, server, answers, 60_000).then(
            (p) => ({ name, ...p }),
            (e: unknown) => void notes.push(`${name} skipped: ${(e as Error).message}`),
          );
        }),
      );
      for (const p of started) {
        if (!p) continue;
        peers.push(p);
        if (p.attempts > 1) notes.push(`${p.name} started on its ${p.attempts}th port (the ones before were taken)`);
        served.push({ name: p.name, session: () => new McpLoadSession(p.url), tool: 'echo', pid: p.child.pid! });
      }
      // Bounded: a server that never answers the floor's initialize skips the floor, not the section.
      const noHello = new Promise<never>((_, reject) => setTimeout(() => reject(new Error('no answer to initialize within 30 s')), 30_000).unref());
      const hello = await Promise.race([floor.hello, noHello]).catch((e: unknown) => (notes.push(`floor skipped: ${(e as Error).message}`), undefined));
      if (hello) {
        const url = new URL(`http://127.0.0.1:${hello['port'] as number}/mcp`);
        served.push({ name: 'floor', session: () => new McpLoadSession(url), tool: 'echo', pid: floor.child.pid! });
      }
    }
    const voxgate: Served = {
      name: 'voxgate',
      session: () => new McpLoadSession(mcpUrl, { authorization: `Bearer ${API_KEY}` }),
      tool: 'mcp__everything__echo',
      pid: gateway.child.pid!,
    };
    await until('server-everything behind /mcp', () => probe(voxgate), 60_000, 200);
    const systems: Served[] = [voxgate];
    for (const p of served) {
      const ok = await until(`${p.name} to answer`, () => probe(p), 30_000, 200).then(
        () => true,
        (e: unknown) => {
          notes.push(`${p.name} skipped: ${(e as Error).message}`);
          return false;
        },
      );
      if (ok) systems.push(p);
    }
    for (const sys of systems) sys.idle = treeRss(sys.pid);

    const warmed = new Map<Served, LoadSession>();
    try {
      await Promise.all(
        systems.map(async (sys) => {
          const session = await jitWarmUp(sys, s.jitCalls, notes);
          if (session) warmed.set(sys, session);
        }),
      );
      const rows = new Map<string, Row>();
      for (const c of s.concurrency) for (const [k, row] of await measureRows(b, systems, c, s, notes, warmed)) rows.set(k, row);
      // After: every session closed (DELETE); what stays resident once the load is gone.
      await Promise.all([...warmed.values()].map((x) => x.close().catch(() => undefined)));
      warmed.clear();
      await new Promise((r) => setTimeout(r, b.mode === 'tiny' ? 200 : 2000));
      const after = new Map(systems.map((sys) => [sys.name, treeRss(sys.pid)]));
      report(b, systems, rows, after, s.concurrency);
    } finally {
      await Promise.all([...warmed.values()].map((x) => x.close().catch(() => undefined)));
    }
  } finally {
    for (const n of notes) b.log(`mcp: ${n}`);
    await Promise.all([gateway.stop(10_000), ...peers.map((p) => stopPeer(p.child)), floor?.stop()]);
  }
}

/** One session opened, one call answered, the session closed: the system serves. */
async function probe(sys: Served): Promise<boolean> {
  const session = sys.session();
  try {
    await session.open();
    await session.call(sys.tool, ECHO_ARGS);
    return true;
  } catch {
    return false;
  } finally {
    await session.close().catch(() => undefined);
  }
}

/**
 * The process-wide warm-up leg (`jitCalls`): resolves with its session, still open (the rows' first session), or
 * undefined when there is none; a system that fails it is left to fail its rows.
 */
async function jitWarmUp(sys: Served, calls: number, notes: string[]): Promise<LoadSession | undefined> {
  if (calls === 0) return undefined;
  const session = sys.session();
  try {
    await session.open();
    const r = await runMcpLoad([session], sys.tool, ECHO_ARGS, 60, calls);
    if (r.calls < calls) notes.push(`${sys.name}: warm-up answered ${r.calls} of ${calls} calls`);
    return session;
  } catch (e) {
    notes.push(`${sys.name}: warm-up failed: ${(e as Error).message}`);
    await session.close().catch(() => undefined);
    return undefined;
  }
}

interface Slot {
  sys: Served;
  sessions: LoadSession[];
  pids: number[];
  runs: McpLoadResult[];
  cpu: number;
  own: number;
  sampler: ReturnType<typeof rssSampler>;
}

/**
 * One concurrency, every system side by side: each opens its sessions and warms up, then the measured
 * time is cut in slices taken in turn (A B C A B C …), so a neighbour's burst of load lands on all of them
 * alike. A system that fails is dropped from the row (Voxgate failing fails the run).
 */
async function measureRows(
  b: Bench,
  systems: readonly Served[],
  c: number,
  s: (typeof MCP)[keyof typeof MCP],
  notes: string[],
  warmed: ReadonlyMap<Served, LoadSession>,
): Promise<Map<string, Row>> {
  const slots: Slot[] = [];
  const drop = (slot: Slot, e: unknown) => {
    if (slot.sys.name === 'voxgate') throw e;
    notes.push(`${slot.sys.name} c=${c} failed: ${(e as Error).message}`);
    slot.sampler.stop();
    slots.splice(slots.indexOf(slot), 1);
  };
  const load0 = loadavg()[0]!;
  try {
    for (const sys of systems) {
      // The sampler reads `slot.pids`: the root alone until every session is open, then the whole tree.
      const slot: Slot = { sys, sessions: [], pids: [sys.pid], runs: [], cpu: 0, own: 0, sampler: rssSampler(() => slot.pids) };
      slots.push(slot);
      try {
        // The warm-up's session first (kept open: not closed with the row's own).
        const kept = warmed.get(sys);
        if (kept) slot.sessions.push(kept);
        for (let i = slot.sessions.length; i < c; i += 10) {
          const batch = Array.from({ length: Math.min(10, c - i) }, () => sys.session());
          slot.sessions.push(...batch);
          await Promise.all(batch.map((x) => x.open()));
        }
        if (s.warmS > 0) await runMcpLoad(slot.sessions, sys.tool, ECHO_ARGS, s.warmS);
        // supergateway starts a server per session: the tree is read once every session is open.
        slot.pids = treePids(sys.pid);
      } catch (e) {
        drop(slot, e);
      }
    }
    for (let k = 0; k < s.slices; k++)
      for (const slot of [...slots]) {
        const cpu0 = cpuOf(slot.pids);
        const own0 = cpuUs(slot.sys.pid);
        const r = await runMcpLoad(slot.sessions, slot.sys.tool, ECHO_ARGS, s.callS / s.slices);
        slot.cpu += cpuOf(slot.pids) - cpu0;
        slot.own += cpuUs(slot.sys.pid) - own0;
        slot.runs.push(r);
        if (r.failed > 0) drop(slot, new Error(`${r.failed} of ${r.calls + r.failed} calls failed: ${r.firstError ?? ''}`));
      }
  } finally {
    for (const slot of slots) await Promise.all(slot.sessions.filter((x) => x !== warmed.get(slot.sys)).map((x) => x.close().catch(() => undefined)));
  }
  const rows = new Map<string, Row>();
  const loadAvg: [number, number] = [round(load0, 2), round(loadavg()[0]!, 2)];
  for (const slot of [...slots]) {
    const load = summarize(slot.runs);
    if (load.calls === 0) {
      drop(slot, new Error('no call answered'));
      continue;
    }
    const peak = slot.sampler.stop();
    const row: Row = { load, cpuUsPerCall: slot.cpu / load.calls, processCpuUsPerCall: slot.own / load.calls, peak, loadAvg };
    rows.set(`${slot.sys.name}/${c}`, row);
    b.log(
      `mcp ${slot.sys.name} c=${c}: ${load.perSecond.toFixed(0)} calls/s, p50 ${load.p50.toFixed(2)} ms, ${row.cpuUsPerCall.toFixed(0)} µs CPU/call ` +
        `(proxy ${row.processCpuUsPerCall.toFixed(0)}), peak rss ${(peak.root / MiB).toFixed(0)} MiB (tree ${(peak.tree / MiB).toFixed(0)})`,
    );
  }
  return rows;
}

function report(
  b: Bench,
  systems: readonly Served[],
  rows: ReadonlyMap<string, Row>,
  after: ReadonlyMap<string, { root: number; tree: number }>,
  concurrency: readonly number[],
): void {
  const ours = systems[0]!;
  const mib = (x: number) => round(x / MiB);
  const common = { devices: 0, server: `server-everything ${EVERYTHING.version} (stdio), tool echo` };
  const push = (name: string, value: number, unit: string, floor: number | null, r: number | null, params: Record<string, unknown>) =>
    b.results.push({ name, value, unit, floor, ratio: r, params: { ...common, ...params } });
  // Voxgate's own figures (also when no peer could run).
  push('mcp.idle_rss', mib(ours.idle!.root), 'MiB', null, null, { treeMiB: mib(ours.idle!.tree), note: 'gateway process, hosted server started, no session' });
  for (const c of concurrency) {
    const r = rows.get(`voxgate/${c}`)!;
    push('mcp.calls_per_s', round(r.load.perSecond), 'calls/s', null, null, {
      concurrency: c,
      p50Ms: round(r.load.p50, 2),
      p99Ms: round(r.load.p99, 2),
      cpuUsPerCall: round(r.cpuUsPerCall),
      processCpuUsPerCall: round(r.processCpuUsPerCall),
      peakRssMiB: mib(r.peak.root),
      peakTreeMiB: mib(r.peak.tree),
      load: r.loadAvg,
    });
  }
  // The bare proxy in front of the same server: the floor. Ratio = Voxgate's share of its rate (1 = Voxgate's
  // sessions, checks and hub cost nothing above Node's HTTP and the pipe).
  const floorRows = new Map(concurrency.map((c) => [c, rows.get(`floor/${c}`)]));
  for (const c of concurrency) {
    const r = rows.get(`voxgate/${c}`)!;
    const f = floorRows.get(c);
    if (!f) continue;
    push('mcp.floor.calls_per_s', round(r.load.perSecond), 'calls/s', round(f.load.perSecond), ratio(r.load.perSecond, f.load.perSecond), {
      concurrency: c,
      p50Ms: [round(r.load.p50, 2), round(f.load.p50, 2)],
      processCpuUsPerCall: [round(r.processCpuUsPerCall), round(f.processCpuUsPerCall)],
      serverCpuUsPerCall: [round(r.cpuUsPerCall - r.processCpuUsPerCall), round(f.cpuUsPerCall - f.processCpuUsPerCall)],
      load: [r.loadAvg[0], f.loadAvg[1]],
      note: 'floor = a bare Node proxy (bench/floors/mcp-relay.ts): node:http in, the same stdio server out, JSON.parse and JSON.stringify only',
    });
  }
  const a = after.get('voxgate')!;
  push('mcp.rss_after', mib(a.root), 'MiB', null, null, { treeMiB: mib(a.tree), note: 'every session closed, 2 s later, no forced GC' });
  // Against each peer: ratio >= 1 means Voxgate is ahead (faster, or lighter); goal >= 2 on calls/s.
  for (const peer of systems.slice(1).filter((x) => x.name !== 'floor')) {
    const vs = `mcp.vs_${peer.name}`;
    const version = `${peer.name}@${PEER_VERSIONS[peer.name as PeerName]}`;
    for (const c of concurrency) {
      const r = rows.get(`voxgate/${c}`)!;
      const p = rows.get(`${peer.name}/${c}`);
      if (!p) continue;
      const params = { concurrency: c, peer: version, load: [r.loadAvg[0], p.loadAvg[1]] };
      const f = floorRows.get(c);
      push(`${vs}.calls_per_s`, round(r.load.perSecond), 'calls/s', round(p.load.perSecond), ratio(r.load.perSecond, p.load.perSecond), {
        ...params,
        // The most any Node proxy was ahead of this peer in this run: the bare proxy's rate over the peer's.
        ...(f ? { floorRatio: ratio(f.load.perSecond, p.load.perSecond) } : {}),
        note: 'goal: ratio >= 2; floorRatio = the bare proxy floor against the same peer',
      });
      push(`${vs}.p50_ms`, round(r.load.p50, 2), 'ms', round(p.load.p50, 2), ratio(p.load.p50, r.load.p50), {
        ...params,
        p99: [round(r.load.p99, 2), round(p.load.p99, 2)],
      });
      push(`${vs}.cpu_us_per_call`, round(r.cpuUsPerCall), 'µs', round(p.cpuUsPerCall), ratio(p.cpuUsPerCall, r.cpuUsPerCall), {
        ...params,
        processOnly: [round(r.processCpuUsPerCall), round(p.processCpuUsPerCall)],
        note: 'whole serving tree: proxy + its server process(es); processOnly = the proxy process alone',
      });
      push(`${vs}.peak_rss_tree`, mib(r.peak.tree), 'MiB', mib(p.peak.tree), ratio(p.peak.tree, r.peak.tree), {
        ...params,
        processOnly: [mib(r.peak.root), mib(p.peak.root)],
        note: 'whole serving tree; processOnly = the proxy process alone',
      });
    }
    const pa = after.get(peer.name)!;
    push(`${vs}.rss_after_tree`, mib(a.tree), 'MiB', mib(pa.tree), ratio(pa.tree, a.tree), {
      peer: version,
      processOnly: [mib(a.root), mib(pa.root)],
      idleTree: [mib(ours.idle!.tree), mib(peer.idle!.tree)],
      note: 'every session closed, 2 s later',
    });
  }
}
