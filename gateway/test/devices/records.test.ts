import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { DEVICE_FACTS_COLLECTION, DEVICE_META_COLLECTION, type RecordStore } from '../../src/devices/record-shapes.js';
import { DeviceRecords } from '../../src/devices/records.js';
import { DeviceRegistry } from '../../src/devices/registry.js';
import { ToolsPageCache } from '../../src/devices/tools-page-cache.js';
import { createMetrics } from '../../src/metrics.js';
import { SchemaValidators } from '../../src/schemas/validators.js';
import { SqliteStore } from '../../src/store/sqlite-store.js';
import { metricValue, recordingBus, silentLog, testSettings } from '../../../test/support/device-parts.js';
import { createLinkedPair } from '../../../test/support/in-memory-link.js';

const A = '02:00:00:00:23:01';
const B = '02:00:00:00:23:02';
const C = '02:00:00:00:23:03';

/** A store that counts its writes (the real SQLite store underneath). */
function counting(store: SqliteStore): RecordStore & { puts: number } {
  const s = {
    puts: 0,
    put: (c: string, k: string, v: unknown) => {
      s.puts++;
      return store.put(c, k, v);
    },
    putMany: (c: string, entries: ReadonlyArray<{ key: string; value: unknown }>) => {
      s.puts += entries.length;
      return store.putMany(c, entries);
    },
    delete: (c: string, k: string) => store.delete(c, k),
    list: (c: string) => store.list(c),
  };
  return s;
}

