import { OtaResponseSchema, type OtaResponse } from '@voxgate/protocol';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestGateway, TEST_API_KEY, type TestGateway } from '../../../test/support/gateway-harness.js';
import { ReferenceDevice } from '../../../test/support/reference-device.js';

/**
 * A pending enrollment is a tenant's when its device is that tenant's, or when a tenant rule gives it to the tenant.
 * The rule was asked with the claim's own client id and board: what the OTA check's sender wrote. Red team 7 stopped an
 * OTA check naming a device the gateway knows from giving it a tenant by a client id or board the device does not
 * connect with; the claim did not follow. So once an operator's device (no tenant) had to enroll again (re-enrolled, or
 * a fleet moved from `open` to `hmac`), anyone who could reach the OTA endpoint sent a check naming its id with a client
 * id under a tenant's `clientIdPrefix` rule, and that tenant's key saw the claim and approved it: the operator's
 * device became the tenant's (its record, its past events, its tools), bound to the sender's client id (red team 10).
 * Now a claim for a device the gateway has recorded takes a rule's tenant only under the client id the device connects
 * with; any other claim for it stays the operator's.
 */
const SECRET = 'claim-tenant-device-secret-0123456789';
const KEY_A = 'key-tenant-acme-claims-0123456789';
const DEV = '02:00:00:00:7e:01';

interface Pending {
  enrollments: Array<{ code: string; deviceId: string; clientId: string }>;
}
interface Problem {
  code: string;
}

describe("a claim for a known device gets a rule's tenant only under the client id the device connects with", { timeout: 90_000 }, () => {
  let t: TestGateway;
  const dev = new ReferenceDevice({ deviceId: DEV, clientId: 'ops-speaker-0001', tools: [{ name: 'self.mark', description: 'Mark', run: () => true }] });
  const ota = async (deviceId: string, clientId: string): Promise<OtaResponse> => {
    const res = await fetch(`${t.baseUrl}/xiaozhi/ota/`, {
      method: 'POST',
      headers: { 'device-id': deviceId, 'client-id': clientId, 'content-type': 'application/json' },
      body: JSON.stringify({ application: { version: '1.7.6' }, board: { type: 'sim-board' } }),
    });
    expect(res.status).toBe(200);
    return OtaResponseSchema.parse(await res.json());
  };
  const pendingFor = async (apiKey: string) => (await t.api<Pending>('GET', '/v1/enrollments', undefined, { apiKey })).body.enrollments;

  beforeAll(async () => {
    t = await startTestGateway({
      deviceAuth: 'hmac',
      deviceSecret: SECRET,
      apiKeys: [TEST_API_KEY, KEY_A],
      apiKeyTenants: { [KEY_A]: 'acme' },
      enrollment: { rateLimit: { burst: 100, perSecond: 50 }, tenantRules: [{ tenant: 'acme', clientIdPrefix: 'acme-' }] },
    });
    // The operator's device: approved without a tenant, connected (recorded), then re-enrolled (it must enroll again).
    const code = (await ota(DEV, dev.clientId)).activation!.code;
    expect((await t.api('POST', `/v1/enrollments/${code}/approve`)).status).toBe(200);
    const creds = await ota(DEV, dev.clientId);
    const ready = t.nextEvent('device.ready', DEV);
    await dev.connectWebSocket(t.wsUrl, { token: creds.websocket!.token! });
    await ready;
    const offline = t.nextEvent('device.offline', DEV);
    expect((await t.api('POST', `/v1/enrollments/devices/${DEV}/reenroll`)).status).toBe(200);
    await offline;
  });
  afterAll(async () => {
    dev.terminate();
    await t.close();
  });

  it("keeps a claim naming the device under a tenant's client id prefix the operator's", async () => {
    const forged = (await ota(DEV, 'acme-0001')).activation!.code;
    // Before: acme's key listed the claim and approved it (200, tenant "acme"), and the device was acme's.
    expect(await pendingFor(KEY_A)).toEqual([]);
    const approve = await t.api<Problem>('POST', `/v1/enrollments/${forged}/approve`, undefined, { apiKey: KEY_A });
    expect([approve.status, approve.body.code]).toEqual([404, 'ENROLLMENT_NOT_FOUND']);
    expect((await t.api<{ tenant: string | null }>('GET', `/v1/devices/${DEV}`)).body.tenant).toBeNull();
    expect((await t.api('GET', `/v1/devices/${DEV}`, undefined, { apiKey: KEY_A })).status).toBe(404);
    // The operator sees it, beside the device's own claim, and approves the one on the device.
    const own = (await ota(DEV, dev.clientId)).activation!.code;
    expect((await pendingFor(TEST_API_KEY)).map((e) => e.code).sort()).toEqual([forged, own].sort());
    expect((await t.api('POST', `/v1/enrollments/${own}/approve`)).status).toBe(200);
  });

  it("still gives a never-seen id's claim to the rule's tenant (its first check's word, as before)", async () => {
    const fresh = '02:00:00:00:7e:02';
    const code = (await ota(fresh, 'acme-0002')).activation!.code;
    expect((await pendingFor(KEY_A)).map((e) => e.code)).toEqual([code]);
    const approve = await t.api<{ tenant: string }>('POST', `/v1/enrollments/${code}/approve`, undefined, { apiKey: KEY_A });
    expect([approve.status, approve.body.tenant]).toEqual([200, 'acme']);
  });
});
