import type { FastifyInstance } from 'fastify';
import { describe, expect, it } from 'vitest';
import { callerDirectory, eventVisibility, operatorOnly, scopeDeviceRoutes, visibleDeviceId } from '../../src/api/device-scope.js';
import type { DeviceDirectory, DeviceSummary } from '../../src/devices/directory.js';
import type { DeviceTenancy } from '../../src/devices/tenants.js';
import { apiPart, bearer } from '../../../test/support/api-parts.js';

const OPERATOR = 'operator-key-0123456789';
const ACME = 'acme-key-0123456789abcd';
const GLOBEX = 'globex-key-0123456789ab';
const MINE = 'aa:bb:cc:00:00:01'; // acme's
const THEIRS = 'aa:bb:cc:00:00:02'; // globex's
const NOBODYS = 'aa:bb:cc:00:00:03'; // no tenant: operators only
const tenancy: DeviceTenancy = { tenantOf: (id) => ({ [MINE]: 'acme', [THEIRS]: 'globex' })[id] };
const keyTenant = (k: string) => ({ [ACME]: 'acme', [GLOBEX]: 'globex' })[k];

const summary = (id: string) => ({ id }) as DeviceSummary;
/** A directory stand-in: every device known, each page all of them. */
const directory: DeviceDirectory = {
  find: () => undefined,
  device: () => {
    throw new Error('not in this test');
  },
  get: (id) => summary(id),
  page: () => ({ devices: [MINE, THEIRS, NOBODYS].map(summary), next: undefined }),
  ready: () => [],
  onChange: () => () => undefined,
};

/** Routes under the scope hooks, each answering what the helpers say for the caller. */
async function app(): Promise<FastifyInstance> {
  return apiPart(
    async (scope) => {
      scopeDeviceRoutes(scope, tenancy);
      scope.get<{ Params: { deviceId: string } }>('/v1/devices/:deviceId/photos', async (req) => ({ reached: req.params.deviceId }));
      // A route that scopes its device itself: no hook; its handler answers.
      scope.get<{ Params: { deviceId: string } }>('/v1/devices/:deviceId/own', { config: { scopesItsDevice: true } }, async (req) => ({
        reached: req.params.deviceId,
      }));
      scope.get<{ Params: { deviceId: string } }>('/v1/devices/:deviceId', async (req) => ({ id: visibleDeviceId(req, tenancy, req.params.deviceId) }));
      scope.get('/v1/devices', async (req) => ({
        ids: callerDirectory(req, directory, tenancy)
          .page({}, { limit: 10 })
          .devices.map((d) => d.id),
      }));
      scope.get('/v1/events/history', async (req) => {
        const filter = eventVisibility(req, tenancy);
        // Events of MINE published under acme, under globex (before it moved to acme), and under no tenant.
        const published = ['acme', 'globex', undefined].map((tenant) => ({ deviceId: MINE, tenant }));
        return {
          all: filter === undefined,
          kept: [MINE, THEIRS, NOBODYS, ''].filter((deviceId) => filter?.seesDevice(deviceId) ?? true),
          keptOfMine: published.filter((e) => filter?.sees(e) ?? true).map((e) => e.tenant ?? null),
        };
      });
      await scope.register(async (ops) => {
        operatorOnly(ops, 'schedules');
        ops.get('/v1/schedules', async () => ({ ok: true }));
      });
    },
    { keys: [OPERATOR, ACME, GLOBEX], tenantOf: keyTenant },
  );
}
const get = async (a: FastifyInstance, url: string, key: string) => {
  const r = await a.inject({ method: 'GET', url, headers: bearer(key) });
  return { status: r.statusCode, body: r.json<Record<string, unknown>>() };
};

describe('device routes through the caller’s tenant (api/device-scope.ts)', () => {
  it('answers 404 for another tenant’s device under /v1/devices/{id}, before the handler runs', async () => {
    const a = await app();
    expect(await get(a, `/v1/devices/${MINE}/photos`, ACME)).toEqual({ status: 200, body: { reached: MINE } });
    const other = await get(a, `/v1/devices/${THEIRS.replaceAll(':', '_')}/photos`, ACME);
    expect([other.status, other.body['code']]).toEqual([404, 'DEVICE_NOT_FOUND']);
    // An operator key sees every device, one without a tenant included; a tenant key does not.
    expect((await get(a, `/v1/devices/${NOBODYS}/photos`, OPERATOR)).status).toBe(200);
    expect((await get(a, `/v1/devices/${NOBODYS}/photos`, GLOBEX)).status).toBe(404);
    // A malformed id is left to the route (its own 400).
    expect(await get(a, '/v1/devices/not-a-mac/photos', ACME)).toEqual({ status: 200, body: { reached: 'not-a-mac' } });
    // A route that says it scopes its device itself is left to do so.
    expect(await get(a, `/v1/devices/${THEIRS}/own`, ACME)).toEqual({ status: 200, body: { reached: THEIRS } });
    await a.close();
  });

  it('says "never connected" for what a tenant may not see, and 400 for a malformed id', async () => {
    const a = await app();
    expect(await get(a, `/v1/devices/${MINE.toUpperCase()}`, ACME)).toEqual({ status: 200, body: { id: MINE } });
    const hidden = await get(a, `/v1/devices/${THEIRS}`, ACME);
    expect(hidden.body).toMatchObject({ code: 'DEVICE_NOT_FOUND', detail: `no device ${THEIRS} has ever connected` });
    expect((await get(a, '/v1/devices/xyz', OPERATOR)).body['code']).toBe('INVALID_REQUEST');
    await a.close();
  });

  it('lists only the caller’s devices, and keeps only its devices’ events (fleet-wide ones for operators)', async () => {
    const a = await app();
    expect((await get(a, '/v1/devices', OPERATOR)).body).toEqual({ ids: [MINE, THEIRS, NOBODYS] });
    expect((await get(a, '/v1/devices', GLOBEX)).body).toEqual({ ids: [THEIRS] });
    expect((await get(a, '/v1/events/history', OPERATOR)).body).toEqual({ all: true, kept: [MINE, THEIRS, NOBODYS, ''], keptOfMine: ['acme', 'globex', null] });
    // Of its own device, only what was published under its tenant: not the previous tenant's, nor what had none.
    expect((await get(a, '/v1/events/history', ACME)).body).toEqual({ all: false, kept: [MINE], keptOfMine: ['acme'] });
    await a.close();
  });

  it('keeps cross-device routes for operator keys: 403 for a tenant key', async () => {
    const a = await app();
    expect((await get(a, '/v1/schedules', OPERATOR)).status).toBe(200);
    const refused = await get(a, '/v1/schedules', ACME);
    expect([refused.status, refused.body['code'], refused.body['detail']]).toEqual([
      403,
      'FORBIDDEN',
      'schedules are for operator keys (an API key without a tenant)',
    ]);
    await a.close();
  });
});
