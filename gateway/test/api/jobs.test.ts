import type { FastifyInstance } from 'fastify';
import { afterEach, describe, expect, it } from 'vitest';
import { fleetRoutes } from '../../src/api/jobs.js';
import { apiPart, bearer } from '../../../test/support/api-parts.js';
import { mac, removeDir, startRig, tempDir, type Rig } from '../fleet/fleet-parts.js';

const OPERATOR = 'part-api-key-0123456789';
const TENANT_KEY = 'tenant-key-0123456789ab';

const cleanup: Array<() => unknown> = [];
afterEach(async () => {
  for (const f of cleanup.splice(0).reverse()) await f();
});

/**
 * /v1/devices/{id}/calls, /v1/calls and /v1/jobs over the real fleet (queued calls and jobs on a SQLite
 * store) with fake devices (test/fleet/fleet-parts.ts). mac(1) belongs to acme, whose key is TENANT_KEY.
 */
async function fleetPart(): Promise<{
  rig: Rig;
  app: FastifyInstance;
  api: <T = Record<string, unknown>>(method: string, url: string, body?: unknown, key?: string) => Promise<{ status: number; body: T }>;
}> {
  const dir = tempDir();
  cleanup.push(() => removeDir(dir));
  const rig = await startRig(dir);
  cleanup.push(() => rig.stop());
  const tenancy = { tenantOf: (id: string) => (id === mac(1) ? 'acme' : undefined) };
  const app = await apiPart((scope) => scope.register(fleetRoutes, { calls: rig.fleet.calls, jobs: rig.fleet.jobs, tenancy }), {
    keys: [OPERATOR, TENANT_KEY],
    tenantOf: (k) => (k === TENANT_KEY ? 'acme' : undefined),
  });
  cleanup.push(() => app.close());
  const api = async <T = Record<string, unknown>>(method: string, url: string, body?: unknown, key = OPERATOR) => {
    const r = await app.inject({
      method: method as 'GET',
      url,
      headers: bearer(key),
      ...(body === undefined ? {} : { payload: body as Record<string, unknown> }),
    });
    return { status: r.statusCode, body: r.json<T>() };
  };
  return { rig, app, api };
}

describe('queued calls over HTTP', () => {
  it('queues a call for an offline device (202), lists it, shows it, and cancels it; a finished call is 409', async () => {
    const { rig, api } = await fleetPart();
    const id = mac(2);
    rig.fake.add(id);
    const queued = await api<{ id: string; state: string; deviceId: string }>('POST', `/v1/devices/${id.replaceAll(':', '-')}/calls`, {
      tool: 'self.audio_speaker.set_volume',
      arguments: { volume: 30 },
    });
    expect(queued.status).toBe(202);
    expect(queued.body).toMatchObject({ state: 'queued', deviceId: id, tool: 'self.audio_speaker.set_volume', arguments: { volume: 30 } });
    expect(queued.body).not.toHaveProperty('sentAt');
    expect((await api<{ calls: Array<{ id: string }> }>('GET', `/v1/devices/${id}/calls`)).body.calls.map((c) => c.id)).toEqual([queued.body.id]);
    expect((await api('GET', `/v1/calls/${queued.body.id}`)).body).toMatchObject({ id: queued.body.id, state: 'queued' });
    const cancelled = await api('DELETE', `/v1/calls/${queued.body.id}`);
    expect([cancelled.status, cancelled.body['state']]).toEqual([200, 'cancelled']);
    const again = await api('DELETE', `/v1/calls/${queued.body.id}`);
    expect([again.status, again.body['code']]).toEqual([409, 'CALL_FINISHED']);
    expect((await api<{ calls: unknown[] }>('GET', `/v1/devices/${id}/calls?state=queued`)).body.calls).toEqual([]);
  });

  it('pages a device’s calls with an opaque cursor, and refuses one it did not give out', async () => {
    const { rig, api } = await fleetPart();
    const id = mac(3);
    rig.fake.add(id);
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) ids.push((await api<{ id: string }>('POST', `/v1/devices/${id}/calls`, { tool: 't', arguments: { i } })).body.id);
    const first = await api<{ calls: Array<{ id: string }>; nextCursor?: string }>('GET', `/v1/devices/${id}/calls?limit=3`);
    expect(first.body.calls.map((c) => c.id)).toEqual(ids.slice(0, 3));
    const rest = await api<{ calls: Array<{ id: string }>; nextCursor?: string }>('GET', `/v1/devices/${id}/calls?limit=3&cursor=${first.body.nextCursor}`);
    expect(rest.body.calls.map((c) => c.id)).toEqual(ids.slice(3));
    expect(rest.body.nextCursor).toBeUndefined();
    for (const cursor of ['not*base64', Buffer.from('q1:../x').toString('base64url'), Buffer.from('x1:call_abc').toString('base64url')]) {
      const r = await api(`GET`, `/v1/devices/${id}/calls?cursor=${encodeURIComponent(cursor)}`);
      expect([cursor, r.status, r.body['code']]).toEqual([cursor, 400, 'INVALID_REQUEST']);
    }
  });

  it('refuses what is malformed with 400 and a call it does not know with 404', async () => {
    const { api } = await fleetPart();
    const id = mac(4);
    for (const body of [{}, { tool: '' }, { tool: 't', ttlMs: 0 }, { tool: 't', ttlMs: 31 * 86_400_000 }, { tool: 'x'.repeat(129) }]) {
      const r = await api('POST', `/v1/devices/${id}/calls`, body);
      expect([JSON.stringify(body).slice(0, 60), r.status, r.body['code']]).toEqual([JSON.stringify(body).slice(0, 60), 400, 'INVALID_REQUEST']);
    }
    expect((await api('POST', '/v1/devices/kitchen/calls', { tool: 't' })).status).toBe(400);
    expect((await api('GET', '/v1/calls/call_nothing')).body['code']).toBe('NOT_FOUND');
    expect((await api('DELETE', '/v1/calls/call_nothing')).status).toBe(404);
  });

  it("hides another tenant's calls (404) from a tenant's key", async () => {
    const { rig, api } = await fleetPart();
    rig.fake.add(mac(1));
    rig.fake.add(mac(5));
    const theirs = (await api<{ id: string }>('POST', `/v1/devices/${mac(5)}/calls`, { tool: 't' })).body.id;
    const mine = (await api<{ id: string }>('POST', `/v1/devices/${mac(1)}/calls`, { tool: 't' }, TENANT_KEY)).body.id;
    expect((await api('GET', `/v1/calls/${mine}`, undefined, TENANT_KEY)).status).toBe(200);
    expect((await api('GET', `/v1/calls/${theirs}`, undefined, TENANT_KEY)).status).toBe(404);
    expect((await api('DELETE', `/v1/calls/${theirs}`, undefined, TENANT_KEY)).status).toBe(404);
    expect((await api('GET', `/v1/calls/${theirs}`)).status).toBe(200);
  });
});

