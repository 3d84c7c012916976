import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { FastifyInstance } from 'fastify';
import { afterEach, describe, expect, it } from 'vitest';
import { scheduleRoutes } from '../../src/api/schedules.js';
import { SchedulesSlice } from '../../src/fleet/schedules-config.js';
import { Scheduler } from '../../src/fleet/schedules.js';
import { SqliteStore } from '../../src/store/sqlite-store.js';
import { apiPart, bearer } from '../../../test/support/api-parts.js';
import { silentLog } from '../../../test/support/device-parts.js';
import { FakeClock, Targets } from '../../../test/support/schedule-parts.js';

interface Schedule {
  id: string;
  cron?: string;
  timeZone?: string;
  at?: string;
  paused: boolean;
  nextRun: string | null;
  lastRun: string | null;
  lastResult?: { callId?: string; error?: { code: string }; skipped?: boolean };
}
interface Problem {
  code: string;
  detail: string;
}

const DEVICE = '02:00:00:00:23:01';
const NOW = Date.parse('2026-11-26T10:00:00Z');
const setVolume = (volume: number) => ({ device: DEVICE, tool: 'self.audio_speaker.set_volume', arguments: { volume } });

const dirs: string[] = [];
const closers: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const c of closers.splice(0).reverse()) await c();
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});
function tempDb(): string {
  const dir = mkdtempSync(join(tmpdir(), 'voxgate-schedules-api-'));
  dirs.push(dir);
  return join(dir, 'voxgate.db');
}

/** /v1/schedules over a real scheduler on a SQLite file, a clock moved by hand, and targets that record calls. */
async function schedulesPart(path = tempDb(), clock = new FakeClock(NOW)) {
  const store = new SqliteStore(path);
  const fired: Array<{ type: string; deviceId: string; data: Record<string, unknown> }> = [];
  const bus = { publish: (type: string, deviceId: string, data: Record<string, unknown> = {}) => void fired.push({ type, deviceId, data }) };
  const targets = new Targets();
  const scheduler = await Scheduler.open({ store, targets, bus: bus as never, log: silentLog, config: SchedulesSlice.parse({}), clock });
  const app: FastifyInstance = await apiPart((scope) => scope.register(scheduleRoutes, { scheduler }));
  const close = async () => {
    await app.close();
    await scheduler.close();
    await store.close();
  };
  closers.push(close);
  const api = async <T>(method: 'GET' | 'POST' | 'PATCH' | 'DELETE', url: string, body?: unknown) => {
    const r = await app.inject({ method, url, headers: bearer(), ...(body === undefined ? {} : { payload: body as object }) });
    return { status: r.statusCode, type: r.headers['content-type'], body: (r.body ? r.json() : undefined) as T };
  };
  return { api, clock, scheduler, targets, fired, close: async () => (closers.splice(closers.indexOf(close), 1), close()) };
}

