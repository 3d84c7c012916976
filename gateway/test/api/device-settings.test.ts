import Fastify from 'fastify';
import { describe, expect, it } from 'vitest';
import { deviceSettingsRoutes } from '../../src/api/device-settings.js';
import { registerProblemHandlers } from '../../src/api/problem.js';
import { DeviceRecords } from '../../src/devices/records.js';
import { DeviceVoiceModes } from '../../src/voice/modes.js';
import { silentLog } from '../../../test/support/device-parts.js';

const ID = '02:00:00:00:23:91';
const NEVER = '02:00:00:00:23:99';

/** The PATCH and DELETE routes alone, over in-memory records and voice modes (no store, no gateway). */
async function app() {
  const records = new DeviceRecords({ log: silentLog, lastSeenWriteMs: 60_000 });
  records.admitted(ID, { clientId: 'c', transport: 'websocket', at: 1 });
  const voiceModes = new DeviceVoiceModes();
  const forgotten: string[] = [];
  const a = Fastify();
  registerProblemHandlers(a);
  await a.register(deviceSettingsRoutes, {
    voiceModes,
    effectiveVoiceMode: (id) => voiceModes.get(id) ?? 'relay',
    records,
    forget: async (id) => (forgotten.push(id), records.forget(id)),
  });
  const patch = async (id: string, body: unknown) => {
    const r = await a.inject({ method: 'PATCH', url: `/v1/devices/${id}`, payload: body as Record<string, unknown> });
    return { status: r.statusCode, body: r.json<Record<string, unknown>>() };
  };
  return { a, records, patch, forgotten };
}

describe('PATCH and DELETE /v1/devices/{id} (issue 23)', () => {
  it('sets, keeps and clears name, room and tags; fields left out stay', async () => {
    const { a, patch } = await app();
    expect(await patch(ID, { name: '  Kitchen speaker ', room: 'Kitchen', tags: ['audio', 'floor:1'] })).toEqual({
      status: 200,
      body: { id: ID, voiceMode: null, effectiveVoiceMode: 'relay', name: 'Kitchen speaker', room: 'Kitchen', tags: ['audio', 'floor:1'], tenant: null },
    });
    // A voice-mode-only PATCH leaves the metadata alone (and answers with all of it).
    expect((await patch(ID, { voiceMode: 'off' })).body).toEqual({
      id: ID,
      voiceMode: 'off',
      effectiveVoiceMode: 'off',
      name: 'Kitchen speaker',
      room: 'Kitchen',
      tags: ['audio', 'floor:1'],
      tenant: null,
    });
    expect((await patch(ID, { room: 'Kitchen' })).body).toMatchObject({ voiceMode: 'off', name: 'Kitchen speaker', tags: ['audio', 'floor:1'] });
    expect((await patch(ID, { name: null, tags: null })).body).toMatchObject({ name: null, room: 'Kitchen', tags: [] });
    expect((await patch(ID, { room: null, tags: [] })).body).toMatchObject({ name: null, room: null, tags: [] });
    await a.close();
  });

  it('refuses what is over the bounds or malformed with 400, and changes nothing', async () => {
    const { a, patch, records } = await app();
    await patch(ID, { name: 'Lamp' });
    for (const body of [
      { name: 'x'.repeat(65) },
      { room: 'y'.repeat(65) },
      { name: '   ' },
      { tags: ['has space'] },
      { tags: ['t'.repeat(33)] },
      { tags: Array.from({ length: 33 }, (_, i) => `t${i}`) },
      { tags: [{}] },
      { name: 'ok', voiceMode: 'loud' },
    ])
      expect((await patch(ID, body)).status, JSON.stringify(body).slice(0, 80)).toBe(400);
    expect(records.getMeta(ID).name).toBe('Lamp');
    await a.close();
  });

  it('answers 404 for name, room or tags of a device never seen; a voice mode alone may still be set in advance', async () => {
    const { a, patch } = await app();
    const r = await patch(NEVER, { name: 'Ghost', voiceMode: 'off' });
    expect([r.status, r.body['code']]).toEqual([404, 'DEVICE_NOT_FOUND']);
    // Nothing was applied: not even the voice mode that came with it.
    expect(await patch(NEVER, { voiceMode: 'off' })).toEqual({
      status: 200,
      body: { id: NEVER, voiceMode: 'off', effectiveVoiceMode: 'off', name: null, room: null, tags: [], tenant: null },
    });
    await a.close();
  });

  it('DELETE answers 204 once, then 404', async () => {
    const { a, forgotten } = await app();
    expect((await a.inject({ method: 'DELETE', url: `/v1/devices/${ID.replaceAll(':', '')}` })).statusCode).toBe(204);
    const again = await a.inject({ method: 'DELETE', url: `/v1/devices/${ID}` });
    expect([again.statusCode, again.json<{ code: string }>().code]).toEqual([404, 'DEVICE_NOT_FOUND']);
    expect(forgotten).toEqual([ID, ID]);
    await a.close();
  });
});
