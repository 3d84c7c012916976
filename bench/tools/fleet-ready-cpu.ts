/**
 * Process CPU per ready device of the gateway's own ready path in one process, against the fleet floor's
 * handshake (bench/floors/bare-ws.ts: hello answered, initialize, the tools/list pages, JSON.parse only), with no
 * sockets: each device an in-memory link that says hello and answers in the firmware's layout, in a later
 * macrotask (as a socket would), with the bench fleet's two-page catalog (bench/fleet/catalog.ts).
 *   npx tsx --expose-gc --conditions voxgate-source bench/tools/fleet-ready-cpu.ts [devices=2000] [rounds=5] [inflight=256]
 * The sockets (accept, HTTP upgrade, ws framing, writev) are what both pay and what this leaves out: the figure is
 * the JavaScript (and SQLite) the gateway adds on top of the floor's four round trips, and it moves little with the
 * machine's load (CPU time, not wall clock). Each round connects `devices` new devices to every side in turn (new
 * ids: the registry, the records and the event history grow as in a fleet), measured until every one is ready and
 * their store batches are written, then disconnects them (not measured). The lowest and the median of each side are printed.
 * FLEETCPU_BASE=<dir>: a second gateway from the sources under <dir>/gateway/src (a checkout of the commit before a
 * change, its node_modules a link to this one's) runs in the same process, alternating with this one.
 * FLEETCPU_PROFILE=<file.cpuprofile>: a CPU profile (node:inspector, 100 µs) of this gateway's measured rounds only (not
 * the start-up, the warm-up, the floor nor the base), for `top-self.ts`.
 * FLEETCPU_ALLOC=1: V8's sampling heap profiler (objects freed by either collection kept in the profile) over every
 * side's measured rounds: bytes allocated per ready device (what each side's ready path allocates, garbage included), and
 * this gateway's top allocation sites; the sampler's cost is in the CPU figures then.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { Session } from 'node:inspector/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { pathToFileURL } from 'node:url';
import * as thisGateway from '../../gateway/src/index.js';
import type { DeviceLink } from '../../gateway/src/devices/link.js';
import { createLogger } from '../../gateway/src/log.js';
import { HELLO, INIT_RESULT, benchCatalog } from '../fleet/catalog.js';

type GatewayModule = typeof thisGateway;
type Gateway = thisGateway.Gateway;

const [devices = 2000, rounds = 5, inflight = 256] = process.argv.slice(2, 5).map(Number);
const baseDir = process.env['FLEETCPU_BASE'];
const profileFile = process.env['FLEETCPU_PROFILE'];
const allocOn = process.env['FLEETCPU_ALLOC'] === '1';
const inspector = profileFile || allocOn ? new Session() : undefined;
interface SampledNode {
  callFrame: { functionName: string; url: string; lineNumber: number };
  selfSize: number;
  children: SampledNode[];
}
/** Sampled bytes per side (all its measured rounds), and this gateway's by allocation site. */
const allocated = new Map<string, number>();
const sites = new Map<string, number>();
function addSites(n: SampledNode): void {
  if (n.selfSize > 0) {
    const site = `${n.callFrame.functionName || '(anonymous)'} ${n.callFrame.url.replace(/^.*\/(gateway|protocol|bench|node_modules)\//, '$1/')}:${n.callFrame.lineNumber + 1}`;
    sites.set(site, (sites.get(site) ?? 0) + n.selfSize);
  }
  for (const c of n.children) addSites(c);
}
const totalOf = (n: SampledNode): number => n.children.reduce((t, c) => t + totalOf(c), n.selfSize);
let profiled: object[] = [];
const catalog = benchCatalog();

/** The device's end, as bench/fleet/fleet.ts answers: the server hello's session id, then MCP replies in the firmware's layout. */
function deviceEnd(deliver: (text: string) => void, onReady: () => void): (text: string) => void {
  let sid = '';
  return (text) => {
    const frame = JSON.parse(text) as { type?: string; session_id?: string; payload?: { id?: number; method?: string; params?: { cursor?: string } } };
    if (frame.type === 'hello') {
      sid = frame.session_id ?? '';
      return;
    }
    const p = frame.payload;
    if (frame.type !== 'mcp' || typeof p?.id !== 'number') return;
    const reply = (result: string) => `{"session_id":"${sid}","type":"mcp","payload":{"jsonrpc":"2.0","id":${p.id},"result":${result}}}`;
    if (p.method === 'initialize') return void setImmediate(() => deliver(reply(INIT_RESULT)));
    if (p.method !== 'tools/list') return;
    const cursor = p.params?.cursor ?? '';
    const page = catalog.pages.get(cursor)!;
    setImmediate(() => deliver(reply(page)));
    if (!page.includes('"nextCursor"')) setImmediate(onReady); // after the last page is taken
  };
}

