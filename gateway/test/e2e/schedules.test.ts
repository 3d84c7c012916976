import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { startTestGateway, TEST_API_KEY, type TestGateway } from '../../../test/support/gateway-harness.js';
import { isolatedEnv, startCompiledGateway, type GatewayProcess } from '../../../test/support/gateway-process.js';
import { ReferenceDevice } from '../../../test/support/reference-device.js';
import { until } from '../../../test/support/wait.js';

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
const setVolume = (volume: number) => ({ device: DEVICE, tool: 'self.audio_speaker.set_volume', arguments: { volume } });
/** A time this many ms from now, as ISO 8601 (UTC). */
const inMs = (ms: number) => new Date(Date.now() + ms).toISOString();

const open: TestGateway[] = [];
const devices: ReferenceDevice[] = [];
const dirs: string[] = [];
afterEach(async () => {
  for (const d of devices.splice(0)) d.terminate();
  for (const t of open.splice(0)) await t.close();
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

async function gateway(dataDir?: string): Promise<TestGateway> {
  const t = await startTestGateway(dataDir ? { dataDir } : {});
  open.push(t);
  return t;
}

describe('schedules over HTTP (issue 23)', { timeout: 60_000 }, () => {
  it('a one-off fires its call on the device with a schedule.fired event; bad timing is a 400 problem; pause, delete', async () => {
    const t = await gateway();
    const d = new ReferenceDevice({ deviceId: DEVICE });
    devices.push(d);
    const ready = t.nextEvent('device.ready', DEVICE);
    await d.connectWebSocket(t.wsUrl);
    await ready;

    for (const [body, words] of [
      [{ cron: 'every morning', call: setVolume(1) }, 'five-field cron'],
      [{ cron: '0 8 * * *', timeZone: 'Nowhere/Atlantis', call: setVolume(1) }, 'not an IANA time zone'],
      [{ at: 'tomorrow at eight', call: setVolume(1) }, 'ISO 8601'],
      [{ cron: '0 8 * * *' }, 'exactly one of "call"'],
    ] as const) {
      const r = await t.api<Problem>('POST', '/v1/schedules', body);
      expect(r.status, JSON.stringify(body)).toBe(400);
      expect(r.headers.get('content-type')).toContain('application/problem+json');
      expect(r.body.code).toBe('INVALID_REQUEST');
      expect(r.body.detail).toContain(words);
    }

    const fired = t.nextEvent('schedule.fired', DEVICE, 20_000);
    const at = inMs(1000);
    const made = await t.api<Schedule>('POST', '/v1/schedules', { at, call: setVolume(17) });
    expect(made.status).toBe(201);
    expect(made.body).toMatchObject({ at, paused: false, nextRun: at, lastRun: null });
    const e = await fired;
    expect(e.data).toMatchObject({ scheduleId: made.body.id, run: at });
    expect(e.data['callId']).toEqual(expect.any(String));
    await until(() => d.volume === 17, 'the scheduled call on the device');
    const done = await t.api<Schedule>('GET', `/v1/schedules/${made.body.id}`);
    expect(done.body).toMatchObject({ lastRun: at, nextRun: null, lastResult: { callId: e.data['callId'] } });

    const cron = await t.api<Schedule>('POST', '/v1/schedules', { cron: '30 8 * * 1-5', timeZone: 'Europe/Paris', call: setVolume(40) });
    expect(cron.status).toBe(201);
    expect(Date.parse(cron.body.nextRun!)).toBeGreaterThan(Date.now());
    const list = await t.api<{ schedules: Schedule[] }>('GET', '/v1/schedules');
    expect(list.body.schedules.map((s) => s.id)).toEqual([made.body.id, cron.body.id]);
    expect((await t.api<Problem>('PATCH', `/v1/schedules/${cron.body.id}`)).body.code).toBe('INVALID_REQUEST');
    expect((await t.api<Problem>('PATCH', `/v1/schedules/${cron.body.id}`, { paused: 'yes' })).status).toBe(400);
    expect((await t.api<Problem>('POST', '/v1/schedules')).status).toBe(400);
    const paused = await t.api<Schedule>('PATCH', `/v1/schedules/${cron.body.id}`, { paused: true });
    expect(paused.body).toMatchObject({ paused: true, nextRun: null });
    expect((await t.api('DELETE', `/v1/schedules/${cron.body.id}`)).status).toBe(204);
    expect((await t.api<Problem>('GET', `/v1/schedules/${cron.body.id}`)).body.code).toBe('NOT_FOUND');
    expect((await t.api('DELETE', `/v1/schedules/${cron.body.id}`)).status).toBe(404);
  });

  it('survives a restart: schedules are kept, and a one-off that fell due while down fires at start', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'voxgate-schedules-e2e-'));
    dirs.push(dataDir);
    const first = await gateway(dataDir);
    const cron = (await first.api<Schedule>('POST', '/v1/schedules', { cron: '0 7 * * *', timeZone: 'America/New_York', call: setVolume(5) })).body;
    const paused = (await first.api<Schedule>('POST', '/v1/schedules', { cron: '*/15 * * * *', call: setVolume(6) })).body;
    await first.api('PATCH', `/v1/schedules/${paused.id}`, { paused: true });
    // Far enough ahead that the gateway is closed before it is due.
    const at = inMs(4000);
    const once = (await first.api<Schedule>('POST', '/v1/schedules', { at, call: setVolume(7) })).body;
    await first.close();
    open.splice(open.indexOf(first), 1);

    const second = await gateway(dataDir);
    const kept = await second.api<{ schedules: Schedule[] }>('GET', '/v1/schedules');
    expect(kept.body.schedules.map((s) => s.id)).toEqual([cron.id, paused.id, once.id]);
    expect(kept.body.schedules[0]).toMatchObject({ cron: '0 7 * * *', timeZone: 'America/New_York', nextRun: cron.nextRun, paused: false });
    expect(kept.body.schedules[1]).toMatchObject({ paused: true, nextRun: null });
    // The device is not connected: whatever the call's fate, the run happened after the restart, once.
    await until(
      async () => (await second.api<Schedule>('GET', `/v1/schedules/${once.id}`)).body.lastRun !== null,
      'the one-off to run after the restart',
      20_000,
    );
    const ran = (await second.api<Schedule>('GET', `/v1/schedules/${once.id}`)).body;
    expect(ran).toMatchObject({ lastRun: at, nextRun: null });
    expect(ran.lastResult?.skipped).toBeUndefined();
  });

  it('survives a SIGKILL: what was acknowledged is kept, and the one-off runs after the restart', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'voxgate-schedules-kill-'));
    dirs.push(dataDir);
    writeFileSync(join(dataDir, 'gateway.config.json'), '{}');
    const env = isolatedEnv(dataDir, { GATEWAY_API_KEYS: TEST_API_KEY });
    const procs: GatewayProcess[] = [];
    const start = async () => {
      const p = startCompiledGateway(env);
      procs.push(p);
      const http = String((await p.logLine('voxgate started'))['http']);
      const base = `http://127.0.0.1:${http.slice(http.lastIndexOf(':') + 1)}`;
      return async <T>(method: string, path: string, body?: unknown) => {
        const res = await fetch(base + path, {
          method,
          headers: { authorization: `Bearer ${TEST_API_KEY}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
          body: body === undefined ? null : JSON.stringify(body),
        });
        return { status: res.status, body: (await res.json()) as T };
      };
    };
    try {
      const api = await start();
      const cron = await api<Schedule>('POST', '/v1/schedules', { cron: '@daily', call: setVolume(8) });
      const at = inMs(3000);
      const once = await api<Schedule>('POST', '/v1/schedules', { at, call: setVolume(9) });
      expect([cron.status, once.status]).toEqual([201, 201]);
      procs[0]!.child.kill('SIGKILL');
      expect((await procs[0]!.exited).signal).toBe('SIGKILL');

      const again = await start();
      const kept = await again<{ schedules: Schedule[] }>('GET', '/v1/schedules');
      expect(kept.body.schedules.map((x) => x.id)).toEqual([cron.body.id, once.body.id]);
      await until(
        async () => (await again<Schedule>('GET', `/v1/schedules/${once.body.id}`)).body.lastRun === at,
        'the one-off to run after the restart',
        20_000,
      );
    } finally {
      for (const p of procs) if (p.child.exitCode === null && p.child.signalCode === null) p.child.kill('SIGKILL');
      await Promise.all(procs.map((p) => p.exited));
    }
  }, 180_000);
});
