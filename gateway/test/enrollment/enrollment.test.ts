import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { EnrollmentCredentials } from '../../src/enrollment/credentials.js';
import { Enrollment, type EnrollmentOptions, type OtaRequest } from '../../src/enrollment/enrollment.js';
import { GatewayError } from '../../src/errors.js';
import { createMetrics } from '../../src/metrics.js';
import type { Claim } from '../../src/enrollment/records.js';
import { SqliteStore } from '../../src/store/sqlite-store.js';
import type { Store, StoreChange } from '../../src/store/store.js';
import { metricValue, silentLog } from '../../../test/support/device-parts.js';

const T0 = Date.parse('2026-11-26T08:00:00Z');
const ID = 'aa:bb:cc:dd:ee:01';

const cleanup: Array<() => unknown> = [];
afterEach(async () => {
  vi.useRealTimers();
  for (const f of cleanup.splice(0).reverse()) await f();
});

/** A SQLite store in a temp dir. */
function sqliteStore(path?: string) {
  const p = path ?? join(mkdtempSync(join(tmpdir(), 'voxgate-enroll-')), 'voxgate.db');
  if (!path) cleanup.push(() => rmSync(join(p, '..'), { recursive: true, force: true }));
  const store = new SqliteStore(p);
  cleanup.push(() => store.close());
  return { store, path: p };
}

/** The enrollment service alone, over a SQLite store in a temp dir (or the store given), its clock the test's. */
async function enrollment(o: Partial<EnrollmentOptions> = {}, path?: string) {
  const { store, path: p } = o.store ? { store: o.store, path: '' } : sqliteStore(path);
  const revoked: string[] = [];
  const metrics = createMetrics();
  const e = await Enrollment.open({
    ...{ policy: 'approve', allowlist: new Set<string>(), pendingTtlSeconds: 600, maxPending: 100, maxPendingPerDevice: 4, maxPendingPerAddress: 100 },
    ...{ credentials: new EnrollmentCredentials('enrollment-secret-0123456789', 'voxgate'), store, log: silentLog, metrics },
    onRevoked: (id) => revoked.push(id),
    ...o,
  });
  return { e, store, revoked, metrics, path: p };
}
const request = (clientId = 'client-1', o: Partial<OtaRequest> = {}): OtaRequest => ({ deviceId: ID, clientId, proof: {}, remoteAddress: '10.0.0.9', ...o });
const code = async (e: Enrollment, clientId = 'client-1', o: Partial<OtaRequest> = {}) => {
  const d = await e.ota(request(clientId, o));
  if (d.kind !== 'activation') throw new Error(`expected an activation, got ${d.kind}`);
  return d.claim;
};
/** What another instance would have written: a claim for `deviceId` from `remoteAddress`. */
const foreignClaim = (code: string, deviceId: string, clientId: string, remoteAddress: string): Claim => ({
  code,
  deviceId,
  clientId,
  challenge: 'c'.repeat(32),
  status: 'pending',
  createdAt: Date.now(),
  expiresAt: Date.now() + 600_000,
  remoteAddress,
});

/**
 * A store shared with another instance, as nats-kv-store.ts is: `other` writes as that instance would (to the
 * documents, then to this one's watch). `create` may be told to find a code taken, as a race with that instance would.
 */
class SharedStore implements Store {
  private readonly listeners = new Map<string, Set<(c: StoreChange) => void>>();
  /** Codes `create` tried, and how many of the first tries find the key taken (by `taken`, written first). */
  readonly tried: string[] = [];
  takenTries = 0;
  constructor(
    private readonly inner: Store,
    private readonly taken?: (key: string) => unknown,
  ) {}
  get = (c: string, k: string) => this.inner.get(c, k);
  put = (c: string, k: string, v: unknown) => this.inner.put(c, k, v);
  putMany: Store['putMany'] = (c, e, o) => this.inner.putMany(c, e, o);
  delete = (c: string, k: string) => this.inner.delete(c, k);
  list = (c: string) => this.inner.list(c);
  close = () => this.inner.close();
  async create(c: string, k: string, v: unknown): Promise<boolean> {
    this.tried.push(k);
    if (this.tried.length <= this.takenTries && this.taken) await this.other(c, k, this.taken(k));
    return this.inner.create!(c, k, v);
  }
  onChange(c: string, fn: (change: StoreChange) => void): () => void {
    let set = this.listeners.get(c);
    if (!set) this.listeners.set(c, (set = new Set()));
    set.add(fn);
    return () => void set.delete(fn);
  }
  /** Another instance's write (undefined: its delete), as this instance's watch hears it. */
  async other(c: string, key: string, value: unknown): Promise<void> {
    if (value === undefined) await this.inner.delete(c, key);
    else await this.inner.put(c, key, value);
    for (const fn of this.listeners.get(c) ?? []) fn({ key, value });
  }
}

