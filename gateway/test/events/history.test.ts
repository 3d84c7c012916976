import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { EventBus, type EventType, type GatewayEvent } from '../../src/events/bus.js';
import { SqliteEventLog, type SqliteEventLogOptions } from '../../src/events/history-sqlite.js';
import type { HistoryQuery } from '../../src/events/history.js';
import { createLogger } from '../../src/log.js';
import { createMetrics } from '../../src/metrics.js';
import { SqliteStore } from '../../src/store/sqlite-store.js';

const A = 'aa:bb:cc:dd:ee:01';
const B = 'aa:bb:cc:dd:ee:02';
const T0 = Date.parse('2026-11-26T08:00:00.000Z');

const dirs: string[] = [];
const stores: SqliteStore[] = [];
afterEach(async () => {
  vi.useRealTimers();
  for (const s of stores.splice(0)) await s.close();
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

function tempDb(): string {
  const dir = mkdtempSync(join(tmpdir(), 'voxgate-history-'));
  dirs.push(dir);
  return join(dir, 'voxgate.db');
}

/** A store and its event log in a temp dir; the clock is the test's. */
function open(path: string, o: Partial<SqliteEventLogOptions> & { clock?: { now: number } } = {}) {
  const store = new SqliteStore(path);
  stores.push(store);
  const clock = o.clock ?? { now: T0 };
  const log = store.share(
    (db) => new SqliteEventLog(db, { maxEvents: 1000, maxAgeMs: 3_600_000, flushMs: 250, batchSize: 500, replayLimit: 100, now: () => clock.now, ...o }),
  );
  return { store, log, clock };
}

/** `fn` on the store's database handle (as a shared table would get it). */
function onDb<T>(store: SqliteStore, fn: (db: Parameters<Parameters<SqliteStore['share']>[0]>[0]) => T): T {
  let out: T | undefined;
  store.share((db) => {
    out = fn(db);
    return { close: () => undefined };
  });
  return out as T;
}

let n = 0;
const event = (type: EventType, deviceId: string, atMs: number, data: Record<string, unknown> = {}, boot = 'boot1'): GatewayEvent => ({
  id: `${boot}-${++n}`,
  type,
  deviceId,
  at: new Date(atMs).toISOString(),
  data,
});

/** Every event a query pages through, following `next`. */
async function all(log: SqliteEventLog, q: Omit<HistoryQuery, 'cursor'>): Promise<{ ids: string[]; pages: number }> {
  const ids: string[] = [];
  let cursor: string | undefined;
  let pages = 0;
  do {
    const page = await log.read({ ...q, cursor });
    pages++;
    ids.push(...page.events.map((e) => e.id));
    cursor = page.next;
  } while (cursor !== undefined);
  return { ids, pages };
}

describe('event history in the embedded store (SQLite)', () => {
  it('writes in batches: nothing per event, a batch when the timer fires or batchSize events wait', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'setImmediate', 'clearImmediate', 'setInterval', 'clearInterval'] });
    const { log } = open(tempDb(), { flushMs: 250, batchSize: 3 });
    log.append(event('device.online', A, T0));
    log.append(event('device.ready', A, T0));
    expect(log.size).toBe(0);
    vi.advanceTimersByTime(250);
    expect(log.size).toBe(2);
    for (let i = 0; i < 3; i++) log.append(event('device.message', A, T0, { message: i }));
    expect(log.size).toBe(2); // the full batch is written off the publisher's call stack
    vi.runOnlyPendingTimers();
    expect(log.size).toBe(5);
  });

  it('reads back with filters (devices, types, since), oldest first, in pages joined by cursors', async () => {
    const { log } = open(tempDb());
    const written: GatewayEvent[] = [];
    for (let i = 0; i < 25; i++) {
      const e = event(i % 5 === 0 ? 'device.online' : 'device.message', i % 2 ? B : A, T0 + i * 1000, { i, text: 'héllo "x"' });
      written.push(e);
      log.append(e);
    }
    // A read sees what still waits for its batch.
    const first = await log.read({ limit: 10 });
    expect(first.events).toEqual(written.slice(0, 10));
    expect(first.next).toBeDefined();
    expect((await all(log, { limit: 10 })).ids).toEqual(written.map((e) => e.id));
    expect((await all(log, { limit: 10 })).pages).toBe(3);
    expect((await all(log, { limit: 25 })).pages).toBe(1); // no `next` when nothing more

    const ofB = written.filter((e) => e.deviceId === B).map((e) => e.id);
    expect((await all(log, { devices: new Set([B]), limit: 4 })).ids).toEqual(ofB);
    expect((await all(log, { devices: new Set([A, B]), limit: 7 })).ids).toEqual(written.map((e) => e.id));
    const online = written.filter((e) => e.type === 'device.online').map((e) => e.id);
    expect((await all(log, { types: new Set<EventType>(['device.online']), limit: 2 })).ids).toEqual(online);
    const onlineOfA = written.filter((e) => e.type === 'device.online' && e.deviceId === A).map((e) => e.id);
    expect((await all(log, { types: new Set<EventType>(['device.online']), devices: new Set([A]), limit: 100 })).ids).toEqual(onlineOfA);
    expect((await all(log, { since: T0 + 20_000, limit: 2 })).ids).toEqual(written.slice(20).map((e) => e.id));
    expect((await log.read({ devices: new Set(['aa:bb:cc:dd:ee:99']), limit: 5 })).events).toEqual([]);
  });

  it("reads a tenant's events only, filtered as it reads: full pages, no `next` past the last (rows without a tenant are nobody's)", async () => {
    const { log } = open(tempDb(), { replayLimit: 100 });
    const tenants = ['acme', 'globex', undefined];
    const written = Array.from({ length: 30 }, (_, i) => ({ ...event('device.message', i % 2 ? B : A, T0 + i, { i }), tenant: tenants[i % 3] }));
    for (const e of written) log.append(e);
    const acme = written.filter((e) => e.tenant === 'acme').map((e) => e.id);
    const first = await log.read({ tenant: 'acme', limit: 4 });
    expect(first.events.map((e) => [e.id, e.tenant])).toEqual(acme.slice(0, 4).map((id) => [id, 'acme']));
    // Ten of acme's, five a page: two pages, the second without a `next` though globex's and nobody's rows follow it.
    expect(await all(log, { tenant: 'acme', limit: 5 })).toEqual({ ids: acme, pages: 2 });
    const acmeOfB = written.filter((e) => e.tenant === 'acme' && e.deviceId === B).map((e) => e.id);
    expect((await all(log, { tenant: 'acme', devices: new Set([B]), limit: 2, order: 'newest' })).ids).toEqual(acmeOfB.reverse());
    expect((await all(log, { tenant: 'initech', limit: 5 })).ids).toEqual([]);
    // Sparse among many: a page reads a window of the table at most; short pages go on from where they stopped.
    const { log: windowed } = open(tempDb(), { scanWindow: 4 });
    for (const e of written) windowed.append(e);
    for (const order of ['oldest', 'newest'] as const) {
      const paged = await all(windowed, { tenant: 'acme', limit: 100, order });
      expect(paged).toEqual({ ids: order === 'oldest' ? acme : [...acme].reverse(), pages: 8 });
      expect(await all(windowed, { tenant: 'initech', limit: 100, order })).toEqual({ ids: [], pages: 8 });
    }
    // A replay says whose each event is: the stream filters it as a page does.
    const replay = await log.replay(written[0]!.id);
    expect(replay && 'events' in replay && replay.events.map((e) => e.tenant)).toEqual(written.slice(1).map((e) => e.tenant));
  });

  it('pages newest first (a timeline that starts now), each `next` going further back', async () => {
    const { log } = open(tempDb());
    const written = Array.from({ length: 12 }, (_, i) => event('device.message', i % 3 ? A : B, T0 + i, { i }));
    for (const e of written) log.append(e);
    const page = await log.read({ limit: 5, order: 'newest' });
    expect(page.events.map((e) => e.data['i'])).toEqual([11, 10, 9, 8, 7]);
    expect((await all(log, { limit: 5, order: 'newest' })).ids).toEqual(written.map((e) => e.id).reverse());
    const ofB = written
      .filter((e) => e.deviceId === B)
      .map((e) => e.id)
      .reverse();
    expect((await all(log, { limit: 1, order: 'newest', devices: new Set([B]) })).ids).toEqual(ofB);
  });

  it('keeps at most maxEvents, the oldest dropped first (counted in the metrics)', async () => {
    const metrics = createMetrics();
    const { log } = open(tempDb(), { maxEvents: 5, metrics });
    const written = Array.from({ length: 8 }, (_, i) => event('device.message', A, T0 + i, { i }));
    for (const e of written) log.append(e);
    log.flush();
    expect(log.size).toBe(5);
    const values = async (name: string) => (await metrics.registry.getSingleMetric(name)!.get()).values.map((v) => [v.labels['outcome'], v.value]);
    expect(await values('voxgate_event_history_writes_total')).toEqual([['written', 8]]);
    expect(await values('voxgate_event_history_size')).toEqual([[undefined, 5]]);
    expect((await all(log, { limit: 100 })).ids).toEqual(written.slice(3).map((e) => e.id));
  });

  it('keeps events for at most maxAgeMs (by an injected clock): older ones are neither read nor kept', async () => {
    const clock = { now: T0 };
    const { log } = open(tempDb(), { maxAgeMs: 60_000, clock });
    const old = event('device.online', A, T0 - 50_000);
    const recent = event('device.offline', A, T0 - 1_000);
    log.append(old);
    log.append(recent);
    log.flush();
    expect(log.size).toBe(2);
    clock.now = T0 + 20_000; // `old` is now 70 s old
    expect((await log.read({ limit: 10 })).events.map((e) => e.id)).toEqual([recent.id]);
    log.prune();
    expect(log.size).toBe(1);
    clock.now = T0 + 120_000;
    log.append(event('device.online', B, clock.now)); // a write prunes as well
    log.flush();
    expect(log.size).toBe(1);
  });

  it('survives a close and a reopen: close writes what waits; ids from the earlier start replay through the bus', async () => {
    const path = tempDb();
    const first = open(path, { replayLimit: 3 });
    const before = [
      event('device.online', A, T0, {}, 'old'),
      event('device.ready', A, T0 + 1, { toolCount: 3 }, 'old'),
      event('device.offline', A, T0 + 2, { reason: 'x' }, 'old'),
    ];
    for (const e of before) first.log.append(e); // never flushed by hand: the store's close writes them
    await first.store.close();

    const second = open(path, { replayLimit: 3 });
    expect((await second.log.read({ limit: 10 })).events).toEqual(before);
    const bus = new EventBus({ bufferSize: 3, log: createLogger('silent'), replaySource: second.log, boot: 'new' });
    bus.subscribe((e) => second.log.append(e));
    const now = bus.publish('device.online', B)!;
    // An id of the earlier start: the ring does not hold it, the log does (the events after it, this start's included).
    const r = await bus.replay(before[0]!.id);
    expect('events' in r && r.events.map((e) => e.id)).toEqual([before[1]!.id, before[2]!.id, now.id]);
    // More than replayLimit events after the id: the client must resync, as with the ring.
    bus.publish('device.offline', B);
    expect(await bus.replay(before[0]!.id)).toEqual({ resync: 'expired' });
    expect(await bus.replay('gone-1')).toEqual({ resync: 'unknown_id' });
    // Cursors go on increasing across the reopen.
    const page = await second.log.read({ limit: 3 });
    const rest = await second.log.read({ limit: 10, cursor: page.next });
    expect(rest.events.map((e) => e.deviceId)).toEqual([B, B]);
  });

  it('writes a batch of any size in several rows per statement, in publication order (cursors follow it)', async () => {
    const { log } = open(tempDb(), { batchSize: 1000 });
    // 32 + 8 + 1 rows per statement in every mix: 77 = 2×32 + 8 + 5×1.
    const written = Array.from({ length: 77 }, (_, i) => event(i % 7 ? 'device.message' : 'device.ready', i % 3 ? A : B, T0 + i, { i }));
    for (const e of written) log.append(e);
    log.flush();
    expect(log.size).toBe(77);
    expect((await all(log, { limit: 10 })).ids).toEqual(written.map((e) => e.id));
    expect((await all(log, { limit: 9, order: 'newest' })).ids).toEqual(written.map((e) => e.id).reverse());
    const readyOfB = written.filter((e) => e.type === 'device.ready' && e.deviceId === B).map((e) => e.id);
    expect((await all(log, { types: new Set<EventType>(['device.ready']), devices: new Set([B]), limit: 2 })).ids).toEqual(readyOfB);
  });

  it('`since` past the newest event reads nothing; the newest time is found again after a reopen', async () => {
    const path = tempDb();
    const first = open(path);
    const written = [event('device.online', A, T0 + 5_000), event('device.offline', A, T0 + 1_000)]; // the newest is not the last
    for (const e of written) first.log.append(e);
    expect((await first.log.read({ since: T0 + 5_001, limit: 10 })).events).toEqual([]);
    expect((await first.log.read({ since: T0 + 5_000, limit: 10 })).events).toEqual([written[0]]);
    await first.store.close();
    const second = open(path);
    expect((await second.log.read({ since: T0 + 5_001, limit: 10 })).events).toEqual([]);
    expect((await second.log.read({ since: T0 + 2_000, limit: 10 })).events).toEqual([written[0]]);
    const later = event('device.online', B, T0 + 9_000);
    second.log.append(later);
    expect((await second.log.read({ since: T0 + 8_000, limit: 10 })).events).toEqual([later]);
  });

  it('age retention deletes from the oldest up to the first younger event; reads never return an older one', async () => {
    const clock = { now: T0 };
    const { log } = open(tempDb(), { maxAgeMs: 60_000, clock });
    // A clock stepped back: `late` is timed before `young` but written after it.
    const [old, young, late, last] = [T0 - 50_000, T0 - 10_000, T0 - 40_000, T0].map((at) => event('device.message', A, at));
    for (const e of [old!, young!, late!, last!]) log.append(e);
    log.flush();
    clock.now = T0 + 25_000; // old and late are past the 60 s bound, young and last are not
    log.prune();
    expect(log.size).toBe(3); // old went; late waits behind young
    expect((await all(log, { limit: 10 })).ids).toEqual([young!.id, last!.id]);
    clock.now = T0 + 55_000; // young is past it too: the run up to `last` goes
    log.prune();
    expect(log.size).toBe(1);
    clock.now = T0 + 61_000; // everything: the table empties, and its seq goes on from where it was
    log.prune();
    expect(log.size).toBe(0);
    const next = event('device.online', B, clock.now);
    log.append(next);
    expect((await all(log, { limit: 10 })).ids).toEqual([next.id]);
  });

  it('drops the time index a file from before 2026-11-27 has (every insert paid for it)', async () => {
    const path = tempDb();
    const first = open(path);
    onDb(first.store, (db) => db.exec('CREATE INDEX IF NOT EXISTS events_at ON events (at)'));
    first.log.append(event('device.online', A, T0));
    await first.store.close();
    const second = open(path);
    const indexes = onDb(second.store, (db) => db.all("SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'events'"));
    expect(indexes.map((r) => r['name']).sort()).toEqual(['events_device', 'events_id', 'events_type']);
    expect((await second.log.read({ since: T0, limit: 10 })).events).toHaveLength(1);
  });

  it('stores each event’s data as the JSON text it always was (a TEXT column older versions read), any script included', async () => {
    const path = tempDb();
    const first = open(path);
    const data = { text: 'café 中文 🎙️ "quoted" \\ back', n: 1.5, nested: { list: [null, true, 'ü'] }, lone: '\ud800' };
    const written = [event('device.message', A, T0, data), event('device.ready', B, T0 + 1, { toolCount: 2, hash: 'h', server: { name: 'fw', version: '1' } })];
    for (const e of written) first.log.append(e);
    first.log.flush();
    const rows = onDb(first.store, (db) => db.all('SELECT typeof(data) AS kind, data FROM events ORDER BY seq'));
    expect(rows).toEqual(written.map((e) => ({ kind: 'text', data: JSON.stringify(e.data) })));
    // What the history API returns is what was published, before and after a reopen.
    expect((await first.log.read({ limit: 10 })).events).toEqual(written);
    await first.store.close();
    expect((await open(path).log.read({ limit: 10 })).events).toEqual(written);
  });

  it('does not throw out of append or read on odd data; unserializable data is stored as such', async () => {
    const { log } = open(tempDb());
    const cyclic: Record<string, unknown> = {};
    cyclic['self'] = cyclic;
    log.append(event('device.message', A, T0, cyclic));
    log.append({ ...event('device.message', A, T0), at: 'not a time' });
    const page = await log.read({ limit: 10 });
    expect(page.events[0]!.data).toEqual({ unserializable: true });
    expect(page.events[1]!.at).toBe(new Date(T0).toISOString()); // the clock's time
  });

  it('bytes per event: measured on disk for typical events (reported in docs/fleet.md)', async () => {
    const path = tempDb();
    const empty = open(path, { maxEvents: 100_000 });
    await empty.store.close();
    const base = statSync(path).size;
    const { store, log } = open(path, { maxEvents: 100_000 });
    const N = 5000;
    const kinds: Array<[EventType, Record<string, unknown>]> = [
      ['device.online', { transport: 'websocket', clientId: '2b6d1e4c-7f3a-4e9b-9c1d-5a8f0e2d7b61' }],
      ['device.ready', { toolCount: 12, hash: 'Zx3kq9Lm2Pw8Rt5Yv1Bn4C', server: { name: 'xiaozhi-esp32', version: '1.9.2' } }],
      ['voice.transcript', { text: 'turn the living room light off please', turnId: 't-3f9a' }],
      ['device.offline', { reason: 'closed' }],
    ];
    for (let i = 0; i < N; i++) {
      const [type, data] = kinds[i % kinds.length]!;
      log.append({
        id: `mi3x9k2a1f4e-${i + 1}`,
        type,
        deviceId: `aa:bb:cc:dd:${(i % 200)
          .toString(16)
          .padStart(4, '0')
          .replace(/(..)(..)/, '$1:$2')}`,
        at: new Date(T0 + i * 1000).toISOString(),
        data,
      });
    }
    await store.close();
    const perEvent = (statSync(path).size - base) / N;
    console.log(`event history: ${perEvent.toFixed(0)} bytes per event on disk (${N} typical events, 3 indexes)`);
    expect(perEvent).toBeGreaterThan(50);
    expect(perEvent).toBeLessThan(400);
  });
});
