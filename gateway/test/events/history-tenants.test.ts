import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { FastifyInstance } from 'fastify';
import { afterEach, describe, expect, it } from 'vitest';
import { eventVisibility } from '../../src/api/device-scope.js';
import { eventHistoryRoutes } from '../../src/api/events-history.js';
import { loadConfig } from '../../src/config.js';
import { EventBus, type GatewayEvent } from '../../src/events/bus.js';
import { SqliteEventLog, type SqliteEventLogOptions } from '../../src/events/history-sqlite.js';
import { largestFirst } from '../../src/events/retention.js';
import { createMetrics } from '../../src/metrics.js';
import { SqliteStore } from '../../src/store/sqlite-store.js';
import { apiPart, bearer } from '../../../test/support/api-parts.js';

/** Devices: 02:00:00:00:0a:xx are tenant acme's, 02:00:00:00:0b:xx globex's, anything else has no tenant. */
const dev = (prefix: string, i: number) => `02:00:00:00:${prefix}:${i.toString(16).padStart(2, '0')}`;
const tenantOf = (id: string) => (id.startsWith('02:00:00:00:0a:') ? 'acme' : id.startsWith('02:00:00:00:0b:') ? 'globex' : undefined);
const GLOBEX_KEY = 'globex-key-0123456789ab';

const cleanup: Array<() => unknown> = [];
afterEach(async () => {
  for (const f of cleanup.splice(0).reverse()) await f();
});

function tempDb(): string {
  const dir = mkdtempSync(join(tmpdir(), 'voxgate-history-tenants-'));
  cleanup.push(() => rmSync(dir, { recursive: true, force: true }));
  return join(dir, 'voxgate.db');
}

/** The SQLite event log on a temp dir, fed by a bus, each event's tenant from `tenantOf`. */
function open(path: string, o: Partial<SqliteEventLogOptions>) {
  const store = new SqliteStore(path);
  let closed = false;
  const close = async () => {
    if (!closed) await store.close();
    closed = true;
  };
  cleanup.push(close);
  const log = store.share(
    (db) => new SqliteEventLog(db, { maxEvents: 1000, maxAgeMs: 3_600_000, flushMs: 60_000, batchSize: 16, replayLimit: 100, tenantOf, ...o }),
  );
  const bus = new EventBus({ bufferSize: 100 });
  bus.subscribe((e) => log.append(e));
  return { log, bus, close };
}

/** `n` connect/disconnect events from acme's devices, written in several batches as a storm would be. */
async function flood(bus: EventBus, log: SqliteEventLog, n: number): Promise<void> {
  for (let i = 0; i < n; i++) {
    bus.publish(i % 2 ? 'device.offline' : 'device.online', dev('0a', i % 40), { reason: 'flap' });
    if (i % 50 === 49) log.flush();
  }
  log.flush();
}

const ids = async (log: SqliteEventLog, devices: string[]) => (await log.read({ devices: new Set(devices), limit: 1000 })).events.map((e) => e.id);

