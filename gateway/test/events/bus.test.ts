import pino from 'pino';
import { describe, expect, it } from 'vitest';
import { EventBus, eventJson, sseFrame, type GatewayEvent } from '../../src/events/bus.js';
import { createMetrics } from '../../src/metrics.js';
import { metricValue } from '../../../test/support/device-parts.js';

const A = '02:00:00:00:00:0a';
const B = '02:00:00:00:00:0b';

describe('EventBus', () => {
  it('gives each event an id of this boot, increasing, and delivers it to every listener in order', () => {
    const bus = new EventBus({ bufferSize: 10, boot: 'boot1' });
    const seen: string[] = [];
    bus.subscribe((e) => seen.push(`1:${e.id}`));
    const off = bus.subscribe((e) => seen.push(`2:${e.id}`));
    expect(bus.lastId).toBe('boot1-0');
    const e = bus.publish('device.online', A, { transport: 'mqtt' })!;
    expect(e).toMatchObject({ id: 'boot1-1', type: 'device.online', deviceId: A, data: { transport: 'mqtt' } });
    expect(Date.parse(e.at)).toBeGreaterThan(0);
    off();
    bus.publish('device.ready', A);
    expect(seen).toEqual(['1:boot1-1', '2:boot1-1', '1:boot1-2']);
    expect(bus.lastId).toBe('boot1-2');
  });

  it('keeps delivering when a listener throws, and logs it', () => {
    const lines: string[] = [];
    const bus = new EventBus({ bufferSize: 10, log: pino({ level: 'error' }, { write: (l: string) => void lines.push(l) }) });
    const got: string[] = [];
    bus.subscribe(() => {
      throw new Error('a broken listener');
    });
    bus.subscribe((e) => got.push(e.type));
    bus.publish('device.online', A);
    expect(got).toEqual(['device.online']);
    expect(lines.some((l) => l.includes('event listener failed'))).toBe(true);
  });

  it('replays what came after an id it holds, and says why when it cannot', () => {
    const bus = new EventBus({ bufferSize: 3, boot: 'b' });
    for (let i = 0; i < 5; i++) bus.publish('device.notification', A, { i });
    expect(bus.since('b-3')).toEqual({ events: [expect.objectContaining({ id: 'b-4' }), expect.objectContaining({ id: 'b-5' })] });
    expect(bus.since('b-5')).toEqual({ events: [] });
    // b-1 fell out of the ring of 3 (b-3..b-5 are kept; b-2 is the last one a client may resume after).
    expect(bus.since('b-2')).toMatchObject({ events: [{ id: 'b-3' }, { id: 'b-4' }, { id: 'b-5' }] });
    expect(bus.since('b-1')).toEqual({ resync: 'expired' });
    for (const stale of ['other-3', 'b-6', 'b-x', '', 'b-99999999999999999999', `${'z'.repeat(40)}-1`])
      expect([stale, bus.since(stale)]).toEqual([stale, { resync: 'unknown_id' }]);
  });

  it('keeps nothing for replay with a buffer of 0, and still delivers', () => {
    const bus = new EventBus({ bufferSize: 0, boot: 'b' });
    const got: GatewayEvent[] = [];
    bus.subscribe((e) => got.push(e));
    bus.publish('device.online', A);
    expect(got).toHaveLength(1);
    expect(bus.since('b-0')).toEqual({ resync: 'expired' });
  });

  it('drops device-driven events over a device’s rate, counts them, and starts the device afresh when it goes offline', async () => {
    const metrics = createMetrics();
    const bus = new EventBus({ bufferSize: 100, metrics, deviceRate: { ratePerSecond: 0.001, burst: 2 } });
    const passed = (type: 'device.message' | 'device.notification' | 'device.photo' | 'device.ready', id = A) => bus.publish(type, id) !== undefined;
    expect([passed('device.message'), passed('device.notification'), passed('device.photo')]).toEqual([true, true, false]);
    // Another device has its own budget; events a device does not drive are never limited.
    expect(passed('device.message', B)).toBe(true);
    expect(passed('device.ready')).toBe(true);
    expect(await metricValue(metrics, 'voxgate_events_dropped_total', { reason: 'device_rate' })).toBe(1);
    bus.publish('device.offline', A);
    expect(passed('device.message')).toBe(true);
    expect(await metricValue(metrics, 'voxgate_events_total', { type: 'device.message' })).toBe(3);
  });

  it('keeps a relayed event’s own id and time', () => {
    const bus = new EventBus({ bufferSize: 10, boot: 'here' });
    const e = bus.publish('device.online', A, {}, { id: 'there-7', at: '2026-11-26T08:00:00.000Z' })!;
    expect([e.id, e.at]).toEqual(['there-7', '2026-11-26T08:00:00.000Z']);
  });

  it('records the tenant each event is published under (its device’s then, or the one the publisher names), never on the wire', () => {
    const tenants = new Map([[A, 'acme']]);
    const bus = new EventBus({ bufferSize: 10, tenantOf: (id) => tenants.get(id) });
    const before = bus.publish('device.online', A)!;
    tenants.set(A, 'globex');
    const after = bus.publish('device.ready', A)!;
    // A queued call's event is its caller's tenant's (null: none), whoever has the device now.
    const named = bus.publish('call.state', A, { callId: 'c' }, { tenant: 'acme' })!;
    const none = bus.publish('call.state', A, { callId: 'd' }, { tenant: null })!;
    expect([before, after, named, none, bus.publish('device.online', B)!].map((e) => e.tenant)).toEqual(['acme', 'globex', 'acme', undefined, undefined]);
    // The ring keeps it for a Last-Event-ID replay.
    const replay = bus.since(before.id);
    expect('events' in replay && replay.events.map((e) => e.tenant)).toEqual(['globex', 'acme', undefined, undefined]);
    expect(JSON.parse(eventJson(before))).toEqual({ id: before.id, type: 'device.online', deviceId: A, at: before.at, data: {} });
    expect(sseFrame(named)).not.toContain('acme');
  });
});

describe('eventJson and sseFrame', () => {
  const event = (data: Record<string, unknown>): GatewayEvent => ({
    id: 'b-1',
    type: 'device.notification',
    deviceId: A,
    at: '2026-11-26T08:00:00.000Z',
    data,
  });

  it('serialize once per event, however often asked', () => {
    let reads = 0;
    const e = event({
      get probe() {
        reads++;
        return 1;
      },
    });
    const first = eventJson(e);
    expect(eventJson(e)).toBe(first);
    expect(sseFrame(e)).toBe(`id: b-1\nevent: device.notification\ndata: ${first}\n\n`);
    expect(sseFrame(e)).toBe(sseFrame(e));
    expect(reads).toBe(1);
  });

  it('never throw on data that cannot be serialized', () => {
    const cyclic: Record<string, unknown> = {};
    cyclic['self'] = cyclic;
    expect(JSON.parse(eventJson(event(cyclic)))).toMatchObject({ id: 'b-1', data: { unserializable: true } });
    expect(JSON.parse(eventJson(event({ big: 10n })))).toMatchObject({ data: { unserializable: true } });
  });
});
