import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { FastifyInstance } from 'fastify';
import { afterEach, describe, expect, it } from 'vitest';
import { eventFilterFor } from '../../src/api/device-scope.js';
import { eventHistoryRoutes } from '../../src/api/events-history.js';
import { EventBus, type GatewayEvent } from '../../src/events/bus.js';
import { SqliteEventLog, type SqliteEventLogOptions } from '../../src/events/history-sqlite.js';
import { largestFirst } from '../../src/events/retention.js';
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
    const app: FastifyInstance = await apiPart((scope) => scope.register(eventHistoryRoutes, { log, visibleTo: (req) => eventFilterFor(req, { tenantOf }) }), {
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
