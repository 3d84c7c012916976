import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { isolatedEnv, startCompiledGateway, type GatewayProcess } from '../../../test/support/gateway-process.js';
import { ReferenceDevice } from '../../../test/support/reference-device.js';
import { until } from '../../../test/support/wait.js';

const KEY = 'fleet-registry-key';
const ID = '02:00:00:00:23:51';
const OTHER = '02:00:00:00:23:52';

interface Device {
  id: string;
  online: boolean;
  state: string;
  name: string | null;
  room: string | null;
  tags: string[];
  tenant: string | null;
  firstSeenAt: string;
  lastSeenAt: string;
}

/** One run of the compiled gateway over the data dir, and its API. */
async function start(
  dataDir: string,
): Promise<{ run: GatewayProcess; base: string; ws: string; api: <T>(method: string, path: string, body?: unknown) => Promise<{ status: number; body: T }> }> {
  const run = startCompiledGateway(isolatedEnv(dataDir, { GATEWAY_API_KEYS: KEY }));
  const started = (await run.logLine('voxgate started')) as { http: string };
  const base = `http://${started.http}`;
  const api = async <T>(method: string, path: string, body?: unknown) => {
    const res = await fetch(`${base}${path}`, {
      method,
      headers: { authorization: `Bearer ${KEY}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    const text = await res.text();
    return { status: res.status, body: (text ? JSON.parse(text) : undefined) as T };
  };
  return { run, base, ws: `ws://${started.http}/xiaozhi/v1/`, api };
}

describe('a registry that lasts (issue 23)', () => {
  // Three starts of the compiled gateway: the timeout is generous for a busy machine; nothing waits on a fixed budget.
  it('keeps a named device through SIGTERM and SIGKILL: listed offline with its name, online again once it re-dials', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'voxgate-fleet-'));
    writeFileSync(join(dataDir, 'gateway.config.json'), '{}');
    const devices: ReferenceDevice[] = [];
    const runs: GatewayProcess[] = [];
    const dial = async (g: Awaited<ReturnType<typeof start>>, id: string) => {
      const d = new ReferenceDevice({ deviceId: id });
      devices.push(d);
      await d.connectWebSocket(g.ws);
      await until(async () => (await g.api<Device>('GET', `/v1/devices/${id}`)).body.state === 'ready', `${id} ready`, 30_000);
      return d;
    };
    try {
      let g = await start(dataDir);
      runs.push(g.run);
      const d = await dial(g, ID);
      await dial(g, OTHER);
      const named = await g.api<Device>('PATCH', `/v1/devices/${ID}`, { name: 'Living-room speaker', room: 'Living room', tags: ['audio', 'floor:1'] });
      expect(named.status).toBe(200);
      expect(named.body).toMatchObject({ id: ID, name: 'Living-room speaker', room: 'Living room', tags: ['audio', 'floor:1'], tenant: null, voiceMode: null });
      const first = (await g.api<Device>('GET', `/v1/devices/${ID}`)).body;
      expect(first).toMatchObject({ online: true, name: 'Living-room speaker' });
      // Filters, with the rest of the listing's paging.
      const inRoom = await g.api<{ devices: Device[] }>('GET', '/v1/devices?room=living%20ROOM&tag=audio,floor:1&online=true');
      expect(inRoom.body.devices.map((x) => x.id)).toEqual([ID]);
      expect((await g.api<{ devices: Device[] }>('GET', '/v1/devices?tag=audio&tag=kitchen')).body.devices).toEqual([]);
      // Validation: over-long names, bad tags; and an id never seen.
      expect((await g.api('PATCH', `/v1/devices/${ID}`, { name: 'x'.repeat(65) })).status).toBe(400);
      expect((await g.api('PATCH', `/v1/devices/${ID}`, { tags: ['has space'] })).status).toBe(400);
      expect((await g.api<{ code: string }>('PATCH', '/v1/devices/02:00:00:00:23:99', { name: 'ghost' })).body.code).toBe('DEVICE_NOT_FOUND');

      // SIGTERM: a graceful stop, then a new start over the same data dir.
      g.run.child.kill('SIGTERM');
      expect((await g.run.exited).code).toBe(0);
      g = await start(dataDir);
      runs.push(g.run);
      const afterTerm = (await g.api<Device>('GET', `/v1/devices/${ID}`)).body;
      expect(afterTerm).toMatchObject({ online: false, state: 'offline', name: 'Living-room speaker', room: 'Living room', tags: ['audio', 'floor:1'] });
      expect(afterTerm.firstSeenAt).toBe(first.firstSeenAt);
      expect(Date.parse(afterTerm.lastSeenAt)).toBeGreaterThanOrEqual(Date.parse(first.lastSeenAt));
      expect((await g.api<{ devices: Device[] }>('GET', '/v1/devices?online=false')).body.devices.map((x) => x.id)).toEqual([ID, OTHER]);
      d.terminate();
      await dial(g, ID);
      expect((await g.api<Device>('GET', `/v1/devices/${ID}`)).body).toMatchObject({ online: true, name: 'Living-room speaker' });

      // SIGKILL: no shutdown at all; what was acknowledged is still there.
      g.run.child.kill('SIGKILL');
      await g.run.exited;
      g = await start(dataDir);
      runs.push(g.run);
      expect((await g.api<Device>('GET', `/v1/devices/${ID}`)).body).toMatchObject({ online: false, state: 'offline', name: 'Living-room speaker' });
      await dial(g, ID);
      expect((await g.api<Device>('GET', `/v1/devices/${ID}`)).body).toMatchObject({ online: true, state: 'ready', name: 'Living-room speaker' });

      // DELETE forgets it (and closes its connection); a second DELETE and a PATCH find nothing.
      expect((await g.api('DELETE', `/v1/devices/${OTHER}`)).status).toBe(204);
      expect((await g.api('GET', `/v1/devices/${OTHER}`)).status).toBe(404);
      expect((await g.api('DELETE', `/v1/devices/${OTHER}`)).status).toBe(404);
      expect((await g.api('PATCH', `/v1/devices/${OTHER}`, { room: 'attic' })).status).toBe(404);
      expect((await g.api<{ devices: Device[] }>('GET', '/v1/devices')).body.devices.map((x) => x.id)).toEqual([ID]);
    } finally {
      for (const d of devices) d.terminate();
      for (const r of runs) r.child.kill('SIGKILL');
      await Promise.all(runs.map((r) => r.exited));
      rmSync(dataDir, { recursive: true, force: true });
    }
  }, 600_000);
});