const idOf = (round: number, i: number) =>
  `02:${round.toString(16).padStart(2, '0')}:00:${((i >> 16) & 0xff).toString(16).padStart(2, '0')}:${((i >> 8) & 0xff).toString(16).padStart(2, '0')}:${(i & 0xff).toString(16).padStart(2, '0')}`;

interface Side {
  name: string;
  /** Connects one device; resolves when that side counts it ready. */
  connect(deviceId: string): Promise<void>;
  /** Disconnects every device of the round. */
  closeAll(): void;
  runs: number[];
}

async function gatewaySide(name: string, { loadConfig, startGateway }: GatewayModule): Promise<Side & { gw: Gateway; dataDir: string }> {
  const dataDir = mkdtempSync(join(tmpdir(), 'voxgate-fleetreadycpu-'));
  writeFileSync(join(dataDir, 'gateway.config.json'), '{}');
  const config = loadConfig(
    { GATEWAY_CONFIG: join(dataDir, 'gateway.config.json') },
    { dataDir, apiKeys: ['bench-api-key-0123456789abcdef'], http: { host: '127.0.0.1', port: 0 }, mqtt: { host: '127.0.0.1', port: 0 }, tls: { mqttPort: 0 } },
  );
  const sink = new Writable({ write: (_c, _e, cb) => cb() });
  const gw = await startGateway(config, { log: createLogger('warn', sink) });
  const open: Array<() => void> = [];
  return {
    name,
    gw,
    dataDir,
    runs: [],
    connect: (deviceId) =>
      new Promise<void>((resolve) => {
        let closed = false;
        // Set once the registry made it (the link's closures need it first).
        const held: { session?: ReturnType<Gateway['registry']['connect']> } = {};
        const deliver = (t: string) => void (closed || held.session?.onText(t));
        const toDevice = deviceEnd(deliver, resolve);
        const link: DeviceLink = {
          transport: 'websocket',
          remoteAddress: '127.0.0.1',
          send: (text) => (closed ? false : (toDevice(text), true)),
          close: () => {
            if (closed) return;
            closed = true;
            held.session?.onClosed('closed');
          },
        };
        held.session = gw.registry.connect({ deviceId, clientId: deviceId, link, expectHello: true, credential: '' });
        open.push(() => link.close(1000, 'bye'));
        setImmediate(() => held.session?.onText(HELLO));
      }),
    closeAll: () => {
      for (const close of open.splice(0)) close();
    },
  };
}

/** The floor's handshake (bench/floors/bare-ws.ts) over the same in-memory device end. */
function floorSide(): Side {
  let sessions = 0;
  const open: Array<() => void> = [];
  return {
    name: 'floor',
    runs: [],
    connect: () =>
      new Promise<void>((resolve) => {
        const sid = `floor-${++sessions}`;
        let closed = false;
        let isReady = false;
        const toGateway = (text: string) => {
          if (closed) return;
          const m = JSON.parse(text) as { type?: string; payload?: { id?: number; result?: { nextCursor?: string } } };
          if (m.type === 'hello') {
            toDevice(`{"type":"hello","transport":"websocket","session_id":"${sid}"}`);
            return request(1, 'initialize', { protocolVersion: '2024-11-05', capabilities: {}, clientInfo: { name: 'floor', version: '1' } });
          }
          const id = m.payload?.id;
          if (typeof id !== 'number') return;
          const cursor = m.payload?.result?.nextCursor;
          if (id === 1 || cursor) return request(id + 1, 'tools/list', cursor ? { cursor } : {});
          if (!isReady) isReady = true;
        };
        const toDevice = deviceEnd(toGateway, resolve);
        const request = (id: number, method: string, params: Record<string, unknown>) =>
          toDevice(`{"session_id":"${sid}","type":"mcp","payload":${JSON.stringify({ jsonrpc: '2.0', id, method, params })}}`);
        open.push(() => (closed = true));
        setImmediate(() => toGateway(HELLO));
      }),
    closeAll: () => {
      for (const close of open.splice(0)) close();
    },
  };
}