describe('event history retention per tenant', () => {
  it("a tenant flooding past its share (maxEventsPerTenant) evicts its own oldest; another tenant's and the untenanted events stay", async () => {
    const { log, bus } = open(tempDb(), { maxEventsPerTenant: 30 });
    const globex = [bus.publish('device.online', dev('0b', 1))!.id, bus.publish('device.ready', dev('0b', 1))!.id];
    const operator = [bus.publish('device.online', dev('0c', 1))!.id];
    await flood(bus, log, 500);
    expect(await ids(log, [dev('0b', 1)])).toEqual(globex);
    expect(await ids(log, [dev('0c', 1)])).toEqual(operator);
    const acme = (await log.read({ limit: 1000 })).events.filter((e) => tenantOf(e.deviceId) === 'acme');
    // acme keeps its newest 30 only.
    expect(acme.length).toBe(30);
    expect(acme.at(-1)!.data).toEqual({ reason: 'flap' });
    expect(log.size).toBe(33);
  });

  it('past the global bound, the tenant holding the most loses its oldest first (no per-tenant share set)', async () => {
    const { log, bus } = open(tempDb(), { maxEvents: 60 });
    const globex = [bus.publish('device.online', dev('0b', 1))!.id, bus.publish('device.ready', dev('0b', 2))!.id];
    const operator = [bus.publish('device.online', dev('0c', 1))!.id];
    await flood(bus, log, 500);
    expect(await ids(log, [dev('0b', 1), dev('0b', 2)])).toEqual(globex);
    expect(await ids(log, [dev('0c', 1)])).toEqual(operator);
    expect(log.size).toBe(60);
  });

  it("age retention keeps each tenant's count: a tenant whose old events aged out may hold its whole share again", async () => {
    const clock = { now: Date.now() };
    const { log, bus } = open(tempDb(), { maxEventsPerTenant: 10, maxAgeMs: 60_000, now: () => clock.now });
    // Events carry the bus's (real) time: the log's clock moves past the age bound instead.
    await flood(bus, log, 10);
    bus.publish('device.online', dev('0b', 1));
    log.flush();
    clock.now += 61_000;
    log.prune(); // acme's 10 and globex's 1 age out, counted per tenant (several tenants: RETURNING tenant)
    expect(log.size).toBe(0);
    clock.now -= 61_000;
    const kept = [bus.publish('device.online', dev('0b', 2))!.id];
    await flood(bus, log, 10);
    // acme holds its whole share again (a stale count would have evicted some of these 10), globex its new one.
    expect(log.size).toBe(11);
    expect(await ids(log, [dev('0b', 1), dev('0b', 2)])).toEqual(kept);
    // … and no more than it.
    await flood(bus, log, 30);
    expect(log.size).toBe(11);
    expect(await ids(log, [dev('0b', 1), dev('0b', 2)])).toEqual(kept);
  });

  it('counts each tenant again after a restart (the shares hold across a reopen)', async () => {
    const path = tempDb();
    const first = open(path, { maxEventsPerTenant: 20 });
    const globex = [first.bus.publish('device.online', dev('0b', 1))!.id];
    await flood(first.bus, first.log, 15);
    await first.close();
    const second = open(path, { maxEventsPerTenant: 20 });
    await flood(second.bus, second.log, 300);
    expect(await ids(second.log, [dev('0b', 1)])).toEqual(globex);
    expect(second.log.size).toBe(21);
  });

  it("through GET /v1/events/history: globex's key still reads its earlier events after acme's devices flood", async () => {
    // Tenancy plugged in after the log opens, as gateway.ts does.
    const { log, bus } = open(tempDb(), { maxEvents: 100, maxEventsPerTenant: 40, tenantOf: undefined });
    log.useTenancy(tenantOf);
    const app: FastifyInstance = await apiPart((scope) => scope.register(eventHistoryRoutes, { log, visibleTo: (req) => eventVisibility(req, { tenantOf }) }), {
      keys: ['part-api-key-0123456789', GLOBEX_KEY],
      tenantOf: (k) => (k === GLOBEX_KEY ? 'globex' : undefined),
    });
    cleanup.push(() => app.close());
    const mine = [bus.publish('device.online', dev('0b', 7))!, bus.publish('device.notification', dev('0b', 7), { params: { n: 1 } })!];
    await flood(bus, log, 1000);
    const r = await app.inject({ method: 'GET', url: '/v1/events/history?limit=1000', headers: bearer(GLOBEX_KEY) });
    expect(r.statusCode).toBe(200);
    expect(r.json<{ events: GatewayEvent[] }>().events).toEqual(mine);
  });
});

/** Data whose stored JSON text is `n` bytes (two-byte characters: bytes, not characters, are what count). */
const sized = (n: number): Record<string, unknown> => ({ b: 'é'.repeat((n - 8) / 2) });
/** Bytes of the events' data as the log stores it: their JSON text in UTF-8. */
const dataBytes = (events: GatewayEvent[]) => events.reduce((n, e) => n + Buffer.byteLength(JSON.stringify(e.data)), 0);
const everything = async (log: SqliteEventLog) => (await log.read({ limit: 1000 })).events;

/** `n` notifications of `bytes` each from acme's devices, written in batches of 10. */
function floodBig(bus: EventBus, log: SqliteEventLog, n: number, bytes: number): GatewayEvent[] {
  const out: GatewayEvent[] = [];
  for (let i = 0; i < n; i++) {
    out.push(bus.publish('device.notification', dev('0a', i % 8), sized(bytes))!);
    if (i % 10 === 9) log.flush();
  }
  log.flush();
  return out;
}