describe('device records (issue 23: a registry that lasts)', () => {
  let dir: string;
  let path: string;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'voxgate-records-'));
    path = join(dir, 'voxgate.db');
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  const open = async (store: RecordStore, lastSeenWriteMs = 60_000) => {
    const records = new DeviceRecords({ log: silentLog, lastSeenWriteMs });
    await records.attach(store);
    return records;
  };

  it('keeps what a device said and what people gave it across a reopen of the store', async () => {
    let store = new SqliteStore(path);
    let records = await open(store);
    records.admitted(A, { clientId: 'uuid-a', transport: 'mqtt', at: 1_000 });
    records.ready(A, { catalogHash: 'h1', toolCount: 7, server: { name: 'xiaozhi', version: '1.7.6' } });
    records.reported(A, { board: 'bread-compact-wifi', firmware: '9.9.9' });
    expect(await records.setMeta(A, { name: 'Kitchen speaker', room: 'kitchen', tags: ['audio', 'audio', 'floor:1'] })).toMatchObject({
      tags: ['audio', 'floor:1'],
    });
    expect(await records.setMeta(B, { name: 'never seen' })).toBeUndefined();
    await records.close();
    await store.close();

    store = new SqliteStore(path);
    records = await open(store);
    expect(records.getFacts(A)).toEqual({
      clientId: 'uuid-a',
      transport: 'mqtt',
      // The device's own initialize answer wins over the open OTA endpoint's report for the firmware.
      board: 'bread-compact-wifi',
      firmware: '1.7.6',
      firstSeen: 1_000,
      lastSeen: 1_000,
      connectedAt: 1_000,
      catalogHash: 'h1',
      toolCount: 7,
      server: { name: 'xiaozhi', version: '1.7.6' },
    });
    expect(records.getMeta(A)).toEqual({ name: 'Kitchen speaker', room: 'kitchen', tags: ['audio', 'floor:1'], tenant: null });
    expect(records.has(B)).toBe(false);
    // Clearing every field removes the metadata document: the device is no longer "named".
    await records.setMeta(A, { name: null, room: null, tags: [] });
    expect(records.isNamed(A)).toBe(false);
    expect(await store.list(DEVICE_META_COLLECTION)).toEqual([]);
    await records.close();
    await store.close();
  });

  it('writes last seen at most once per sweep period, only when traffic moved it, and once more at disconnect', async () => {
    const sqlite = new SqliteStore(path);
    const store = counting(sqlite);
    const records = await open(store);
    records.admitted(A, { clientId: A, transport: 'websocket', at: 1_000 });
    await records.close(); // settles the write under way
    expect(store.puts).toBe(1);
    // A reconnect soon after says nothing new: no write.
    records.admitted(A, { clientId: A, transport: 'websocket', at: 2_000 });
    await records.close();
    expect(store.puts).toBe(1);

    const live = { deviceId: A, lastSeenAt: 5_000 };
    expect(await records.sweep([live])).toBe(1);
    expect(await records.sweep([live])).toBe(0); // nothing moved since
    live.lastSeenAt = 6_000; // a keepalive
    expect(await records.sweep([live])).toBe(1);
    expect(store.puts).toBe(3);
    records.closed(A, 6_500);
    await records.close();
    expect(store.puts).toBe(4);
    expect(((await sqlite.get(DEVICE_FACTS_COLLECTION, A)) as { lastSeen: number }).lastSeen).toBe(6_500);
    await sqlite.close();
  });

  it("holds a new device's first write until it is ready (one write, not two), at most a few seconds", async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'Date'] });
    try {
      const sqlite = new SqliteStore(path);
      const store = counting(sqlite);
      const records = await open(store);
      records.admitted(A, { clientId: A, transport: 'websocket', at: Date.now() });
      await vi.advanceTimersByTimeAsync(1_000); // batches ran meanwhile: A is still in setup
      expect(store.puts).toBe(0);
      records.ready(A, { catalogHash: 'h1', toolCount: 7, server: { name: 'xiaozhi', version: '1.7.6' } });
      await vi.advanceTimersByTimeAsync(1_000);
      expect(store.puts).toBe(1);
      expect(await sqlite.get(DEVICE_FACTS_COLLECTION, A)).toMatchObject({ catalogHash: 'h1', toolCount: 7, firmware: '1.7.6' });
      // A device that never gets ready is written all the same once the hold is over.
      records.admitted(B, { clientId: B, transport: 'websocket', at: Date.now() });
      await vi.advanceTimersByTimeAsync(1_000);
      expect(store.puts).toBe(1);
      await vi.advanceTimersByTimeAsync(5_000);
      expect(store.puts).toBe(2);
      expect(await sqlite.get(DEVICE_FACTS_COLLECTION, B)).toMatchObject({ clientId: B, catalogHash: null });
      // A device that leaves during its setup is written at once; so is one still held when the records close.
      records.admitted(C, { clientId: C, transport: 'websocket', at: Date.now() });
      records.closed(C, Date.now());
      await vi.advanceTimersByTimeAsync(1_000);
      expect(store.puts).toBe(3);
      records.admitted('02:00:00:00:23:04', { clientId: 'd', transport: 'mqtt', at: Date.now() });
      await records.close();
      expect(store.puts).toBe(4);
      await sqlite.close();
    } finally {
      vi.useRealTimers();
    }
  });

  it('drops the disconnect write of a device that re-dials within a few seconds (a reconnect storm)', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'Date'] });
    try {
      const sqlite = new SqliteStore(path);
      const store = counting(sqlite);
      const records = await open(store);
      records.admitted(A, { clientId: A, transport: 'websocket', at: Date.now() });
      records.ready(A, { catalogHash: 'h1', toolCount: 7, server: { name: 'xiaozhi', version: '1.7.6' } });
      await vi.advanceTimersByTimeAsync(1_000);
      expect(store.puts).toBe(1);
      // Dropped and back within the batch: nothing to write (its last seen goes out with the sweep, like any live device's).
      records.closed(A, Date.now());
      records.admitted(A, { clientId: A, transport: 'websocket', at: Date.now() });
      await vi.advanceTimersByTimeAsync(1_000);
      expect(store.puts).toBe(1);
      expect(await records.sweep([{ deviceId: A, lastSeenAt: Date.now() }])).toBe(1);
      expect(store.puts).toBe(2);
      // Back a few batches later (a storm's re-dials take seconds): still nothing to write.
      await vi.advanceTimersByTimeAsync(1_000);
      records.closed(A, Date.now());
      await vi.advanceTimersByTimeAsync(3_000);
      records.admitted(A, { clientId: A, transport: 'websocket', at: Date.now() });
      await vi.advanceTimersByTimeAsync(6_000);
      expect(store.puts).toBe(2);
      // A disconnect that is not followed by a re-dial is written, once the hold is over.
      const leftAt = Date.now();
      records.closed(A, leftAt);
      await vi.advanceTimersByTimeAsync(1_000);
      expect(store.puts).toBe(2);
      await vi.advanceTimersByTimeAsync(5_000);
      expect(store.puts).toBe(3);
      expect(((await sqlite.get(DEVICE_FACTS_COLLECTION, A)) as { lastSeen: number }).lastSeen).toBe(leftAt);
      await records.close();
      await sqlite.close();
    } finally {
      vi.useRealTimers();
    }
  });

  it('skips unreadable documents from the store', async () => {
    const store = new SqliteStore(path);
    await store.put(DEVICE_FACTS_COLLECTION, A, { clientId: 42 });
    await store.put(DEVICE_META_COLLECTION, B, { name: 'x'.repeat(1000) });
    const records = await open(store);
    expect(records.size).toBe(0);
    await records.close();
    await store.close();
  });

  it('measures the store bytes per device record (facts + metadata)', async () => {
    const store = new SqliteStore(path);
    const records = await open(store);
    const before = statSync(path).size + walSize(path);
    const N = 300;
    for (let i = 0; i < N; i++) {
      const id = `02:00:00:01:${hex(i >> 8)}:${hex(i & 0xff)}`;
      records.admitted(id, { clientId: `0b7e3a52-6f1c-4c2e-9d7a-${String(i).padStart(12, '0')}`, transport: 'websocket', at: Date.now() });
      records.ready(id, { catalogHash: 'K3u9Wg0cJXbQ2mT5o1aZrQ', toolCount: 12, server: { name: 'xiaozhi', version: '1.7.6' } });
      records.reported(id, { board: 'bread-compact-wifi', firmware: undefined });
      await records.setMeta(id, { name: `Speaker ${i}`, room: 'living room', tags: ['audio', 'floor:1'] });
    }
    await records.close();
    const facts = JSON.stringify((await store.list(DEVICE_FACTS_COLLECTION))[0]!.value).length;
    const meta = JSON.stringify((await store.list(DEVICE_META_COLLECTION))[0]!.value).length;
    await store.close(); // checkpoints the WAL into the file
    const perDevice = (statSync(path).size + walSize(path) - before) / N;
    console.log(`device record: ${facts} B facts + ${meta} B metadata JSON; SQLite file growth ${perDevice.toFixed(0)} B per device`);
    expect(facts + meta).toBeLessThan(600);
    expect(perDevice).toBeLessThan(2048);
  });

  describe('with the registry', () => {
    const build = (records: DeviceRecords, maxKnownDevices = 100) => {
      const metrics = createMetrics();
      const { bus, events } = recordingBus();
      const registry = new DeviceRegistry({
        ...{ maxKnownDevices, log: silentLog, bus, metrics, settings: testSettings(), vision: () => undefined },
        ...{ pages: new ToolsPageCache(), validators: new SchemaValidators({ limits: testSettings().schemaLimits, maxCached: 16 }), records },
      });
      return { registry, metrics, events };
    };
    const connect = (registry: DeviceRegistry, deviceId: string) => {
      const [link, device] = createLinkedPair('mqtt');
      const session = registry.connect({ deviceId, clientId: `c-${deviceId}`, link, expectHello: false })!;
      link.receiver = session;
      return { link, device, session };
    };

    it('lists recorded devices offline after a restart, with their names, and filters on them', async () => {
      let store = new SqliteStore(path);
      let records = await open(store);
      let { registry } = build(records);
      const a = connect(registry, A);
      connect(registry, B);
      await records.setMeta(A, { name: 'Kitchen speaker', room: 'Kitchen', tags: ['audio'] });
      const seen = a.session.lastSeenAt;
      a.device.disconnect();
      await new Promise((resolve) => setImmediate(resolve));
      expect(registry.get(A)?.online).toBe(false);
      await records.close();
      await store.close();

      store = new SqliteStore(path);
      records = await open(store);
      ({ registry } = build(records));
      registry.restoreRecords();
      const listed = registry.get(A)!;
      expect(listed).toMatchObject({ id: A, online: false, state: 'offline', name: 'Kitchen speaker', room: 'Kitchen', tags: ['audio'], transport: 'mqtt' });
      expect(Date.parse(listed.lastSeenAt)).toBeGreaterThanOrEqual(seen);
      expect(registry.page({}, { limit: 10 }).devices.map((d) => d.id)).toEqual([A, B]);
      expect(registry.page({ room: 'kitchen' }, { limit: 10 }).devices.map((d) => d.id)).toEqual([A]);
      expect(registry.page({ name: 'SPEAK' }, { limit: 10 }).devices.map((d) => d.id)).toEqual([A]);
      expect(registry.page({ tags: ['audio', 'floor:1'] }, { limit: 10 }).devices).toEqual([]);
      expect(() => registry.session(A)).toThrow(/offline/);
      // Dialing back: the same record, online again, still named.
      connect(registry, A);
      expect(registry.get(A)).toMatchObject({ online: true, name: 'Kitchen speaker' });
      expect(registry.page({}, { limit: 10 }).devices.map((d) => d.id)).toEqual([A, B]);
      await records.close();
      await store.close();
    });

    it('forgets a device: its documents, its listing, and its live connection', async () => {
      const store = new SqliteStore(path);
      const records = await open(store);
      const { registry, events } = build(records);
      const a = connect(registry, A);
      await records.setMeta(A, { name: 'Lamp' });
      expect(await registry.forget(A)).toBe(true);
      expect(a.link.closed?.code).toBe(4006);
      expect(registry.get(A)).toBeUndefined();
      expect(registry.ids()).toEqual([]);
      expect(events.filter((e) => e.type === 'device.offline').map((e) => e.deviceId)).toEqual([A]);
      await records.close();
      expect(await store.list(DEVICE_FACTS_COLLECTION)).toEqual([]);
      expect(await store.list(DEVICE_META_COLLECTION)).toEqual([]);
      expect(await registry.forget(A)).toBe(false);
      await store.close();
    });

    it('past devices.maxKnown forgets unnamed offline devices (from the store too), never a named one', async () => {
      const store = new SqliteStore(path);
      const records = await open(store);
      const { registry, metrics } = build(records, 2);
      const a = connect(registry, A);
      const b = connect(registry, B);
      await records.setMeta(A, { room: 'hall' });
      a.device.disconnect();
      b.device.disconnect();
      await new Promise((resolve) => setImmediate(resolve));
      connect(registry, C);
      expect(registry.ids()).toEqual([A, C]);
      await records.close();
      expect((await store.list(DEVICE_FACTS_COLLECTION)).map((r) => r.key)).toEqual([A, C]);
      expect(await metricValue(metrics, 'voxgate_devices_known')).toBe(2);
      await store.close();
    });
  });
});

function hex(n: number): string {
  return n.toString(16).padStart(2, '0');
}

function walSize(db: string): number {
  try {
    return statSync(`${db}-wal`).size;
  } catch {
    return 0;
  }
}