/** CPU µs per ready device: `devices` new devices, at most `inflight` in setup at once. */
async function run(side: Side, round: number, n: number): Promise<number> {
  let next = 0;
  const worker = async () => {
    while (next < n) await side.connect(idOf(round, next++));
  };
  const settle = () => new Promise((r) => setTimeout(r, 300)); // the records' and the event history's 250 ms batches
  // Every side starts from a collected heap (with --expose-gc): a full collection of what another side left is not its cost.
  (globalThis as { gc?: () => void }).gc?.();
  const profile = inspector !== undefined && side === mine && round > 0;
  if (profile) await inspector.post('Profiler.start');
  const alloc = allocOn && round > 0;
  if (alloc) {
    const opts = { samplingInterval: 4096, includeObjectsCollectedByMajorGC: true, includeObjectsCollectedByMinorGC: true };
    await inspector!.post('HeapProfiler.startSampling', opts);
  }
  const c0 = process.cpuUsage();
  await Promise.all(Array.from({ length: Math.min(inflight, n) }, worker));
  await settle(); // what the ready devices wrote is part of their cost
  const u = process.cpuUsage(c0);
  if (profile) profiled.push((await inspector.post('Profiler.stop')).profile);
  if (alloc) {
    const head = (await inspector!.post('HeapProfiler.stopSampling')).profile.head as unknown as SampledNode;
    allocated.set(side.name, (allocated.get(side.name) ?? 0) + totalOf(head));
    if (side === mine) addSites(head);
  }
  side.closeAll();
  await settle();
  return (u.user + u.system) / n;
}

if (inspector) {
  inspector.connect();
  await inspector.post('Profiler.enable');
  await inspector.post('Profiler.setSamplingInterval', { interval: 100 });
  await inspector.post('HeapProfiler.enable');
}
const mine = await gatewaySide('gateway', thisGateway);
const base = baseDir ? await gatewaySide('base', (await import(pathToFileURL(`${baseDir}/gateway/src/index.ts`).href)) as GatewayModule) : undefined;
const sides: Side[] = [mine, ...(base ? [base] : []), floorSide()];
for (const s of sides) await run(s, 0, Math.min(devices, 500)); // warm-up (JIT, page cache, the store's first writes)
// The order turns every round: a side is not always the one that runs after (and collects the garbage of) another.
for (let k = 1; k <= rounds; k++) for (const s of k % 2 ? sides : [...sides].reverse()) s.runs.push(await run(s, k, devices));
const low = (xs: number[]) => Math.min(...xs);
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
process.stdout.write(`${devices} devices x ${rounds} rounds per side, ${inflight} in setup at once (µs of CPU per ready device, no sockets)\n`);
for (const s of sides)
  process.stdout.write(
    `  ${s.name.padEnd(8)} lowest ${low(s.runs).toFixed(1)}  median ${median(s.runs).toFixed(1)}  (${s.runs.map((x) => x.toFixed(1)).join(', ')})\n`,
  );
const fl = sides.find((s) => s.name === 'floor')!;
for (const s of sides.filter((x) => x !== fl))
  process.stdout.write(
    `  ${s.name} added over the floor: lowest ${(low(s.runs) - low(fl.runs)).toFixed(1)}, median ${(median(s.runs) - median(fl.runs)).toFixed(1)}\n`,
  );
if (allocOn) {
  process.stdout.write(`bytes allocated per ready device (sampled, garbage included):\n`);
  for (const [name, bytes] of allocated) process.stdout.write(`  ${name.padEnd(8)} ${Math.round(bytes / (devices * rounds))} B\n`);
  process.stdout.write(`this gateway's top allocation sites, bytes per ready device:\n`);
  for (const [site, bytes] of [...sites].sort((a, b) => b[1] - a[1]).slice(0, 30))
    process.stdout.write(`  ${String(Math.round(bytes / (devices * rounds))).padStart(6)} B  ${site}\n`);
}
if (profileFile && profiled.length > 0) {
  writeFileSync(profileFile, JSON.stringify(profiled.at(-1)));
  process.stdout.write(`  profile of this gateway's last round: ${profileFile}\n`);
}
profiled = [];
await mine.gw.close();
if (base) await base.gw.close();
rmSync(mine.dataDir, { recursive: true, force: true });
if (base) rmSync(base.dataDir, { recursive: true, force: true });
