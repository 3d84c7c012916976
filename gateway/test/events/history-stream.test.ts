import { spawnSync } from 'node:child_process';
import { jetstream, jetstreamManager } from '@nats-io/jetstream';
import { connect, type NatsConnection } from '@nats-io/transport-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openEventStream } from '../../src/cluster/event-stream.js';
import { ClusterSlice } from '../../src/cluster/config.js';
import { eventSubject } from '../../src/cluster/wire.js';
import type { EventType, GatewayEvent } from '../../src/events/bus.js';
import type { HistoryPage, HistoryQuery } from '../../src/events/history.js';
import { createLogger } from '../../src/log.js';
import { startNatsServer, type NatsServer } from '../../../test/support/nats-server.js';

const hasNats = spawnSync('nats-server', ['--version']).status === 0;
const A = '02:00:00:00:23:a1';
const B = '02:00:00:00:23:b2';
const T0 = Date.parse('2026-11-26T08:00:00.000Z');

/** The cluster's history: the JetStream event stream, read by filters and pages (nats-server from Debian; skipped without it). */
describe.skipIf(!hasNats)('event history over the cluster event stream (JetStream)', () => {
  let nats: NatsServer;
  let nc: NatsConnection;
  let read: (q: HistoryQuery) => Promise<HistoryPage>;
  const written: GatewayEvent[] = [];

  beforeAll(async () => {
    nats = await startNatsServer();
    nc = await connect({ servers: nats.url });
    const config = ClusterSlice.parse({ enabled: true, nats: { servers: [nats.url] }, events: { stream: 'HISTORY_TEST' } });
    const stream = await openEventStream(
      nc,
      config,
      { replayLimit: 100, history: { maxEvents: 5000, maxBytes: 64 * 1024 * 1024, maxAgeMs: 7 * 86_400_000 } },
      createLogger('silent'),
    );
    read = stream.read;
    const js = jetstream(nc);
    for (let i = 0; i < 30; i++) {
      const type: EventType = i % 3 === 0 ? 'device.online' : 'device.message';
      const e: GatewayEvent = { id: `boot1-${i + 1}`, type, deviceId: i % 2 ? B : A, at: new Date(T0 + i * 1000).toISOString(), data: { i } };
      written.push(e);
      await js.publish(eventSubject(e.deviceId, e.type), JSON.stringify({ origin: 'gw-a', ...e }));
    }
    // Junk anyone on the account could publish: skipped, never an error.
    await js.publish(eventSubject(A, 'device.message'), '{not json');
  }, 60_000);
  afterAll(async () => {
    await nc?.close();
    await nats?.stop();
  });

  async function all(q: Omit<HistoryQuery, 'cursor'>): Promise<string[]> {
    const ids: string[] = [];
    let cursor: string | undefined;
    do {
      const page = await read({ ...q, cursor });
      ids.push(...page.events.map((e) => e.id));
      cursor = page.next;
    } while (cursor !== undefined);
    return ids;
  }
  const ids = (pred: (e: GatewayEvent) => boolean) => written.filter(pred).map((e) => e.id);

  it('takes its bounds from events.history unless cluster.events sets its own', async () => {
    const info = await (await jetstreamManager(nc)).streams.info('HISTORY_TEST');
    expect(info.config.max_msgs).toBe(5000);
    expect(info.config.max_bytes).toBe(64 * 1024 * 1024);
    expect(info.config.max_age).toBe(7 * 86_400_000 * 1_000_000);
    // cluster.events.maxBytes, when set, is the stream's own (an instance opening it so updates it: the 30 events fit).
    const own = ClusterSlice.parse({ enabled: true, nats: { servers: [nats.url] }, events: { stream: 'HISTORY_TEST', maxBytes: 2 * 1024 * 1024 } });
    await openEventStream(
      nc,
      own,
      { replayLimit: 100, history: { maxEvents: 5000, maxBytes: 64 * 1024 * 1024, maxAgeMs: 7 * 86_400_000 } },
      createLogger('silent'),
    );
    expect((await (await jetstreamManager(nc)).streams.info('HISTORY_TEST')).config.max_bytes).toBe(2 * 1024 * 1024);
  });

  it('pages oldest first, filtered by device and type (one by the server, lists here) and by time', async () => {
    const first = await read({ limit: 10 });
    expect(first.events).toEqual(written.slice(0, 10));
    expect(await all({ limit: 7 })).toEqual(written.map((e) => e.id));
    expect(await all({ limit: 4, devices: new Set([B]) })).toEqual(ids((e) => e.deviceId === B));
    expect(await all({ limit: 4, types: new Set<EventType>(['device.online']) })).toEqual(ids((e) => e.type === 'device.online'));
    expect(await all({ limit: 3, devices: new Set([A]), types: new Set<EventType>(['device.online']) })).toEqual(
      ids((e) => e.deviceId === A && e.type === 'device.online'),
    );
    expect(await all({ limit: 5, devices: new Set([A, B]), types: new Set<EventType>(['device.online', 'device.message']) })).toEqual(written.map((e) => e.id));
    expect(await all({ limit: 4, since: T0 + 25_000 })).toEqual(written.slice(25).map((e) => e.id));
    expect((await read({ limit: 5, devices: new Set(['02:00:00:00:23:ff']) })).events).toEqual([]);
  });

  it('pages newest first, each `next` going back', async () => {
    const page = await read({ limit: 3, order: 'newest' });
    expect(page.events.map((e) => e.data['i'])).toEqual([29, 28, 27]);
    expect(await all({ limit: 4, order: 'newest' })).toEqual(written.map((e) => e.id).reverse());
    expect(await all({ limit: 2, order: 'newest', devices: new Set([A]) })).toEqual(ids((e) => e.deviceId === A).reverse());
    expect(await all({ limit: 2, order: 'newest', since: T0 + 26_000 })).toEqual(
      written
        .slice(26)
        .map((e) => e.id)
        .reverse(),
    );
  });
});
