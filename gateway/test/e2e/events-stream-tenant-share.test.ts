import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestGateway, TEST_API_KEY, type TestGateway } from '../../../test/support/gateway-harness.js';
import { openSse, type SseStream } from '../../../test/support/sse.js';

/**
 * `GET /v1/events` streams were bounded in all (events.maxStreams) and per API key (maxStreamsPerKey), not per tenant,
 * though this is what the docs said kept one tenant from taking them all: a tenant with several keys, each under its own
 * cap, held every stream, and every other tenant and the operators were refused 429 (red team 10; the same held for
 * `/mcp` sessions until their tenant share). Now a tenant's keys together hold at most events.maxStreamsPerTenant
 * (unset: three quarters of maxStreams once the keys belong to more than one tenant), counted as
 * voxgate_sse_streams_dropped_total{reason="tenant_cap"}.
 */
const ACME_1 = 'acme-key-streams-one-0123456789';
const ACME_2 = 'acme-key-streams-two-0123456789';
const GLOBEX = 'globex-key-streams-0123456789';

describe("one tenant's keys cannot hold every event stream", { timeout: 60_000 }, () => {
  let t: TestGateway;
  const open: SseStream[] = [];
  beforeAll(async () => {
    t = await startTestGateway({
      apiKeys: [TEST_API_KEY, ACME_1, ACME_2, GLOBEX],
      apiKeyTenants: { [ACME_1]: 'acme', [ACME_2]: 'acme', [GLOBEX]: 'globex' },
      // Four streams in all, two per key: acme's two keys could take all four.
      events: { maxStreams: 4, maxStreamsPerKey: 2 },
    });
  });
  afterAll(async () => {
    for (const s of open.splice(0)) s.close();
    await t.close();
  });
  const stream = async (key: string) => {
    const s = await openSse(`${t.baseUrl}/v1/events`, { authorization: `Bearer ${key}` });
    open.push(s);
    return s;
  };

  it('refuses acme past three quarters of the streams, and globex and the operators still get theirs', async () => {
    expect((await stream(ACME_1)).status).toBe(200);
    expect((await stream(ACME_1)).status).toBe(200);
    expect((await stream(ACME_2)).status).toBe(200);
    // Before: 200, and acme held all four.
    const refused = await stream(ACME_2);
    expect(refused.status).toBe(429);
    expect(await t.metric('voxgate_sse_streams_dropped_total', { reason: 'tenant_cap' })).toBe(1);
    expect((await stream(GLOBEX)).status).toBe(200);
    // The gateway's own cap is reached now: everyone is refused alike.
    expect((await stream(TEST_API_KEY)).status).toBe(429);
    expect(await t.metric('voxgate_sse_streams_dropped_total', { reason: 'total_cap' })).toBe(1);
  });
});
