import { OtaResponseSchema } from '@voxgate/protocol';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestGateway, TEST_API_KEY, type TestGateway } from '../../../test/support/gateway-harness.js';

/**
 * GET /v1/enrollments copied every claim, sorted them all, asked the tenant rules of each for every tenant's call, and
 * answered them all at once, at every call: anyone who can reach the OTA endpoint fills enrollment.maxPending (up to
 * 100 000) with claims of the longest fields, and then each call by any API key, a tenant's included, held the event
 * loop for a second or more and answered about 80 MB (about 800 KB and 15 ms at the default 1 000; red team 10). Now
 * the listing is paged (`limit`, at most 1 000, and `nextCursor`) and walks the claims in their order from its
 * cursor: a page costs its size. A tenant's key pages through the claims it may see only.
 */
const SECRET = 'enrollment-pages-secret-0123456789';
const KEY_A = 'key-tenant-acme-pages-0123456789';
const acmeId = (i: number) => `02:00:00:00:0d:${i.toString(16).padStart(2, '0')}`;
const otherId = (i: number) => `02:00:00:00:0f:${i.toString(16).padStart(2, '0')}`;

interface Pending {
  code: string;
  deviceId: string;
  createdAt: string;
}
interface Listing {
  enrollments: Pending[];
  nextCursor?: string;
}

describe('the pending enrollments are listed in pages', { timeout: 120_000 }, () => {
  let g: TestGateway;
  beforeAll(async () => {
    g = await startTestGateway({
      deviceAuth: 'hmac',
      deviceSecret: SECRET,
      apiKeys: [TEST_API_KEY, KEY_A],
      apiKeyTenants: { [KEY_A]: 'acme' },
      enrollment: {
        policy: 'approve',
        maxPendingPerAddress: 100,
        rateLimit: { burst: 100, perSecond: 50 },
        tenantRules: [{ tenant: 'acme', macPrefix: '02:00:00:00:0d' }],
      },
    });
    // Twelve devices ask, one after the other: six acme's rule gives to acme, six nobody's.
    for (let i = 0; i < 6; i++)
      for (const id of [acmeId(i), otherId(i)]) {
        const res = await fetch(`${g.baseUrl}/xiaozhi/ota/`, {
          method: 'POST',
          headers: { 'device-id': id, 'client-id': `client-${id.replace(/:/g, '')}`, 'content-type': 'application/json' },
          body: JSON.stringify({ application: { version: '1.7.6' }, board: { type: 'sim-board' } }),
        });
        expect(res.status).toBe(200);
        expect(OtaResponseSchema.parse(await res.json()).activation).toBeDefined();
      }
  });
  afterAll(async () => {
    await g.close();
  });

  const pages = async (apiKey: string, limit: number): Promise<Listing[]> => {
    const out: Listing[] = [];
    for (let cursor: string | undefined; ;) {
      const r = await g.api<Listing>('GET', `/v1/enrollments?limit=${limit}${cursor ? `&cursor=${cursor}` : ''}`, undefined, { apiKey });
      expect(r.status).toBe(200);
      out.push(r.body);
      cursor = r.body.nextCursor;
      if (!cursor || out.length > 20) return out;
    }
  };

  it('pages an operator through every claim, oldest first, each once', async () => {
    const all = await pages(TEST_API_KEY, 5);
    // Before: one answer of all 12, the limit not read.
    expect(all.map((p) => p.enrollments.length)).toEqual([5, 5, 2]);
    const listed = all.flatMap((p) => p.enrollments);
    expect(new Set(listed.map((e) => e.code)).size).toBe(12);
    const times = listed.map((e) => Date.parse(e.createdAt));
    expect(times).toEqual([...times].sort((a, b) => a - b));
    // Without a limit: one page of up to 1 000, as before.
    const whole = await g.api<Listing>('GET', '/v1/enrollments');
    expect(whole.body.enrollments.map((e) => e.code)).toEqual(listed.map((e) => e.code));
    expect(whole.body.nextCursor).toBeUndefined();
  });

  it("pages a tenant's key through its own claims only", async () => {
    const mine = await pages(KEY_A, 2);
    expect(mine.map((p) => p.enrollments.length)).toEqual([2, 2, 2]);
    expect(mine.flatMap((p) => p.enrollments.map((e) => e.deviceId)).sort()).toEqual([0, 1, 2, 3, 4, 5].map(acmeId));
    // An operator's cursor is a place, nothing more: the tenant's page after it holds its own claims.
    const ops = await g.api<Listing>('GET', '/v1/enrollments?limit=1');
    const after = await g.api<Listing>('GET', `/v1/enrollments?limit=1000&cursor=${ops.body.nextCursor}`, undefined, { apiKey: KEY_A });
    expect(after.body.enrollments.every((e) => e.deviceId.startsWith('02:00:00:00:0d'))).toBe(true);
  });

  it("lists one device's codes (any MAC spelling) from its index, in the same order and pages; a tenant only its own", async () => {
    // A second client id of one acme device: two codes for it.
    const res = await fetch(`${g.baseUrl}/xiaozhi/ota/`, {
      method: 'POST',
      headers: { 'device-id': acmeId(3), 'client-id': 'client-second', 'content-type': 'application/json' },
      body: JSON.stringify({ application: { version: '1.7.6' }, board: { type: 'sim-board' } }),
    });
    expect(res.status).toBe(200);
    const all = (await g.api<Listing>('GET', '/v1/enrollments')).body.enrollments.filter((e) => e.deviceId === acmeId(3));
    expect(all).toHaveLength(2);
    const spelled = acmeId(3).toUpperCase().replace(/:/g, '-');
    const one = await g.api<Listing>('GET', `/v1/enrollments?device=${spelled}`);
    expect(one.body).toEqual({ enrollments: all });
    const first = await g.api<Listing>('GET', `/v1/enrollments?device=${acmeId(3)}&limit=1`);
    expect(first.body.enrollments).toEqual([all[0]]);
    const second = await g.api<Listing>('GET', `/v1/enrollments?device=${acmeId(3)}&limit=1&cursor=${first.body.nextCursor}`);
    expect(second.body).toEqual({ enrollments: [all[1]] });
    expect((await g.api<Listing>('GET', `/v1/enrollments?device=${acmeId(3)}`, undefined, { apiKey: KEY_A })).body.enrollments).toHaveLength(2);
    // Another tenant's (here: the operators') device is not there for acme's key; a malformed id is 400.
    expect((await g.api<Listing>('GET', `/v1/enrollments?device=${otherId(3)}`, undefined, { apiKey: KEY_A })).body).toEqual({ enrollments: [] });
    expect((await g.api<Listing>('GET', `/v1/enrollments?device=${otherId(3)}`)).body.enrollments).toHaveLength(1);
    expect((await g.api<{ code: string }>('GET', '/v1/enrollments?device=lamp')).status).toBe(400);
  });

  it('refuses a cursor it did not give out, and a limit past 1 000', async () => {
    for (const q of ['cursor=abc', `cursor=${Buffer.from('e1:x:123456').toString('base64url')}`, 'limit=1001', 'limit=0']) {
      const r = await g.api<{ code: string }>('GET', `/v1/enrollments?${q}`);
      expect([q, r.status, r.body.code]).toEqual([q, 400, 'INVALID_REQUEST']);
    }
  });
});
