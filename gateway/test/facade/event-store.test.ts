import { describe, expect, it } from 'vitest';
import { BoundedEventStores } from '../../src/facade/event-store.js';

const msg = (id: number, text = 'x') => ({ jsonrpc: '2.0' as const, id, result: { text } });
const replay = async (store: ReturnType<BoundedEventStores['forSession']>, after: string) => {
  const got: unknown[] = [];
  const stream = await store.replayEventsAfter(after, { send: (_id, m) => Promise.resolve(void got.push(m)) });
  return { stream, got };
};

describe('BoundedEventStores: what /mcp sessions sent, for Last-Event-ID', () => {
  it('replays the events after an id on its stream only, never priming events or other streams', async () => {
    const stores = new BoundedEventStores();
    const s = stores.forSession();
    const priming = await s.storeEvent('a', {} as never);
    await s.storeEvent('b', msg(9));
    await s.storeEvent('a', msg(1));
    const { stream, got } = await replay(s, priming);
    expect(stream).toBe('a');
    expect(got).toEqual([msg(1)]);
  });

  it('an id from another session is unknown here', async () => {
    const stores = new BoundedEventStores();
    const a = stores.forSession();
    const b = stores.forSession();
    const id = await a.storeEvent('s', msg(1));
    await expect(replay(b, id)).rejects.toThrow(/Last-Event-ID/);
  });

  it('is bounded in events and bytes per session and in bytes over all sessions', async () => {
    const stores = new BoundedEventStores({ maxEventsPerSession: 3, maxBytesPerSession: 1000, maxBytesTotal: 1500 });
    const a = stores.forSession();
    const first = await a.storeEvent('s', msg(0));
    for (let i = 1; i < 5; i++) await a.storeEvent('s', msg(i));
    await expect(replay(a, first)).rejects.toThrow();
    for (let i = 0; i < 20; i++) await a.storeEvent('s', msg(i, 'y'.repeat(200)));
    expect(stores.bytes()).toBeLessThanOrEqual(1000);
    const b = stores.forSession();
    for (let i = 0; i < 20; i++) await b.storeEvent('s', msg(i, 'z'.repeat(200)));
    expect(stores.bytes()).toBeLessThanOrEqual(1500);
    // too large for any session: sent live, not kept
    await b.storeEvent('s', msg(99, 'w'.repeat(5000)));
    expect(stores.bytes()).toBeLessThanOrEqual(1500);
    a.dispose();
    b.dispose();
    expect(stores.bytes()).toBe(0);
  });

  it("past the total, the session holding the most gives up its events, not a quiet session's (red team 3)", async () => {
    // One key's busy sessions (up to maxSessionsPerKey) used to push every other session's replay out: the globally
    // oldest event went first, and a quiet session's one answer is usually the oldest.
    const stores = new BoundedEventStores({ maxEventsPerSession: 100, maxBytesPerSession: 1000, maxBytesTotal: 1500 });
    const quiet = stores.forSession();
    const answer = await quiet.storeEvent('s', msg(1));
    await quiet.storeEvent('s', msg(2, 'the answer'));
    const busy = [stores.forSession(), stores.forSession()];
    for (let i = 0; i < 40; i++) await busy[i % 2]!.storeEvent('s', msg(i, 'z'.repeat(100)));
    expect(stores.bytes()).toBeLessThanOrEqual(1500);
    expect((await replay(quiet, answer)).got).toEqual([msg(2, 'the answer')]);
    for (const s of [quiet, ...busy]) s.dispose();
    expect(stores.bytes()).toBe(0);
  });
});
