import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { EnrollmentCredentials } from '../../src/enrollment/credentials.js';
import { Enrollment, type EnrollmentOptions, type OtaRequest } from '../../src/enrollment/enrollment.js';
import { GatewayError } from '../../src/errors.js';
import { createMetrics } from '../../src/metrics.js';
import { SqliteStore } from '../../src/store/sqlite-store.js';
import { silentLog } from '../../../test/support/device-parts.js';

const T0 = Date.parse('2026-11-26T08:00:00Z');
const ID = 'aa:bb:cc:dd:ee:01';

const cleanup: Array<() => unknown> = [];
afterEach(async () => {
  vi.useRealTimers();
  for (const f of cleanup.splice(0).reverse()) await f();
});

/** The enrollment service alone, over a SQLite store in a temp dir, its clock the test's. */
async function enrollment(o: Partial<EnrollmentOptions> = {}, path?: string) {
  const p = path ?? join(mkdtempSync(join(tmpdir(), 'voxgate-enroll-')), 'voxgate.db');
  if (!path) cleanup.push(() => rmSync(join(p, '..'), { recursive: true, force: true }));
  const store = new SqliteStore(p);
  cleanup.push(() => store.close());
  const revoked: string[] = [];
  const e = await Enrollment.open({
    ...{ policy: 'approve', allowlist: new Set<string>(), pendingTtlSeconds: 600, maxPending: 100, maxPendingPerDevice: 4, maxPendingPerAddress: 100 },
    ...{ credentials: new EnrollmentCredentials('enrollment-secret-0123456789', 'voxgate'), store, log: silentLog, metrics: createMetrics() },
    onRevoked: (id) => revoked.push(id),
    ...o,
  });
  return { e, store, revoked, path: p };
}
const request = (clientId = 'client-1', o: Partial<OtaRequest> = {}): OtaRequest => ({ deviceId: ID, clientId, proof: {}, remoteAddress: '10.0.0.9', ...o });
const code = async (e: Enrollment, clientId = 'client-1') => {
  const d = await e.ota(request(clientId));
  if (d.kind !== 'activation') throw new Error(`expected an activation, got ${d.kind}`);
  return d.claim;
};

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

  it('keeps at most maxPendingPerDevice codes for one device id, the oldest going first', async () => {
    vi.useFakeTimers({ now: T0, toFake: ['Date'] });
    const { e } = await enrollment({ maxPendingPerDevice: 2 });
    const codes: string[] = [];
    for (const client of ['a', 'b', 'c']) {
      codes.push((await code(e, client)).code);
      vi.setSystemTime(Date.now() + 1000);
    }
    expect(e.pending().map((c) => c.code)).toEqual(codes.slice(1));
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
