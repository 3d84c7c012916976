import { describe, expect, it } from 'vitest';
import { until } from '../../../test/support/wait.js';
import { CALLS_COLLECTION } from '../../src/fleet/queued-calls.js';
import { GatewayError, mac, rigsPerTest, type Rig } from './fleet-parts.js';

describe('queued calls (real SqliteStore, fake devices)', () => {
  const { rig, dir, forget } = rigsPerTest();

  const finished = (r: Rig, callId: string) =>
    r.fake.event((e) => e.type === 'call.state' && e.data['callId'] === callId && !['queued', 'sent'].includes(e.data['state'] as string));

  it('waits for an offline device and delivers when it is ready; every state change is an event', async () => {
    const r = await rig(dir());
    const id = mac(1);
    r.fake.add(id);
    const c = await r.fleet.calls.enqueue({ deviceId: id, tool: 'self.audio_speaker.set_volume', arguments: { volume: 30 } });
    expect(c).toMatchObject({ state: 'queued', deviceId: id, tool: 'self.audio_speaker.set_volume', arguments: { volume: 30 } });
    expect(Date.parse(c.expiresAt) - Date.parse(c.createdAt)).toBe(86_400_000);
    expect(r.fake.devices.get(id)!.ran).toEqual([]);

    r.fake.connect(id);
    await finished(r, c.id);
    const done = r.fleet.calls.get(c.id)!;
    expect(done.state).toBe('succeeded');
    expect(done.result).toMatchObject({ isError: false, content: [{ type: 'text', text: 'ok' }] });
    const states = r.fake.events.filter((e) => e.type === 'call.state' && e.data['callId'] === c.id);
    expect(states.map((e) => e.data['state'])).toEqual(['queued', 'sent', 'succeeded']);
    expect(states.every((e) => e.deviceId === id)).toBe(true);
    // And what the store holds says the same.
    expect(await r.store.get(CALLS_COLLECTION, c.id)).toMatchObject({ state: 'succeeded', result: { isError: false } });
  });

  it('delivers at once to a device that is ready now, and in order, one at a time', async () => {
    const r = await rig(dir());
    const id = mac(2);
    const d = r.fake.add(id, { ready: true });
    const calls = [];
    for (let i = 0; i < 5; i++) calls.push(await r.fleet.calls.enqueue({ deviceId: id, tool: 't', arguments: { n: i } }));
    await finished(r, calls[4]!.id);
    expect(d.ran.map((x) => x.args['n'])).toEqual([0, 1, 2, 3, 4]);
    expect(r.fake.maxInFlight).toBe(1);
  });

  it('keeps queued calls across a restart, and never sends a call left `sent` again (CALL_INTERRUPTED)', async () => {
    const folder = dir();
    const first = await rig(folder);
    const [a, b] = [mac(3), mac(4)];
    first.fake.add(a);
    const dev = first.fake.add(b, { ready: true, hold: true });
    const waiting = await first.fleet.calls.enqueue({ deviceId: a, tool: 'later', arguments: {} });
    const inFlight = await first.fleet.calls.enqueue({ deviceId: b, tool: 'now', arguments: {} });
    await until(() => dev.ran.length === 1, 'the device got the call');
    // The process dies while the device holds the call: nothing more is written, the store is let go.
    forget(first);
    await first.store.close();

    const second = await rig(folder);
    second.fake.add(a);
    const again = second.fake.add(b, { ready: true });
    expect(second.fleet.calls.get(waiting.id)).toMatchObject({ state: 'queued' });
    expect(second.fleet.calls.get(inFlight.id)).toMatchObject({ state: 'failed', error: { code: 'CALL_INTERRUPTED' } });
    second.fake.connect(a);
    await finished(second, waiting.id);
    expect(second.fleet.calls.get(waiting.id)!.state).toBe('succeeded');
    expect(again.ran).toEqual([]);
  });

  it('cancels a queued call; a finished or sent one answers 409 CALL_FINISHED', async () => {
    const r = await rig(dir());
    const id = mac(5);
    r.fake.add(id);
    const c = await r.fleet.calls.enqueue({ deviceId: id, tool: 't', arguments: {} });
    expect((await r.fleet.calls.cancel(c.id)).state).toBe('cancelled');
    await expect(r.fleet.calls.cancel(c.id)).rejects.toMatchObject({ code: 'CALL_FINISHED' });
    await expect(r.fleet.calls.cancel('call_nope')).rejects.toMatchObject({ code: 'NOT_FOUND' });
    r.fake.connect(id);
    expect(r.fake.devices.get(id)!.ran).toEqual([]);

    const held = r.fake.add(mac(6), { ready: true, hold: true });
    const s = await r.fleet.calls.enqueue({ deviceId: held.id, tool: 't', arguments: {} });
    await r.fake.event((e) => e.data['callId'] === s.id && e.data['state'] === 'sent');
    await expect(r.fleet.calls.cancel(s.id)).rejects.toMatchObject({ code: 'CALL_FINISHED', extra: { state: 'sent' } });
    held.held.splice(0).forEach((f) => f());
    await finished(r, s.id);
  });

  it('expires calls past their ttl, and forgets finished ones past the retention bounds', async () => {
    let now = Date.parse('2026-11-26T00:00:00Z');
    const r = await rig(dir(), { now: () => now, config: { keepFinished: 2 } });
    const id = mac(7);
    r.fake.add(id);
    const calls = [];
    for (let i = 0; i < 4; i++) calls.push(await r.fleet.calls.enqueue({ deviceId: id, tool: 't', arguments: {}, ttlMs: 1000 + i }));
    now += 1001;
    expect(await r.fleet.calls.sweep()).toMatchObject({ expired: 2 });
    expect(r.fleet.calls.get(calls[0]!.id)).toMatchObject({ state: 'expired', error: { code: 'CALL_EXPIRED' } });
    expect(r.fleet.calls.get(calls[2]!.id)!.state).toBe('queued');
    now += 10;
    // Two more expire: four finished, two kept (the newest).
    const swept = await r.fleet.calls.sweep();
    expect(swept).toMatchObject({ expired: 2, forgotten: 2 });
    expect(r.fleet.calls.get(calls[0]!.id)).toBeUndefined();
    expect(await r.store.get(CALLS_COLLECTION, calls[0]!.id)).toBeUndefined();
    expect(r.fleet.calls.forDevice(id, { limit: 10 }).calls.map((c) => c.id)).toEqual([calls[2]!.id, calls[3]!.id]);
  });

  it('bounds the queue per device and in total (429 QUEUE_FULL), and the size of arguments', async () => {
    const r = await rig(dir(), { config: { maxQueuedPerDevice: 2, maxQueuedTotal: 3, maxArgumentsBytes: 64 } });
    const [a, b] = [mac(8), mac(9)];
    await r.fleet.calls.enqueue({ deviceId: a, tool: 't', arguments: {} });
    await r.fleet.calls.enqueue({ deviceId: a, tool: 't', arguments: {} });
    await expect(r.fleet.calls.enqueue({ deviceId: a, tool: 't', arguments: {} })).rejects.toMatchObject({ code: 'QUEUE_FULL' });
    await r.fleet.calls.enqueue({ deviceId: b, tool: 't', arguments: {} });
    await expect(r.fleet.calls.enqueue({ deviceId: b, tool: 't', arguments: {} })).rejects.toMatchObject({ code: 'QUEUE_FULL' });
    await expect(r.fleet.calls.enqueue({ deviceId: mac(10), tool: 't', arguments: { x: 'y'.repeat(100) } })).rejects.toMatchObject({
      code: 'PAYLOAD_TOO_LARGE',
    });
    expect(r.fleet.calls.unfinishedCount).toBe(3);
  });

  it("bounds what one tenant's keys queue (maxQueuedPerTenant), so one tenant cannot fill the total every tenant shares", async () => {
    const r = await rig(dir(), { config: { maxQueuedPerDevice: 10, maxQueuedTotal: 10, maxQueuedPerTenant: 3 } });
    const acme = [mac(13), mac(14)];
    const queued = [];
    for (let i = 0; i < 3; i++) queued.push(await r.fleet.calls.enqueue({ deviceId: acme[i % 2]!, tool: 't', arguments: {}, tenant: 'acme' }));
    await expect(r.fleet.calls.enqueue({ deviceId: acme[0]!, tool: 't', arguments: {}, tenant: 'acme' })).rejects.toMatchObject({ code: 'QUEUE_FULL' });
    // Another tenant, and an operator, still have room.
    await r.fleet.calls.enqueue({ deviceId: mac(15), tool: 't', arguments: {}, tenant: 'globex' });
    await r.fleet.calls.enqueue({ deviceId: mac(16), tool: 't', arguments: {} });
    // A finished call gives its room back.
    await r.fleet.calls.cancel(queued[0]!.id);
    await r.fleet.calls.enqueue({ deviceId: acme[0]!, tool: 't', arguments: {}, tenant: 'acme' });
    expect(r.fleet.calls.unfinishedCount).toBe(5);
  });

  it('a tool error is `failed` with its result; a device too busy gets the call back `queued` and tried again', async () => {
    const r = await rig(dir());
    const bad = r.fake.add(mac(11), { ready: true, fails: true });
    const c = await r.fleet.calls.enqueue({ deviceId: bad.id, tool: 't', arguments: {} });
    await finished(r, c.id);
    expect(r.fleet.calls.get(c.id)).toMatchObject({ state: 'failed', error: { code: 'TOOL_ERROR', message: 'refused' }, result: { isError: true } });

    const busy = r.fake.add(mac(12), { ready: true, throws: new GatewayError('DEVICE_BUSY', 'busy') });
    const b = await r.fleet.calls.enqueue({ deviceId: busy.id, tool: 't', arguments: {} });
    await r.fake.event((e) => e.data['callId'] === b.id && e.data['state'] === 'sent');
    await r.fake.event(
      (e) => e.data['callId'] === b.id && e.data['state'] === 'queued' && r.fleet.calls.get(b.id)!.state === 'queued' && busy.ran.length === 1,
    );
    busy.throws = undefined;
    await finished(r, b.id);
    expect(r.fleet.calls.get(b.id)!.state).toBe('succeeded');
    expect(busy.ran.length).toBe(2);

    const slow = r.fake.add(mac(13), { ready: true, throws: new GatewayError('DEVICE_TIMEOUT', 'no answer in 30000 ms') });
    const t = await r.fleet.calls.enqueue({ deviceId: slow.id, tool: 't', arguments: {} });
    await finished(r, t.id);
    expect(r.fleet.calls.get(t.id)).toMatchObject({ state: 'failed', error: { code: 'DEVICE_TIMEOUT' } });
  });
});
