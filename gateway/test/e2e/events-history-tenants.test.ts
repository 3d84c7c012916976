import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestGateway, TEST_API_KEY, type TestGateway } from '../../../test/support/gateway-harness.js';

/**
 * The whole gateway wires each device's tenant into the event history's retention (open-state.ts openEvents): a
 * tenant whose devices flood events past the bound evicts its own oldest, and another tenant's key still reads its
 * earlier events from GET /v1/events/history.
 */
const ACME_KEY = 'acme-key-0123456789abcdef';
const GLOBEX_KEY = 'globex-key-0123456789abcdef';
const acme = (i: number) => `02:00:00:00:0a:${i.toString(16).padStart(2, '0')}`;
const GLOBEX_DEVICE = '02:00:00:00:0b:01';

describe('event history retention per tenant, in the gateway', { timeout: 60_000 }, () => {
  let t: TestGateway;
  beforeAll(async () => {
    t = await startTestGateway({
      apiKeys: [TEST_API_KEY, ACME_KEY, GLOBEX_KEY],
      apiKeyTenants: { [ACME_KEY]: 'acme', [GLOBEX_KEY]: 'globex' },
      events: { history: { maxEvents: 50, batchSize: 25 } },
    });
  });
  afterAll(async () => {
    await t.close();
  });

  it("acme's devices flooding connect/disconnect events do not push globex's history out", async () => {
    await t.gw.deviceTenants.set(GLOBEX_DEVICE, 'globex');
    for (let i = 0; i < 8; i++) await t.gw.deviceTenants.set(acme(i), 'acme');
    const mine = [t.gw.bus.publish('device.online', GLOBEX_DEVICE)!, t.gw.bus.publish('device.offline', GLOBEX_DEVICE, { reason: 'closed' })!];
    for (let i = 0; i < 400; i++) t.gw.bus.publish(i % 2 ? 'device.offline' : 'device.online', acme(i % 8), { reason: 'flap' });
    const read = await t.api<{ events: Array<{ id: string }> }>('GET', '/v1/events/history?limit=1000', undefined, { apiKey: GLOBEX_KEY });
    expect(read.status).toBe(200);
    expect(read.body.events.map((e) => e.id)).toEqual(mine.map((e) => e.id));
    // The bound holds (acme keeps what is left of it, its newest).
    const all = await t.api<{ events: Array<{ data: Record<string, unknown> }> }>('GET', '/v1/events/history?limit=1000');
    expect(all.body.events.length).toBe(50);
    expect(all.body.events.at(-1)!.data).toEqual({ reason: 'flap' });
  });
});
