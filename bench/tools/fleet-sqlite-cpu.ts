/**
 * CPU of the fleet's SQLite writes alone, per ready device: the event history's two rows (`device.online`, `device.ready`)
 * and the device record's one upsert, batched as the gateway batches them (history: one transaction per `batchSize` 500;
 * records: one `putMany` of up to 200), this tree's code against another checkout's in the same process, rounds alternating.
 *   npx tsx --conditions voxgate-source bench/tools/fleet-sqlite-cpu.ts <base checkout dir> [devices=2000] [rounds=8] [random|seq]
 * Each round writes `devices` new devices into each side's own store (a temp file; the tables grow round after round, as a
 * fleet dialling in). `random`: random MAC-like ids (a real fleet); `seq`: the bench fleet's sequential ones.
 * Prints the lowest and the median µs of process CPU per device for each side, the history and the records apart, and
 * (Linux) how much each side's WebAssembly memory (SQLite's page cache and heap: bench/lib/smaps.ts) grew per device.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import type { GatewayEvent } from '../../gateway/src/events/bus.js';
import * as thisLog from '../../gateway/src/events/history-sqlite.js';
import * as thisStore from '../../gateway/src/store/sqlite-store.js';
import { mappingsOf } from '../lib/smaps.js';

type LogModule = typeof thisLog;
type StoreModule = typeof thisStore;

const [baseDir, devicesArg = '2000', roundsArg = '8', idMode = 'random'] = process.argv.slice(2);
if (!baseDir) throw new Error('usage: fleet-sqlite-cpu.ts <base checkout dir> [devices] [rounds] [random|seq]');
const devices = Number(devicesArg);
const rounds = Number(roundsArg);
const src = (dir: string, file: string) => pathToFileURL(join(dir, 'gateway/src', file)).href;
const baseLog = (await import(src(baseDir, 'events/history-sqlite.ts'))) as LogModule;
const baseStore = (await import(src(baseDir, 'store/sqlite-store.ts'))) as StoreModule;

const tmp = mkdtempSync(join(tmpdir(), 'fleet-sqlite-cpu-'));
const sides = [
  { name: 'this tree', ...open(thisLog, thisStore, 'this') },
  { name: 'base', ...open(baseLog, baseStore, 'base') },
];

function open(logs: LogModule, stores: StoreModule, name: string) {
  const store = new stores.SqliteStore(join(tmp, `${name}.db`));
  const o = { maxEvents: 100_000, maxAgeMs: 7 * 24 * 3_600_000, flushMs: 250, batchSize: 500, replayLimit: 1000 };
  const log = store.share((db) => new logs.SqliteEventLog(db, o));
  return { store, log, history: [] as number[], records: [] as number[], wasm: 0 };
}

const mac = (i: number) => [2, 1, (i >>> 24) & 255, (i >>> 16) & 255, (i >>> 8) & 255, i & 255].map((x) => x.toString(16).padStart(2, '0')).join(':');
/** Resident bytes of each WebAssembly memory of this process, by its start address. */
const wasmResident = () => new Map((mappingsOf(process.pid) ?? []).filter((m) => m.kind === 'wasmMemory').map((m) => [m.start, m.rss]));
const cpu = () => {
  const u = process.cpuUsage();
  return u.user + u.system;
};
let seq = 0;
let first = 0;
for (let round = 0; round <= rounds; round++) {
  const ids = Array.from({ length: devices }, (_, i) => first + i);
  first += devices;
  if (idMode === 'random') ids.sort(() => Math.random() - 0.5);
  // As a fleet dials in, 256 in setup at once: the group's `device.online` events, then their `device.ready` ones.
  const events: GatewayEvent[] = [];
  for (let k = 0; k < ids.length; k += 256) {
    const group = ids.slice(k, k + 256).map(mac);
    const at = new Date().toISOString();
    for (const d of group) events.push({ id: `bench-${++seq}`, type: 'device.online', deviceId: d, at, data: { transport: 'websocket', clientId: d } });
    for (const d of group) {
      const data = { toolCount: 12, hash: 'Zx3kq9Lm2Pw8Rt5Yv1Bn4C', server: { name: 'xiaozhi', version: '1.9.2' }, protocolVersion: '2024-11-05' };
      events.push({ id: `bench-${++seq}`, type: 'device.ready', deviceId: d, at, data });
    }
  }
  const now = Date.now();
  const facts = ids.map((i) => ({
    key: mac(i),
    value: { clientId: mac(i), transport: 'websocket', firstSeen: now, lastSeen: now, server: { name: 'xiaozhi', version: '1.9.2' }, toolCount: 12 },
  }));
  for (const side of round % 2 ? sides : [...sides].reverse()) {
    const w0 = wasmResident();
    let t = cpu();
    for (let k = 0; k < events.length; k += 500) {
      for (const e of events.slice(k, k + 500)) side.log.append(e);
      side.log.flush();
    }
    const history = cpu() - t;
    t = cpu();
    for (let k = 0; k < facts.length; k += 200) await side.store.putMany('devices', facts.slice(k, k + 200), { durable: false });
    const records = cpu() - t;
    // Only this side's SQLite ran meanwhile: what its memory grew by (a WebAssembly memory never shrinks).
    for (const [start, rss] of wasmResident()) side.wasm += rss - (w0.get(start) ?? 0);
    if (round === 0) continue; // the warm-up round
    side.history.push(history / devices);
    side.records.push(records / devices);
  }
}
const stat = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return `lowest ${s[0]!.toFixed(1)}  median ${s[s.length >> 1]!.toFixed(1)}`;
};
console.log(`${devices} new devices × ${rounds} rounds, ${idMode} ids: µs of CPU per device (2 history rows, 1 record)`);
for (const s of sides)
  console.log(
    `  ${s.name.padEnd(10)} history ${stat(s.history)} | records ${stat(s.records)} | WebAssembly memory +${(s.wasm / 2 ** 20).toFixed(2)} MiB (${(s.wasm / (devices * (rounds + 1))).toFixed(0)} B per device)`,
  );
for (const s of sides) await s.store.close();
rmSync(tmp, { recursive: true, force: true });
