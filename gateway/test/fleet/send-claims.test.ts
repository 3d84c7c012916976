import { describe, expect, it } from 'vitest';
import { until as untilSoon } from '../../../test/support/wait.js';
import { CALLS_COLLECTION } from '../../src/fleet/queued-calls.js';
import { SEND_CLAIMS_COLLECTION } from '../../src/fleet/send-claims.js';
import type { QueuedCall } from '../../src/fleet/types.js';
import { GatewayError, mac, rigsPerTest, SharedMemoryStore, startRig, type Rig } from './fleet-parts.js';

/**
 * Two instances (two fleets, each with its own fake devices) over one shared store, as in a cluster during
 * a takeover: both see the device ready with the call still `queued` in their memory. The send claim
 * (put-if-absent) lets exactly one of them send it.
 */
/** A hang guard only (a busy machine): every wait is for a state, never a time. */
const until = (check: Parameters<typeof untilSoon>[0], what: string) => untilSoon(check, what, 45_000);

describe('queued-call send claims (two delivery loops on one shared store)', () => {
  const { keep } = rigsPerTest();

  const pair = async (o: { soleSender?: boolean; keepFinished?: number } = {}) => {
    const shared = new SharedMemoryStore();
    const opts = { soleSender: o.soleSender ?? false, config: o.keepFinished === undefined ? {} : { keepFinished: o.keepFinished } };
    const a = await startRig('', { ...opts, store: shared.view() });
    const b = await startRig('', { ...opts, store: shared.view() });
    keep(a, b);
    return { shared, a, b };
  };
  /** Queue one call per device via A while the devices are offline everywhere; resolves once B knows them all. */
  const queueOffline = async (a: Rig, b: Rig, n: number) => {
    const ids = Array.from({ length: n }, (_, i) => mac(100 + i));
    for (const id of ids) {
      a.fake.add(id);
      b.fake.add(id);
    }
    const calls: QueuedCall[] = [];
    for (const id of ids) calls.push(await a.fleet.calls.enqueue({ deviceId: id, tool: 'self.light.on', arguments: { n: id } }));
    await until(() => calls.every((c) => b.fleet.calls.get(c.id)?.state === 'queued'), 'B heard of every call');
    return { ids, calls };
  };
  const runs = (r: Rig, id: string) => r.fake.devices.get(id)!.ran.length;

  it('both instances see the device ready at once: each call is sent exactly once, and both read it succeeded', async () => {
    const { shared, a, b } = await pair();
    const { ids, calls } = await queueOffline(a, b, 20);
    for (const id of ids) {
      a.fake.devices.get(id)!.ready = true;
      b.fake.devices.get(id)!.ready = true;
    }
    // The same turn: both delivery loops find the head `queued` and race for it (who kicks first alternates).
    ids.forEach((id, i) => {
      const [first, second] = i % 2 ? [b, a] : [a, b];
      first.fleet.delivery.kick(id);
      second.fleet.delivery.kick(id);
    });
    await until(
      () => calls.every((c) => a.fleet.calls.get(c.id)?.state === 'succeeded' && b.fleet.calls.get(c.id)?.state === 'succeeded'),
      'every call succeeded, as both instances read it',
    );
    for (const id of ids) expect(runs(a, id) + runs(b, id)).toBe(1);
    // Both instances won some.
    expect(ids.some((id) => runs(a, id) === 1) && ids.some((id) => runs(b, id) === 1)).toBe(true);
    for (const c of calls) expect(shared.docs.has(`${SEND_CLAIMS_COLLECTION}\u0000${c.id}`)).toBe(true);
  });

  it('without claims (each instance thinking itself the sole sender) the same race sends a call twice', async () => {
    const { a, b } = await pair({ soleSender: true });
    const { ids, calls } = await queueOffline(a, b, 1);
    const id = ids[0]!;
    a.fake.devices.get(id)!.ready = true;
    b.fake.devices.get(id)!.ready = true;
    a.fleet.delivery.kick(id);
    b.fleet.delivery.kick(id);
    await until(() => runs(a, id) + runs(b, id) === 2 && a.fleet.calls.get(calls[0]!.id)?.state === 'succeeded', 'both sent it');
  });

  it('a call put back unsent (device busy) is released, and the instance that holds the device next sends it', async () => {
    const { a, b } = await pair();
    const { ids, calls } = await queueOffline(a, b, 1);
    const id = ids[0]!;
    const onA = a.fake.devices.get(id)!;
    onA.throws = new GatewayError('DEVICE_BUSY', 'busy');
    onA.hold = true;
    a.fake.connect(id);
    await until(() => onA.held.length === 1, 'A sent it');
    // The device leaves A while A's call is refused as busy (it never ran): A puts it back.
    onA.ready = false;
    onA.held.splice(0).forEach((answer) => answer());
    await until(() => b.fleet.calls.get(calls[0]!.id)?.state === 'queued', 'A put it back');
    await until(async () => (await a.store.get(SEND_CLAIMS_COLLECTION, calls[0]!.id)) === undefined, 'the claim released');
    b.fake.connect(id);
    await until(() => a.fleet.calls.get(calls[0]!.id)?.state === 'succeeded', 'B delivered it');
    expect(runs(b, id)).toBe(1);
    expect(runs(a, id)).toBe(1);
  });

  it('a claim whose holder died before writing `sent` fails the call CALL_INTERRUPTED: it is never sent again', async () => {
    const { a, b } = await pair();
    const { ids, calls } = await queueOffline(a, b, 1);
    const id = ids[0]!;
    expect(await a.store.create!(SEND_CLAIMS_COLLECTION, calls[0]!.id, { at: '2020-01-01T00:00:00.000Z' })).toBe(true);
    b.fake.connect(id);
    await until(() => a.fleet.calls.get(calls[0]!.id)?.state === 'failed', 'the call failed');
    expect(b.fleet.calls.get(calls[0]!.id)).toMatchObject({ state: 'failed', error: { code: 'CALL_INTERRUPTED' } });
    expect(runs(b, id)).toBe(0);
  });

  it('a finished call forgotten by retention takes its claim with it', async () => {
    const { a, b } = await pair({ keepFinished: 0 });
    const { ids, calls } = await queueOffline(a, b, 1);
    b.fake.connect(ids[0]!);
    await until(() => a.fleet.calls.get(calls[0]!.id)?.state === 'succeeded', 'delivered');
    await b.fleet.calls.sweep();
    expect(await a.store.get(CALLS_COLLECTION, calls[0]!.id)).toBeUndefined();
    expect(await a.store.get(SEND_CLAIMS_COLLECTION, calls[0]!.id)).toBeUndefined();
  });

  it('a cancel races a send on another instance: whoever holds the claim wins, so a cancelled call is never run', async () => {
    const { shared, a, b } = await pair();
    const { ids, calls } = await queueOffline(a, b, 2);
    const [sending, cancelling] = calls;
    // B holds the claim of the first call (it is between claiming and writing `sent`): A's cancel must not win.
    expect(await shared.view().create!(SEND_CLAIMS_COLLECTION, sending!.id, { at: new Date().toISOString() })).toBe(true);
    await expect(a.fleet.calls.cancel(sending!.id)).rejects.toMatchObject({ code: 'CALL_FINISHED' });
    expect(a.fleet.calls.get(sending!.id)?.state).toBe('queued');
    // A cancels the second call first: it takes the claim, so B, seeing the device ready, cannot send it.
    expect((await a.fleet.calls.cancel(cancelling!.id)).state).toBe('cancelled');
    b.fake.devices.get(ids[1]!)!.ready = true;
    b.fleet.delivery.kick(ids[1]!);
    await until(() => b.fleet.calls.get(cancelling!.id)?.state === 'cancelled', 'B heard of the cancel');
    expect(runs(b, ids[1]!) + runs(a, ids[1]!)).toBe(0);
  });

  /** Counts B's claim requests; each crosses a turn of the event loop first, as a request to the cluster's store does. */
  const countClaims = (b: Rig) => {
    const create = b.store.create!.bind(b.store);
    const counted = { n: 0 };
    b.store.create = async (col, key, value) => {
      if (col === SEND_CLAIMS_COLLECTION) counted.n++;
      await new Promise((r) => setImmediate(r));
      return create(col, key, value);
    };
    return counted;
  };
  const turns = async (n: number) => {
    for (let i = 0; i < n; i++) await new Promise((r) => setImmediate(r));
  };

  it('an expired call another instance is sending is looked at again later, not in a loop of claim requests; let go, it expires', async () => {
    const { shared, a, b } = await pair();
    const id = mac(300);
    a.fake.add(id);
    b.fake.add(id);
    const call = await a.fleet.calls.enqueue({ deviceId: id, tool: 'self.light.on', arguments: {}, ttlMs: 1 });
    await until(() => b.fleet.calls.get(call.id)?.state === 'queued', 'B heard of the call');
    expect(await shared.view().create!(SEND_CLAIMS_COLLECTION, call.id, { at: new Date().toISOString() })).toBe(true);
    const claims = countClaims(b);
    b.fake.connect(id);
    await until(() => claims.n >= 1, 'B tried to settle it');
    await turns(50);
    // Before, each failed expiry went straight back to the same head call: a claim request per turn, for as long as the claim was held.
    expect(claims.n).toBe(1);
    expect(b.fleet.calls.get(call.id)?.state).toBe('queued');
    await shared.view().delete(SEND_CLAIMS_COLLECTION, call.id);
    await until(() => b.fleet.calls.get(call.id)?.state === 'expired', 'B expired it once the claim was let go');
    expect(runs(b, id)).toBe(0);
  });

  it('an expired call whose claim holder stopped before saying what became of it fails CALL_INTERRUPTED; it does not block the queue', async () => {
    const { shared, a, b } = await pair();
    const id = mac(301);
    a.fake.add(id);
    b.fake.add(id);
    const stuck = await a.fleet.calls.enqueue({ deviceId: id, tool: 'self.light.on', arguments: { n: 1 }, ttlMs: 1 });
    const next = await a.fleet.calls.enqueue({ deviceId: id, tool: 'self.light.on', arguments: { n: 2 } });
    await until(() => b.fleet.calls.get(next.id)?.state === 'queued', 'B heard of both calls');
    expect(await shared.view().create!(SEND_CLAIMS_COLLECTION, stuck.id, { at: '2020-01-01T00:00:00.000Z' })).toBe(true);
    countClaims(b); // for the turn of the event loop each claim request takes
    b.fake.connect(id);
    await until(() => b.fleet.calls.get(next.id)?.state === 'succeeded', 'the next call ran');
    expect(b.fleet.calls.get(stuck.id)).toMatchObject({ state: 'failed', error: { code: 'CALL_INTERRUPTED' } });
    expect(b.fake.devices.get(id)!.ran.map((r) => r.args['n'])).toEqual([2]);
  });
});
