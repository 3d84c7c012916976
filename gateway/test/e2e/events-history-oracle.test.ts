import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestGateway, TEST_API_KEY, type TestGateway } from '../../../test/support/gateway-harness.js';

/**
 * GET /v1/events/history dropped the events a tenant may not see from the page it had read, but the page was read with
 * the caller's own filters: naming another tenant's device in `device` gave an empty page whose `next` said whether that
 * device had more events, so a tenant's key could count another tenant's device's events (following `next` one by
 * one), learn their types (`type`) and times (`since`, halved), and whether an id was anyone's device at all
 * (red team 10). Now ids the caller may not see are taken out of the filter: such an id answers as an id with no events.
 */
const ACME_KEY = 'acme-key-oracle-0123456789';
const GLOBEX_KEY = 'globex-key-oracle-0123456789';
const ACME_DEVICE = '02:00:00:00:0c:01';
const GLOBEX_DEVICE = '02:00:00:00:0c:02';
const NOBODYS = '02:00:00:00:0c:03';

interface Page {
  events: Array<{ id: string; deviceId: string }>;
  next?: string;
}

describe("the event history tells a tenant nothing of another tenant's device", { timeout: 60_000 }, () => {
  let t: TestGateway;
  beforeAll(async () => {
    t = await startTestGateway({
      apiKeys: [TEST_API_KEY, ACME_KEY, GLOBEX_KEY],
      apiKeyTenants: { [ACME_KEY]: 'acme', [GLOBEX_KEY]: 'globex' },
    });
    await t.gw.deviceTenants.set(ACME_DEVICE, 'acme');
    await t.gw.deviceTenants.set(GLOBEX_DEVICE, 'globex');
    t.gw.bus.publish('device.online', ACME_DEVICE);
    for (let i = 0; i < 5; i++) t.gw.bus.publish(i % 2 ? 'device.offline' : 'device.online', GLOBEX_DEVICE, { reason: 'flap' });
  });
  afterAll(async () => {
    await t.close();
  });
  const read = (query: string, apiKey: string) => t.api<Page>('GET', `/v1/events/history?${query}`, undefined, { apiKey });

  it("answers another tenant's device as an id with no events: no page to follow", async () => {
    const theirs = await read(`device=${GLOBEX_DEVICE}&limit=1`, ACME_KEY);
    const none = await read(`device=${NOBODYS}&limit=1`, ACME_KEY);
    expect(theirs.status).toBe(200);
    expect(none.body).toEqual({ events: [] });
    // Before: {events: [], next: "<seq>"}, and following next counted globex's 5 events.
    expect(theirs.body).toEqual(none.body);
    // By type and time too.
    expect((await read(`device=${GLOBEX_DEVICE}&type=device.offline&limit=1`, ACME_KEY)).body).toEqual({ events: [] });
    // Globex itself reads them, paged.
    const own = await read(`device=${GLOBEX_DEVICE}&limit=1`, GLOBEX_KEY);
    expect(own.body.events.map((e) => e.deviceId)).toEqual([GLOBEX_DEVICE]);
    expect(own.body.next).toBeDefined();
  });

  it('keeps the ids the caller sees from a list that also names ids it does not', async () => {
    const mixed = await read(`device=${ACME_DEVICE},${GLOBEX_DEVICE}&limit=1`, ACME_KEY);
    expect(mixed.status).toBe(200);
    expect(mixed.body.events.map((e) => e.deviceId)).toEqual([ACME_DEVICE]);
    // Before: a next, from globex's events after acme's one.
    expect(mixed.body.next).toBeUndefined();
    // An operator key still reads both.
    const ops = await t.api<Page>('GET', `/v1/events/history?device=${ACME_DEVICE},${GLOBEX_DEVICE}&limit=1000`);
    expect(ops.body.events).toHaveLength(6);
  });
});
