import { describe, expect, it } from 'vitest';
import { SessionTable, type TableSession } from '../../src/facade/session-table.js';

interface Fake extends TableSession {
  transport: { open: boolean; lastStreamClosed: number; hasOpenStream(): boolean };
}

const session = (keyFingerprint: string, lastUsed: number, open = false, lastStreamClosed = 0, tenant?: string): Fake => ({
  keyFingerprint,
  tenant,
  lastUsed,
  transport: {
    open,
    lastStreamClosed,
    hasOpenStream() {
      return this.open;
    },
  },
});

/** Adds a session as the endpoint does: reserved first, then taken over. */
const add = (t: SessionTable<Fake>, id: string, s: Fake) => {
  t.reserve(s.keyFingerprint, s.tenant);
  t.add(id, s);
};

describe('SessionTable', () => {
  it("offers the key's least recently used session without an open stream, never another key's", () => {
    const t = new SessionTable<Fake>();
    add(t, 'theirs', session('B', 10));
    add(t, 'streaming', session('A', 20, true));
    add(t, 'older', session('A', 30));
    add(t, 'newer', session('A', 40));
    expect(t.evictable('A', 1000)?.id).toBe('older');
    expect(t.evictable('B', 1000)?.id).toBe('theirs');
    expect(t.evictable('C', 1000)).toBeUndefined();
    // A stream let go of counts as a use: `older` let go of its stream after `newer` was last used.
    t.get('older')!.transport.lastStreamClosed = 50;
    expect(t.evictable('A', 1000)).toMatchObject({ id: 'newer', lastActive: 40 });
    // Used (or let go of) since `before`: kept.
    expect(t.evictable('A', 40)).toBeUndefined();
    // Every session of the key with a stream: none.
    t.get('older')!.transport.open = true;
    t.get('newer')!.transport.open = true;
    expect(t.evictable('A', 1000)).toBeUndefined();
    expect(t.streaming()).toBe(3);
  });

  it('counts sessions and reservations per key, and forgets a key that holds nothing', () => {
    const t = new SessionTable<Fake>();
    add(t, 'a1', session('A', 1));
    t.reserve('A', undefined);
    expect({ held: t.heldBy('A'), reserved: t.reserved, size: t.size, keys: t.keysHolding() }).toEqual({ held: 2, reserved: 1, size: 1, keys: 1 });
    t.release('A', undefined);
    expect(t.delete('a1')?.keyFingerprint).toBe('A');
    expect(t.delete('a1')).toBeUndefined();
    expect({ held: t.heldBy('A'), reserved: t.reserved, size: t.size, keys: t.keysHolding() }).toEqual({ held: 0, reserved: 0, size: 0, keys: 0 });
    expect(t.evictable('A', 1000)).toBeUndefined();
  });

  it('counts per tenant too, all its keys together, the keys without a tenant as one', () => {
    const t = new SessionTable<Fake>();
    add(t, 'a1', session('A', 1, false, 0, 'acme'));
    add(t, 'b1', session('B', 1, false, 0, 'acme'));
    t.reserve('B', 'acme');
    add(t, 'c1', session('C', 1, false, 0, 'other'));
    add(t, 'd1', session('D', 1));
    add(t, 'e1', session('E', 1));
    expect([t.heldByTenant('acme'), t.heldByTenant('other'), t.heldByTenant(undefined), t.heldBy('B')]).toEqual([3, 1, 2, 2]);
    t.release('B', 'acme');
    for (const id of ['a1', 'b1', 'd1']) t.delete(id);
    expect([t.heldByTenant('acme'), t.heldByTenant('other'), t.heldByTenant(undefined)]).toEqual([0, 1, 1]);
  });
});
