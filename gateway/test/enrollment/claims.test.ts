import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { Claims } from '../../src/enrollment/claims.js';
import type { Claim } from '../../src/enrollment/records.js';

const claim = (code: string, o: Partial<Claim> = {}): Claim => ({
  code,
  deviceId: 'aa:bb:cc:dd:ee:01',
  clientId: `client-${code}`,
  challenge: 'c'.repeat(32),
  status: 'pending',
  createdAt: 0,
  expiresAt: 1000,
  remoteAddress: '10.0.0.1',
  ...o,
});

/** Every claim firstExpired gives by `now`, deleting each as the enrollment does. */
function drain(c: Claims, now: number): string[] {
  const out: string[] = [];
  for (let x = c.firstExpired(now); x; x = c.firstExpired(now)) {
    out.push(x.code);
    c.delete(x.code);
  }
  return out;
}

describe('Claims: the waiting codes and their indexes', () => {
  it('finds codes by (device id, client id), by device id and source, and counts them per source, through every change', () => {
    const c = new Claims();
    c.set(claim('000001', { createdAt: 2 }));
    c.set(claim('000002', { createdAt: 1, remoteAddress: '2001:db8:0:1::1' }));
    c.set(claim('000003', { createdAt: 3, remoteAddress: '2001:db8:0:1::2' }));
    c.set(claim('000004', { deviceId: 'aa:bb:cc:dd:ee:02' }));
    expect(c.ofClient('aa:bb:cc:dd:ee:01', 'client-000002')?.code).toBe('000002');
    expect(c.ofDeviceFrom('aa:bb:cc:dd:ee:01', '2001:db8:0:1::/64').map((x) => x.code)).toEqual(['000002', '000003']);
    expect(
      c
        .ofDevice('aa:bb:cc:dd:ee:01')
        .map((x) => x.code)
        .sort(),
    ).toEqual(['000001', '000002', '000003']);
    expect([c.heldBy('10.0.0.1'), c.heldBy('2001:db8:0:1::/64'), c.size]).toEqual([2, 2, 4]);

    // A change of the same code (a write from another instance) moves it in every index.
    c.set(claim('000003', { createdAt: 3, remoteAddress: '10.0.0.1', clientId: 'moved' }));
    expect(c.ofClient('aa:bb:cc:dd:ee:01', 'client-000003')).toBeUndefined();
    expect(c.ofClient('aa:bb:cc:dd:ee:01', 'moved')?.code).toBe('000003');
    expect([c.heldBy('10.0.0.1'), c.heldBy('2001:db8:0:1::/64'), c.size]).toEqual([3, 1, 4]);

    for (const code of ['000001', '000002', '000003', '000004']) expect(c.delete(code)).toBe(true);
    expect(c.delete('000001')).toBe(false);
    expect([c.size, c.heldBy('10.0.0.1'), c.ofDevice('aa:bb:cc:dd:ee:01'), c.ofClient('aa:bb:cc:dd:ee:01', 'moved')]).toEqual([0, 0, [], undefined]);
  });

  it('of two claims of one (device id, client id), deleting one keeps the other found', () => {
    const c = new Claims();
    c.set(claim('000001', { clientId: 'same' }));
    c.set(claim('000002', { clientId: 'same' }));
    c.delete('000001');
    expect(c.ofClient('aa:bb:cc:dd:ee:01', 'same')?.code).toBe('000002');
  });

  it('gives expired claims soonest first, following refreshes, and keeps few stale expiries however often claims are refreshed', () => {
    const c = new Claims();
    for (let i = 0; i < 50; i++) c.set(claim(String(i).padStart(6, '0'), { expiresAt: 1000 + ((i * 37) % 50) }));
    // Refreshed many times: the last expiry counts.
    for (let round = 1; round <= 200; round++) c.set(claim('000007', { expiresAt: 5000 + round }));
    // Bounded: 200 refreshes of one claim left no more than twice the claims (plus a little) behind.
    expect((c as unknown as { expiries: { size: number } }).expiries.size).toBeLessThanOrEqual(2 * 50 + 65);
    expect(c.firstExpired(999)).toBeUndefined();
    // Offsets 0 to 24, but 9 (000007's first expiry, refreshed since).
    const early = drain(c, 1024);
    expect(early).toHaveLength(24);
    expect(early).not.toContain('000007');
    expect(early.map((code) => c.get(code))).toEqual(early.map(() => undefined));
    const rest = drain(c, 4999);
    expect(rest).toHaveLength(25);
    expect(rest).not.toContain('000007');
    expect(drain(c, 5200)).toEqual(['000007']);
    expect(c.size).toBe(0);
  });

  it('a rejection keeps the expiry, and an expired claim not yet deleted is given again', () => {
    const c = new Claims();
    c.set(claim('000001', { expiresAt: 10 }));
    c.set(claim('000001', { expiresAt: 10, status: 'rejected' }));
    expect(c.firstExpired(10)?.status).toBe('rejected');
    // The store's delete failed: the claim is still there, and still due.
    expect(c.firstExpired(11)?.code).toBe('000001');
    expect(drain(c, 11)).toEqual(['000001']);
    expect(c.firstExpired(11)).toBeUndefined();
  });

  it('gives exactly the claims expired by each time, whatever the order of sets and deletes (property)', () => {
    const op = fc.oneof(
      fc.record({ kind: fc.constant('set' as const), code: fc.integer({ min: 0, max: 15 }), at: fc.integer({ min: 0, max: 100 }) }),
      fc.record({ kind: fc.constant('delete' as const), code: fc.integer({ min: 0, max: 15 }) }),
      fc.record({ kind: fc.constant('drain' as const), now: fc.integer({ min: 0, max: 100 }) }),
    );
    fc.assert(
      fc.property(fc.array(op, { maxLength: 300 }), (ops) => {
        const c = new Claims();
        const model = new Map<string, number>();
        for (const o of ops) {
          if (o.kind === 'set') {
            const code = String(o.code).padStart(6, '0');
            c.set(claim(code, { expiresAt: o.at }));
            model.set(code, o.at);
          } else if (o.kind === 'delete') {
            const code = String(o.code).padStart(6, '0');
            expect(c.delete(code)).toBe(model.delete(code));
          } else {
            const due = [...model].filter(([, at]) => at <= o.now);
            const drained = drain(c, o.now);
            expect([...drained].sort()).toEqual(due.map(([code]) => code).sort());
            // Soonest first.
            const ats = drained.map((code) => model.get(code)!);
            expect(ats).toEqual([...ats].sort((x, y) => x - y));
            for (const [code] of due) model.delete(code);
          }
          expect(c.size).toBe(model.size);
        }
      }),
    );
  });

  it('walks the claims in their order (creation time, code) from a place, through sets, refreshes and deletes', () => {
    fc.assert(
      fc.property(
        fc.array(fc.record({ code: fc.integer({ min: 100000, max: 100040 }).map(String), createdAt: fc.integer({ min: 0, max: 5 }), drop: fc.boolean() }), {
          maxLength: 60,
        }),
        fc.integer({ min: 1, max: 7 }),
        (ops, limit) => {
          const c = new Claims();
          const model = new Map<string, Claim>();
          for (const op of ops) {
            if (op.drop) {
              c.delete(op.code);
              model.delete(op.code);
            } else {
              const x = claim(op.code, { createdAt: op.createdAt, expiresAt: 1000 + op.createdAt });
              c.set(x);
              model.set(op.code, x);
            }
          }
          const want = [...model.values()].sort((a, b) => a.createdAt - b.createdAt || (a.code < b.code ? -1 : 1)).map((x) => x.code);
          // Pages of `limit`, each after the last claim of the one before: every claim once, in order.
          const got: string[] = [];
          for (let after: Claim | undefined, more = true; more;) {
            const page: Claim[] = [];
            more = c.walk(after, (x) => (page.length === limit ? false : (page.push(x), true)));
            got.push(...page.map((x) => x.code));
            after = page.at(-1);
          }
          expect(got).toEqual(want);
        },
      ),
    );
  });
});