describe('Enrollment (approve policy)', () => {
  it('gives a waiting device one six-digit code, the same on every check, until it expires', async () => {
    vi.useFakeTimers({ now: T0, toFake: ['Date'] });
    const { e } = await enrollment({ pendingTtlSeconds: 60 });
    const first = await code(e);
    expect(first.code).toMatch(/^\d{6}$/);
    vi.setSystemTime(T0 + 50_000);
    // Asking again keeps the code and pushes its expiry back.
    expect((await code(e)).code).toBe(first.code);
    vi.setSystemTime(T0 + 100_000);
    expect(e.pending().map((c) => c.code)).toEqual([first.code]);
    expect(e.activate(ID, 'client-1', undefined)).toBe('pending');
    // Unasked for longer than the TTL: gone, and the device starts over with a new code.
    vi.setSystemTime(T0 + 200_000);
    expect(e.pending()).toEqual([]);
    expect(e.activate(ID, 'client-1', undefined)).toBe('unknown');
    await expect(e.approve(first.code)).rejects.toMatchObject({ code: 'ENROLLMENT_NOT_FOUND' });
    expect((await code(e)).code).not.toBe(first.code);
  });

  it('keeps at most maxPendingPerDevice codes for one device id from one source, its oldest going first', async () => {
    vi.useFakeTimers({ now: T0, toFake: ['Date'] });
    const { e } = await enrollment({ maxPendingPerDevice: 2 });
    const codes: string[] = [];
    for (const client of ['a', 'b', 'c']) {
      codes.push((await code(e, client)).code);
      vi.setSystemTime(Date.now() + 1000);
    }
    expect(e.pending().map((c) => c.code)).toEqual(codes.slice(1));
  });

  it("a source at its share still names an id under a new client id: the claim takes its own oldest code's place", async () => {
    vi.useFakeTimers({ now: T0, toFake: ['Date'] });
    const { e } = await enrollment({ maxPendingPerDevice: 2, maxPendingPerAddress: 2 });
    const codes: string[] = [];
    for (const client of ['a', 'b', 'c']) {
      codes.push((await code(e, client)).code);
      vi.setSystemTime(Date.now() + 1000);
    }
    expect(e.pending().map((c) => c.code)).toEqual(codes.slice(1));
    // Another id from that source takes a new place: past the share, refused.
    await expect(e.ota(request('d', { deviceId: 'aa:bb:cc:dd:ee:02' }))).rejects.toMatchObject({ code: 'ENROLLMENT_BUSY' });
  });

  it('claims of one device id from different sources never push out or block each other', async () => {
    vi.useFakeTimers({ now: T0, toFake: ['Date'] });
    const { e } = await enrollment({ maxPendingPerDevice: 2 });
    const kept: string[] = [];
    for (const remoteAddress of ['10.0.0.1', '10.0.0.2', '10.0.0.3', '10.0.0.4', '2001:db8:1:2::5']) {
      const codes: string[] = [];
      for (const client of ['a', 'b', 'c']) {
        codes.push((await code(e, `${remoteAddress}-${client}`, { remoteAddress })).code);
        vi.setSystemTime(Date.now() + 1000);
      }
      kept.push(...codes.slice(1));
      // Its oldest went: that claim is no longer waiting.
      expect(e.activate(ID, `${remoteAddress}-a`, undefined)).toBe('unknown');
    }
    // The real device, from a sixth source (another address in that IPv6 /64 is the same source).
    const real = await code(e, 'real', { remoteAddress: '192.0.2.1' });
    expect((await code(e, '2001:db8:1:2::5-c', { remoteAddress: '2001:db8:1:2::77' })).code).toBe(kept.at(-1));
    expect(e.pending().map((c) => c.code)).toEqual([...kept, real.code]);
    // Approving the real device's code drops every other code of the id, from every source.
    await e.approve(real.code);
    expect(e.pending()).toEqual([]);
    expect(e.activate(ID, 'real', undefined)).toBe('done');
  });

  it('four sources holding every place cannot keep another from enrolling: the largest holder gives up its oldest claim', async () => {
    vi.useFakeTimers({ now: T0, toFake: ['Date'] });
    const { e, metrics } = await enrollment({ maxPending: 8, maxPendingPerAddress: 2 });
    const flooders = ['10.0.0.1', '10.0.0.2', '2001:db8:1:2::5', '10.0.0.4'];
    const held = new Map<string, string[]>();
    for (const remoteAddress of flooders)
      for (const n of [1, 2]) {
        const deviceId = `aa:bb:cc:dd:${String(flooders.indexOf(remoteAddress)).padStart(2, '0')}:0${n}`;
        held.set(remoteAddress, [...(held.get(remoteAddress) ?? []), (await code(e, 'made-up', { deviceId, remoteAddress })).code]);
        vi.setSystemTime(Date.now() + 1000);
      }
    // Refreshing their claims keeps them: they need no new place.
    for (const remoteAddress of flooders) await code(e, 'made-up', { deviceId: `aa:bb:cc:dd:0${flooders.indexOf(remoteAddress)}:01`, remoteAddress });
    expect(e.pending()).toHaveLength(8);
    // The real device, from a fifth source, gets a code: the oldest claim of the first source holding the most goes.
    const real = await code(e, 'real', { remoteAddress: '192.0.2.1' });
    expect(e.pending().map((c) => c.code)).toContain(real.code);
    expect(e.pending()).toHaveLength(8);
    expect(await metricValue(metrics, 'voxgate_enrollment_decisions_total', { outcome: 'displaced' })).toBe(1);
    const gone = [...held.values()].flat().filter((c) => !e.pending().some((p) => p.code === c));
    expect(gone).toEqual([held.get('10.0.0.1')![1]]); // refreshed last, its first claim is its most recently set
    // The source that gave a place up cannot take one back from the larger ones, nor from the real device.
    await expect(e.ota(request('x', { deviceId: 'aa:bb:cc:dd:ee:77', remoteAddress: '10.0.0.1' }))).rejects.toMatchObject({ code: 'ENROLLMENT_BUSY' });
    // Another address in the IPv6 /64 is the same source: no place from the others either.
    await expect(e.ota(request('x', { deviceId: 'aa:bb:cc:dd:ee:78', remoteAddress: '2001:db8:1:2::99' }))).rejects.toMatchObject({ code: 'ENROLLMENT_BUSY' });
    // A sixth source takes a place too, from a source still holding two; the real device's claim stays.
    const sixth = await code(e, 'sixth', { deviceId: 'aa:bb:cc:dd:ee:79', remoteAddress: '192.0.2.2' });
    expect(e.pending().map((c) => c.code)).toEqual(expect.arrayContaining([real.code, sixth.code]));
    expect(await metricValue(metrics, 'voxgate_enrollment_decisions_total', { outcome: 'displaced' })).toBe(2);
  });

  it("claims another instance writes (the shared store's watch) count and are found like this one's", async () => {
    const shared = new SharedStore(sqliteStore().store);
    const { e } = await enrollment({ store: shared, maxPendingPerDevice: 2, maxPendingPerAddress: 2 });
    // Another instance gave the id codes for four sources, and one source has its share of two.
    const remote = ['10.0.0.1', '10.0.0.2', '10.0.0.3', '10.0.0.4'];
    for (const [i, from] of remote.entries()) await shared.other('enrollment-claims', `10000${i}`, foreignClaim(`10000${i}`, ID, `remote-${i}`, from));
    await shared.other('enrollment-claims', '100009', foreignClaim('100009', 'aa:bb:cc:dd:ee:09', 'other', '10.0.0.1'));
    // A fifth source still gets its own code; the same (id, client id) gets the other instance's code back.
    const fifth = await code(e, 'fifth', { remoteAddress: '10.0.0.5' });
    expect(fifth.code).not.toMatch(/^10000\d$/);
    expect((await code(e, 'remote-2', { remoteAddress: '10.0.0.3' })).code).toBe('100002');
    expect(e.activate(ID, 'remote-3', undefined)).toBe('pending');
    // 10.0.0.1 holds its share: a new id from it is refused, until the other instance drops one of its codes.
    await expect(e.ota(request('x', { deviceId: 'aa:bb:cc:dd:ee:03', remoteAddress: '10.0.0.1' }))).rejects.toMatchObject({ code: 'ENROLLMENT_BUSY' });
    await shared.other('enrollment-claims', '100009', undefined);
    expect((await code(e, 'x', { deviceId: 'aa:bb:cc:dd:ee:03', remoteAddress: '10.0.0.1' })).code).toMatch(/^\d{6}$/);
    // Rejected elsewhere: this instance answers so.
    await shared.other('enrollment-claims', '100003', { ...foreignClaim('100003', ID, 'remote-3', '10.0.0.4'), status: 'rejected' });
    expect(e.activate(ID, 'remote-3', undefined)).toBe('rejected');
    // Approving here drops every code of the id, the other instance's too.
    await e.approve(fifth.code);
    expect(e.pending().map((c) => c.deviceId)).toEqual(['aa:bb:cc:dd:ee:03']);
    expect(await shared.get('enrollment-claims', '100000')).toBeUndefined();
  });

  it('creates a new code put-if-absent: a code another instance took at the same moment is tried again, not overwritten', async () => {
    const theirs = (key: string) => foreignClaim(key, 'aa:bb:cc:dd:ee:77', 'theirs', '198.51.100.7');
    const shared = new SharedStore(sqliteStore().store, theirs);
    shared.takenTries = 1;
    const { e } = await enrollment({ store: shared });
    const mine = await code(e);
    expect(shared.tried).toHaveLength(2);
    expect(mine.code).toBe(shared.tried[1]);
    expect(await shared.get('enrollment-claims', shared.tried[0]!)).toMatchObject({ deviceId: 'aa:bb:cc:dd:ee:77' });
    expect(await shared.get('enrollment-claims', mine.code)).toMatchObject({ deviceId: ID, clientId: 'client-1' });
    // A refresh of an existing claim keeps its code (a plain put).
    expect((await code(e)).code).toBe(mine.code);
    expect(shared.tried).toHaveLength(2);
  });

  it('gives up with 503 ENROLLMENT_BUSY when every code it tries is taken, holding nothing', async () => {
    const shared = new SharedStore(sqliteStore().store, (key) => foreignClaim(key, 'aa:bb:cc:dd:ee:77', 'theirs', '198.51.100.7'));
    shared.takenTries = Infinity;
    const { e, metrics } = await enrollment({ store: shared });
    const refused = e.ota(request());
    await expect(refused).rejects.toMatchObject({ code: 'ENROLLMENT_BUSY', message: expect.stringContaining('no free enrollment code') });
    expect(shared.tried.length).toBeGreaterThan(1);
    expect(e.pending().filter((c) => c.deviceId === ID)).toEqual([]);
    expect(await metricValue(metrics, 'voxgate_enrollment_decisions_total', { outcome: 'no_free_code' })).toBe(1);
  });

  it('approves a code: credentials for its claimant, every other code of the device dropped, the code spent', async () => {
    const { e } = await enrollment();
    const impostor = await code(e, 'impostor');
    const real = await code(e, 'real');
    const b = await e.approve(real.code);
    expect(b).toMatchObject({ deviceId: ID, clientId: 'real', via: 'approve', delivered: false });
    expect(e.pending()).toEqual([]);
    await expect(e.approve(impostor.code)).rejects.toBeInstanceOf(GatewayError);
    await expect(e.approve(real.code)).rejects.toMatchObject({ code: 'ENROLLMENT_NOT_FOUND' });
    expect(e.activate(ID, 'real', undefined)).toBe('done');
    // The first check after approval collects the credentials; the one after gets none without proof.
    expect((await e.ota(request('real'))).kind).toBe('credentials');
    expect((await e.ota(request('real'))).kind).toBe('withheld');
  });

  it('revokes a binding on re-enroll, telling the links, and answers false for a device it does not know', async () => {
    const { e, revoked } = await enrollment({ policy: 'open' });
    const first = await e.ota(request());
    expect(first.kind).toBe('credentials');
    expect(await e.reenroll(ID)).toBe(true);
    expect(revoked).toEqual([ID]);
    expect(e.binding(ID)).toBeUndefined();
    expect(await e.reenroll(ID)).toBe(false);
    // Enrolled again, with credentials the old ones are not.
    const again = await e.ota(request());
    expect(again.kind === 'credentials' && first.kind === 'credentials' && again.binding.credId !== first.binding.credId).toBe(true);
  });

  it('reads bindings and codes back from the store at open', async () => {
    const { e, path, store } = await enrollment();
    const waiting = await code(e, 'waiting');
    await store.close();
    cleanup.pop();
    const reopened = await enrollment({}, path);
    expect(reopened.e.pending().map((c) => c.code)).toEqual([waiting.code]);
  });
});
