import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { FastifyInstance } from 'fastify';
import { afterEach, describe, expect, it } from 'vitest';
import { eventVisibility } from '../../src/api/device-scope.js';
import { eventHistoryRoutes } from '../../src/api/events-history.js';
import { EventBus, type GatewayEvent } from '../../src/events/bus.js';
import { SqliteEventLog } from '../../src/events/history-sqlite.js';
import { SqliteStore } from '../../src/store/sqlite-store.js';
import { apiPart, bearer } from '../../../test/support/api-parts.js';

const DEVICE = '02:00:00:00:23:01';
const OTHER = '02:00:00:00:23:02';
const TENANT_KEY = 'tenant-key-0123456789ab';

const cleanup: Array<() => unknown> = [];
afterEach(async () => {
  for (const f of cleanup.splice(0).reverse()) await f();
});

/** GET /v1/events/history over the SQLite event log on a temp dir, fed by a bus (no gateway). */
async function historyPart() {
  const dir = mkdtempSync(join(tmpdir(), 'voxgate-history-api-'));
  cleanup.push(() => rmSync(dir, { recursive: true, force: true }));
  const store = new SqliteStore(join(dir, 'voxgate.db'));
  cleanup.push(() => store.close());
  const log = store.share((db) => new SqliteEventLog(db, { maxEvents: 1000, maxAgeMs: 3_600_000, flushMs: 60_000, batchSize: 500, replayLimit: 100 }));
  // A tenant's key sees its devices' events only (DEVICE is acme's), as the gateway wires it: each event records its
  // device's tenant as it is published.
  const tenancy = { tenantOf: (id: string) => (id === DEVICE ? 'acme' : undefined) };
  const bus = new EventBus({ bufferSize: 100, tenantOf: tenancy.tenantOf });
  bus.subscribe((e) => log.append(e));
  const app: FastifyInstance = await apiPart((scope) => scope.register(eventHistoryRoutes, { log, visibleTo: (req) => eventVisibility(req, tenancy) }), {
    keys: ['part-api-key-0123456789', TENANT_KEY],
    tenantOf: (k) => (k === TENANT_KEY ? 'acme' : undefined),
  });
  cleanup.push(() => app.close());
  const history = async (query: string, headers: Record<string, string> = bearer()) => {
    const r = await app.inject({ method: 'GET', url: `/v1/events/history?${query}`, headers });
    return { status: r.statusCode, body: r.json<{ events: GatewayEvent[]; next?: string; code?: string }>() };
  };
  return { bus, history };
}

describe('GET /v1/events/history', () => {
  it('reads the log back in pages joined by next, oldest first, newest first for a timeline, filtered', async () => {
    const { bus, history } = await historyPart();
    const published = [
      bus.publish('device.online', DEVICE, { transport: 'websocket' })!,
      bus.publish('device.ready', DEVICE)!,
      bus.publish('device.notification', DEVICE, { params: { n: 1 } })!,
      bus.publish('device.online', OTHER)!,
      bus.publish('device.offline', DEVICE, { reason: 'closed' })!,
    ];
    // As served: the tenant an event was published under is the gateway's, never on the wire.
    const mine = published.filter((e) => e.deviceId === DEVICE).map(({ tenant: _, ...wire }) => wire);
    // A read writes what waits first: every event published is there.
    const all = await history(`device=${DEVICE}`);
    expect(all.status).toBe(200);
    expect(all.body.events).toEqual(mine);
    expect(all.body.next).toBeUndefined();
    const p1 = await history(`device=${DEVICE}&limit=3`);
    expect(p1.body.next).toEqual(expect.any(String));
    const p2 = await history(`device=${DEVICE}&limit=3&cursor=${p1.body.next}`);
    expect([...p1.body.events, ...p2.body.events]).toEqual(mine);
    expect(p2.body.next).toBeUndefined();
    expect((await history('order=newest&limit=1')).body.events.map((e) => e.type)).toEqual(['device.offline']);
    expect((await history('type=device.ready,device.offline')).body.events.map((e) => e.type)).toEqual(['device.ready', 'device.offline']);
    expect((await history(`device=${DEVICE},${OTHER.replaceAll(':', '_')}&type=device.online`)).body.events.map((e) => e.deviceId)).toEqual([DEVICE, OTHER]);
    expect((await history(`since=${encodeURIComponent(new Date(Date.now() + 60_000).toISOString())}`)).body.events).toEqual([]);
  });

  it('refuses malformed queries with 400, and callers without a key with 401', async () => {
    const { history } = await historyPart();
    const many = Array.from({ length: 101 }, (_, i) => `02:00:00:00:24:${i.toString(16).padStart(2, '0')}`).join(',');
    for (const bad of ['limit=0', 'limit=5000', 'type=device.bogus', 'device=not-a-mac', 'since=yesterday', 'cursor=abc', `device=${many}`, 'order=sideways']) {
      const r = await history(bad);
      expect([bad, r.status, r.body.code]).toEqual([bad, 400, 'INVALID_REQUEST']);
    }
    expect((await history('', {})).status).toBe(401);
  });

  it("gives a tenant's key only its devices' events", async () => {
    const { bus, history } = await historyPart();
    bus.publish('device.online', DEVICE);
    bus.publish('device.online', OTHER);
    bus.publish('job.progress', '');
    expect((await history('', bearer(TENANT_KEY))).body.events.map((e) => e.deviceId)).toEqual([DEVICE]);
    expect((await history('')).body.events.map((e) => e.deviceId)).toEqual([DEVICE, OTHER, '']);
  });
});