describe('fleet jobs over HTTP', () => {
  it('starts a job on the devices its filter selects, shows its calls, and cancels it', async () => {
    const { rig, api } = await fleetPart();
    for (const n of [6, 7, 8]) rig.fake.add(mac(n), { board: n === 8 ? 'other' : 'devkit' });
    const job = await api<{ id: string; state: string }>('POST', '/v1/jobs', { tool: 'self.reboot', filter: { board: 'devkit' }, concurrency: 2 });
    expect(job.status).toBe(202);
    expect((await api<{ jobs: Array<{ id: string }> }>('GET', '/v1/jobs')).body.jobs.map((j) => j.id)).toEqual([job.body.id]);
    expect((await api('GET', `/v1/jobs/${job.body.id}`)).body).toMatchObject({ id: job.body.id });
    await rig.fake.event((e) => e.type === 'job.progress' && e.data['jobId'] === job.body.id);
    const devices = await api<{ devices: Array<{ deviceId: string; state: string }> }>('GET', `/v1/jobs/${job.body.id}/devices`);
    expect(devices.body.devices.map((d) => d.deviceId).sort()).toEqual([mac(6), mac(7)]);
    const cancelled = await api('POST', `/v1/jobs/${job.body.id}/cancel`);
    expect(cancelled.status).toBe(200);
    expect(['cancelled', 'succeeded', 'failed', 'aborted']).toContain(cancelled.body['state']);
  });

  it('refuses an empty filter, unknown fields and unknown jobs, and is for operator keys only', async () => {
    const { api } = await fleetPart();
    const empty = await api('POST', '/v1/jobs', { tool: 't', filter: {} });
    expect([empty.status, empty.body['detail']]).toEqual([400, 'filter needs at least one of tags, room, firmware, board, ids']);
    expect((await api('POST', '/v1/jobs', { tool: 't', filter: { ids: ['kitchen'] } })).status).toBe(400);
    expect((await api('POST', '/v1/jobs', { tool: 't', filter: { tags: ['a'] }, concurrency: 0 })).status).toBe(400);
    expect((await api('GET', '/v1/jobs/job_nothing')).body['code']).toBe('NOT_FOUND');
    expect((await api('GET', '/v1/jobs/job_nothing/devices')).status).toBe(404);
    const tenant = await api('GET', '/v1/jobs', undefined, TENANT_KEY);
    expect([tenant.status, tenant.body['code']]).toEqual([403, 'FORBIDDEN']);
  });
});