describe('event history retention by bytes (events.history.maxBytes)', () => {
  it('past maxBytes the oldest go, counted in bytes of the stored JSON text (UTF-8), and counted in the metrics', async () => {
    const metrics = createMetrics();
    const { log, bus } = open(tempDb(), { maxBytes: 10_000, metrics });
    const sent = floodBig(bus, log, 30, 1008);
    // 9 events of 1008 bytes fit in 10 000 (counting characters, 508 each, would keep 19).
    const kept = await everything(log);
    expect(kept.map((e) => e.id)).toEqual(sent.slice(-9).map((e) => e.id));
    expect(log.bytes).toBe(9 * 1008);
    expect(dataBytes(kept)).toBe(log.bytes);
    expect(log.size).toBe(9);
    const value = async (name: string, labels: Record<string, string> = {}) =>
      (await metrics.registry.getSingleMetric(name)!.get()).values.find((v) => Object.entries(labels).every(([k, l]) => v.labels[k] === l))?.value;
    expect(await value('voxgate_event_history_evicted_total', { reason: 'bytes' })).toBe(21);
    expect(await value('voxgate_event_history_bytes')).toBe(9 * 1008);
  });

  it("the tenant holding the most bytes loses its oldest first, not the one holding the most events (another tenant's small ones stay)", async () => {
    const { log, bus } = open(tempDb(), { maxBytes: 40_000 });
    // globex: the oldest events, and the most of them (300), but small; the operators' few; then acme's large ones.
    const globex = Array.from({ length: 300 }, (_, i) => bus.publish('device.online', dev('0b', i % 4), { reason: 'flap' })!.id);
    const operator = [bus.publish('device.online', dev('0c', 1))!.id];
    log.flush();
    const acme = floodBig(bus, log, 60, 1008);
    expect(
      await ids(
        log,
        [0, 1, 2, 3].map((i) => dev('0b', i)),
      ),
    ).toEqual(globex);
    expect(await ids(log, [dev('0c', 1)])).toEqual(operator);
    const kept = (await everything(log)).filter((e) => tenantOf(e.deviceId) === 'acme');
    expect(kept.length).toBeGreaterThan(0);
    expect(kept.map((e) => e.id)).toEqual(acme.slice(-kept.length).map((e) => e.id));
    expect(log.bytes).toBeLessThanOrEqual(40_000);
    expect(log.bytes).toBe(dataBytes(await everything(log)));
    // As many of acme's as fit beside the others: largest first, down to the bound.
    expect(log.bytes + 1008).toBeGreaterThan(40_000);
  });

  it("a tenant past its byte share (maxBytesPerTenant) loses its own oldest, whatever the total's room", async () => {
    const { log, bus } = open(tempDb(), { maxBytesPerTenant: 8_000 });
    const globex = Array.from({ length: 300 }, (_, i) => bus.publish('device.online', dev('0b', i % 4), { reason: 'flap' })!.id); // 5 100 bytes
    const acme = floodBig(bus, log, 40, 1008);
    expect(
      await ids(
        log,
        [0, 1, 2, 3].map((i) => dev('0b', i)),
      ),
    ).toEqual(globex);
    const kept = (await everything(log)).filter((e) => tenantOf(e.deviceId) === 'acme');
    expect(kept.map((e) => e.id)).toEqual(acme.slice(-7).map((e) => e.id));
  });

  it('counts the bytes again after a restart (one scan at open): a lower bound evicts at open, and evictions go on', async () => {
    const path = tempDb();
    const first = open(path, { maxBytes: 1 << 30 });
    const globex = [first.bus.publish('device.online', dev('0b', 1), { reason: 'x' })!.id, first.bus.publish('device.ready', dev('0b', 1))!.id];
    floodBig(first.bus, first.log, 40, 1008);
    const before = first.log.bytes;
    expect(before).toBe(dataBytes(await everything(first.log)));
    await first.close();

    const same = open(path, { maxBytes: 1 << 30 });
    expect(same.log.bytes).toBe(before);
    await same.close();

    const lower = open(path, { maxBytes: 20_000 });
    const atOpen = await everything(lower.log);
    expect(lower.log.bytes).toBeLessThanOrEqual(20_000);
    expect(lower.log.bytes).toBe(dataBytes(atOpen));
    expect(await ids(lower.log, [dev('0b', 1)])).toEqual(globex);
    const acme = floodBig(lower.bus, lower.log, 30, 1008);
    const kept = await everything(lower.log);
    expect(dataBytes(kept)).toBe(lower.log.bytes);
    expect(lower.log.bytes).toBeLessThanOrEqual(20_000);
    expect(await ids(lower.log, [dev('0b', 1)])).toEqual(globex);
    const keptAcme = kept.filter((e) => tenantOf(e.deviceId) === 'acme');
    expect(keptAcme.map((e) => e.id)).toEqual(acme.slice(-keptAcme.length).map((e) => e.id));
  });

  it('is set by GATEWAY_EVENTS_HISTORY_MAX_BYTES(_PER_TENANT), 256 MiB and no share by default, at least 1 MiB', () => {
    const options = (env: Record<string, string>) => SqliteEventLog.options(loadConfig(env).events);
    expect(options({})).toMatchObject({ maxBytes: 256 * 1024 * 1024, maxBytesPerTenant: undefined });
    const set = options({ GATEWAY_EVENTS_HISTORY_MAX_BYTES: '2097152', GATEWAY_EVENTS_HISTORY_MAX_BYTES_PER_TENANT: '1048576' });
    expect(set).toMatchObject({ maxBytes: 2 * 1024 * 1024, maxBytesPerTenant: 1024 * 1024 });
    expect(() => options({ GATEWAY_EVENTS_HISTORY_MAX_BYTES: '1000' })).toThrow(/events\.history\.maxBytes/);
  });

  it('refuses a share above the whole (bytes or events): it would never apply', () => {
    const options = (env: Record<string, string>) => SqliteEventLog.options(loadConfig(env).events);
    expect(() => options({ GATEWAY_EVENTS_HISTORY_MAX_BYTES: '2097152', GATEWAY_EVENTS_HISTORY_MAX_BYTES_PER_TENANT: '4194304' })).toThrow(
      /events\.history\.maxBytesPerTenant.*at most events\.history\.maxBytes/s,
    );
    expect(() => options({ GATEWAY_EVENTS_HISTORY_MAX_BYTES_PER_TENANT: String(512 * 1024 * 1024) })).toThrow(/maxBytesPerTenant/);
    expect(() => options({ GATEWAY_EVENTS_HISTORY_MAX_EVENTS: '1000', GATEWAY_EVENTS_HISTORY_MAX_EVENTS_PER_TENANT: '1001' })).toThrow(
      /events\.history\.maxEventsPerTenant.*at most events\.history\.maxEvents/s,
    );
    // Equal to the whole is allowed (one tenant may hold it all).
    expect(options({ GATEWAY_EVENTS_HISTORY_MAX_EVENTS: '1000', GATEWAY_EVENTS_HISTORY_MAX_EVENTS_PER_TENANT: '1000' })).toMatchObject({
      maxEventsPerTenant: 1000,
    });
  });

  it('the count bound still applies beside it (both bound the history)', async () => {
    const { log, bus } = open(tempDb(), { maxEvents: 5, maxBytes: 1 << 30 });
    const sent = floodBig(bus, log, 12, 108);
    expect((await everything(log)).map((e) => e.id)).toEqual(sent.slice(-5).map((e) => e.id));
    expect(log.bytes).toBe(5 * 108);
  });
});

describe('largestFirst', () => {
  it('lowers the largest buckets to a common level before a smaller one gives anything', () => {
    const take = (counts: Record<string, number>, excess: number) => Object.fromEntries(largestFirst(new Map(Object.entries(counts)), excess));
    expect(take({ a: 100, b: 5, '': 3 }, 10)).toEqual({ a: 10 });
    expect(take({ a: 10, b: 10, c: 1 }, 5)).toEqual({ a: 2, b: 3 });
    expect(take({ a: 10, b: 8 }, 6)).toEqual({ a: 4, b: 2 });
    expect(take({ only: 7 }, 3)).toEqual({ only: 3 });
    expect(take({ a: 2, b: 2 }, 4)).toEqual({ a: 2, b: 2 });
    expect(take({ a: 2 }, 0)).toEqual({});
  });
});
