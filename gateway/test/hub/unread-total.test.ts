import { describe, expect, it } from 'vitest';
import { UnreadTotal, unreadBudget } from '../../src/hub/unread-total.js';
import { createMetrics } from '../../src/metrics.js';

const MiB = 1024 * 1024;

function total(maxBytes: number) {
  const lines: Array<Record<string, unknown>> = [];
  const log = {
    debug: () => undefined,
    info: () => undefined,
    error: () => undefined,
    warn: (o: Record<string, unknown>, msg: string) => lines.push({ ...o, msg }),
  };
  const metrics = createMetrics();
  const t = new UnreadTotal(maxBytes, { log, metrics });
  const outcome = async (o: 'refused' | 'cut') => (await metrics.hubUnreadFull.get()).values.find((v) => v.labels['outcome'] === o)?.value ?? 0;
  const gauge = async () => (await metrics.hubUnreadBytes.get()).values[0]?.value;
  return { t, lines, outcome, gauge, metrics };
}

/** A peer that can be cut: `cuts` counts how often. */
function peer(t: UnreadTotal, group: string, name: string) {
  const p = { cuts: 0, share: t.join({ group, who: { name } }, () => p.cuts++) };
  return p;
}

describe('the unread total of every hosted server and tool process', () => {
  it('counts what is taken until it is given back or its peer leaves; the gauge and the peak follow', async () => {
    const { t, gauge, metrics } = total(10 * MiB);
    const a = peer(t, 'tenant:a', 'a');
    const b = peer(t, 'tenant:b', 'b');
    expect(a.share.take(3 * MiB)).toBe(true);
    expect(b.share.take(2 * MiB)).toBe(true);
    expect(t.held).toBe(5 * MiB);
    expect(await gauge()).toBe(5 * MiB);
    a.share.give(1 * MiB);
    b.share.leave();
    // What a peer gives back after it left (its socket's write callbacks, called as it is destroyed) counts no more.
    b.share.give(2 * MiB);
    expect(t.held).toBe(2 * MiB);
    expect(t.peak).toBe(5 * MiB);
    expect((await metrics.hubUnreadPeak.get()).values[0]?.value).toBe(5 * MiB);
  });

  it('never holds more than its bound: a write of the group holding the most is refused, counted, and logged once a minute', async () => {
    const { t, lines, outcome } = total(10 * MiB);
    const flood = [peer(t, 'tenant:a', 'a0'), peer(t, 'tenant:a', 'a1')];
    for (let i = 0; i < 40; i++) flood[i % 2]!.share.take(MiB);
    expect(t.held).toBe(10 * MiB);
    expect(t.peak).toBe(10 * MiB);
    expect(await outcome('refused')).toBe(30);
    expect(await outcome('cut')).toBe(0);
    expect(flood.map((p) => p.cuts)).toEqual([0, 0]);
    expect(lines.filter((l) => String(l['msg']).includes('refused'))).toHaveLength(1);
  });

  it("makes room for another tenant's write by cutting the largest holder of the tenant holding the most", async () => {
    const { t, lines, outcome } = total(10 * MiB);
    const a = [peer(t, 'tenant:a', 'a0'), peer(t, 'tenant:a', 'a1'), peer(t, 'tenant:a', 'a2')];
    a[0]!.share.take(2 * MiB);
    a[1]!.share.take(5 * MiB);
    a[2]!.share.take(3 * MiB);
    const b = peer(t, 'tenant:b', 'b');
    expect(b.share.take(1000)).toBe(true);
    expect(a.map((p) => p.cuts)).toEqual([0, 1, 0]);
    expect(t.held).toBe(5 * MiB + 1000);
    expect(await outcome('cut')).toBe(1);
    expect(lines.find((l) => String(l['msg']).includes('cut'))).toMatchObject({ cut: { name: 'a1' }, held: 5 * MiB, for: { name: 'b' } });
    // A cut peer is gone: it writes nothing more, and what it gives back is not counted.
    expect(a[1]!.share.take(1)).toBe(false);
    a[1]!.share.give(5 * MiB);
    expect(t.held).toBe(5 * MiB + 1000);
  });

  it('cuts from several tenants, the largest first, and only those holding more than the writer would', async () => {
    const { t } = total(10 * MiB);
    const a = peer(t, 'tenant:a', 'a');
    const c = peer(t, 'tenant:c', 'c');
    const d = peer(t, 'tenant:d', 'd');
    a.share.take(4 * MiB);
    c.share.take(3 * MiB);
    d.share.take(3 * MiB);
    const b = peer(t, 'tenant:b', 'b');
    expect(b.share.take(3 * MiB)).toBe(true);
    expect([a.cuts, c.cuts, d.cuts]).toEqual([1, 0, 0]);
    // 2 MiB more: b would hold 5, and no one holds more than that: refused, c and d left alone.
    expect(b.share.take(2 * MiB)).toBe(false);
    expect([c.cuts, d.cuts]).toEqual([0, 0]);
    // A fourth tenant's 2 MiB: c, d and b hold more than it would; one of them (3 MiB) goes, and only one.
    const e = peer(t, 'tenant:e', 'e');
    expect(e.share.take(2 * MiB)).toBe(true);
    expect(c.cuts + d.cuts + b.cuts).toBe(1);
    expect(t.held).toBe(8 * MiB);
  });

  it('never cuts a peer without a way to be cut, and cuts nothing for a write larger than the whole bound', () => {
    const { t } = total(4 * MiB);
    const quiet = t.join({ group: 'server:s', who: { server: 's' } });
    expect(quiet.take(3 * MiB)).toBe(true);
    const a = peer(t, 'tenant:a', 'a');
    expect(a.share.take(2 * MiB)).toBe(false);
    const big = peer(t, 'tenant:c', 'c');
    big.share.take(MiB);
    expect(a.share.take(5 * MiB)).toBe(false);
    expect(big.cuts).toBe(0);
  });

  it("is 128 MiB unless set, or twice one peer's own bound when that is more", () => {
    expect(unreadBudget(undefined, 8 * MiB)).toBe(128 * MiB);
    expect(unreadBudget(undefined, 260 * MiB)).toBe(520 * MiB);
    expect(unreadBudget(16 * MiB, 8 * MiB)).toBe(16 * MiB);
  });
});