describe('schedules over HTTP (issue 23)', () => {
  it('a one-off fires its call with a schedule.fired event; bad timing is a 400 problem; pause, delete', async () => {
    const { api, clock, scheduler, targets, fired } = await schedulesPart();
    for (const [body, words] of [
      [{ cron: 'every morning', call: setVolume(1) }, 'five-field cron'],
      [{ cron: '0 8 * * *', timeZone: 'Nowhere/Atlantis', call: setVolume(1) }, 'not an IANA time zone'],
      [{ at: 'tomorrow at eight', call: setVolume(1) }, 'ISO 8601'],
      [{ cron: '0 8 * * *' }, 'exactly one of "call"'],
    ] as const) {
      const r = await api<Problem>('POST', '/v1/schedules', body);
      expect(r.status, JSON.stringify(body)).toBe(400);
      expect(r.type).toContain('application/problem+json');
      expect(r.body.code).toBe('INVALID_REQUEST');
      expect(r.body.detail).toContain(words);
    }

    const at = new Date(NOW + 1000).toISOString();
    const made = await api<Schedule>('POST', '/v1/schedules', { at, call: setVolume(17) });
    expect(made.status).toBe(201);
    expect(made.body).toMatchObject({ at, paused: false, nextRun: at, lastRun: null });
    await clock.moveTo(NOW + 1000, scheduler);
    const e = fired.find((f) => f.type === 'schedule.fired')!;
    expect(e.deviceId).toBe(DEVICE);
    expect(e.data).toMatchObject({ scheduleId: made.body.id, run: at });
    expect(e.data['callId']).toEqual(expect.any(String));
    expect(targets.calls).toEqual([{ deviceId: DEVICE, tool: 'self.audio_speaker.set_volume', args: { volume: 17 }, tenant: undefined }]);
    const done = await api<Schedule>('GET', `/v1/schedules/${made.body.id}`);
    expect(done.body).toMatchObject({ lastRun: at, nextRun: null, lastResult: { callId: e.data['callId'] } });

    clock.t += 1000; // listed by when they were made
    const cron = await api<Schedule>('POST', '/v1/schedules', { cron: '30 8 * * 1-5', timeZone: 'Europe/Paris', call: setVolume(40) });
    expect(cron.status).toBe(201);
    expect(Date.parse(cron.body.nextRun!)).toBeGreaterThan(clock.now());
    const list = await api<{ schedules: Schedule[] }>('GET', '/v1/schedules');
    expect(list.body.schedules.map((s) => s.id)).toEqual([made.body.id, cron.body.id]);
    expect((await api<Problem>('PATCH', `/v1/schedules/${cron.body.id}`)).body.code).toBe('INVALID_REQUEST');
    expect((await api<Problem>('PATCH', `/v1/schedules/${cron.body.id}`, { paused: 'yes' })).status).toBe(400);
    expect((await api<Problem>('POST', '/v1/schedules')).status).toBe(400);
    const paused = await api<Schedule>('PATCH', `/v1/schedules/${cron.body.id}`, { paused: true });
    expect(paused.body).toMatchObject({ paused: true, nextRun: null });
    expect((await api('DELETE', `/v1/schedules/${cron.body.id}`)).status).toBe(204);
    expect((await api<Problem>('GET', `/v1/schedules/${cron.body.id}`)).body.code).toBe('NOT_FOUND');
    expect((await api('DELETE', `/v1/schedules/${cron.body.id}`)).status).toBe(404);
    expect((await api<Problem>('GET', `/v1/schedules/${'x'.repeat(65)}`)).status).toBe(400);
  });

  it('survives a restart: schedules are kept, and a one-off that fell due while down fires at start', async () => {
    const path = tempDb();
    const clock = new FakeClock(NOW);
    const first = await schedulesPart(path, clock);
    const cron = (await first.api<Schedule>('POST', '/v1/schedules', { cron: '0 7 * * *', timeZone: 'America/New_York', call: setVolume(5) })).body;
    clock.t += 1; // listed by when they were made
    const paused = (await first.api<Schedule>('POST', '/v1/schedules', { cron: '*/15 * * * *', call: setVolume(6) })).body;
    await first.api('PATCH', `/v1/schedules/${paused.id}`, { paused: true });
    const at = new Date(NOW + 4000).toISOString();
    clock.t += 1;
    const once = (await first.api<Schedule>('POST', '/v1/schedules', { at, call: setVolume(7) })).body;
    await first.close();

    // Down past the one-off's time (within the grace window).
    clock.t = NOW + 10_000;
    const second = await schedulesPart(path, clock);
    await second.scheduler.idle();
    const kept = await second.api<{ schedules: Schedule[] }>('GET', '/v1/schedules');
    expect(kept.body.schedules.map((s) => s.id)).toEqual([cron.id, paused.id, once.id]);
    expect(kept.body.schedules[0]).toMatchObject({ cron: '0 7 * * *', timeZone: 'America/New_York', nextRun: cron.nextRun, paused: false });
    expect(kept.body.schedules[1]).toMatchObject({ paused: true, nextRun: null });
    const ran = (await second.api<Schedule>('GET', `/v1/schedules/${once.id}`)).body;
    expect(ran).toMatchObject({ lastRun: at, nextRun: null });
    expect(ran.lastResult?.skipped).toBeUndefined();
    expect(second.targets.calls.map((c) => c.args)).toEqual([{ volume: 7 }]);
  });
});
