import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { startNatsServer } from '../../../test/support/nats-server.js';
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

const hasNats = spawnSync('nats-server', ['--version']).status === 0;
const DEVICE = '02:00:00:00:23:01';
const setVolume = (volume: number) => ({ device: DEVICE, tool: 'self.audio_speaker.set_volume', arguments: { volume } });
/** A time this many ms from now, as ISO 8601 (UTC). */
const inMs = (ms: number) => new Date(Date.now() + ms).toISOString();

const open: TestGateway[] = [];
const devices: ReferenceDevice[] = [];
const dirs: string[] = [];
const stops: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const d of devices.splice(0)) d.terminate();
  for (const t of open.splice(0)) await t.close();
  for (const s of stops.splice(0)) await s();
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

async function gateway(): Promise<TestGateway> {
  const t = await startTestGateway();
  open.push(t);
  return t;
}

describe('schedules over HTTP (issue 23)', { timeout: 60_000 }, () => {
  // Validation, listing, pausing, deleting and a restart over the same file are the route's and scheduler's own
  // (test/api/schedules.test.ts, test/fleet/schedules.test.ts); here, the wiring to a real device and a real restart.
  it('a one-off fires its call on the device with a schedule.fired event', async () => {
    const t = await gateway();
    const d = new ReferenceDevice({ deviceId: DEVICE });
    devices.push(d);
    const ready = t.nextEvent('device.ready', DEVICE);
    await d.connectWebSocket(t.wsUrl);
    await ready;

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
  });

  it.skipIf(!hasNats)('creates at once past schedules.maxSchedules: one takes the last slot, the rest are refused', async () => {
    // The bound was checked before the store's write and the schedule added after it: all in flight passed. The
    // store is NATS KV (a cluster of one), whose write takes a round trip; SQLite's writes are synchronous.
    const nats = await startNatsServer();
    stops.push(() => nats.stop());
    const t = await startTestGateway({
      fleet: { schedules: { maxSchedules: 3 } },
      cluster: { enabled: true, instanceId: 'gw-bound', nats: { servers: [nats.url] } },
    });
    open.push(t);
    for (const v of [1, 2]) expect((await t.api('POST', '/v1/schedules', { cron: '@daily', call: setVolume(v) })).status).toBe(201);
    // Six connections open first (kept alive), so that the six creates reach the gateway together.
    await Promise.all([1, 2, 3, 4, 5, 6].map(() => t.api('GET', '/v1/schedules')));
    const at = await Promise.all(
      [3, 4, 5, 6, 7, 8].map((v) => t.api<{ code?: string; detail?: string }>('POST', '/v1/schedules', { cron: '@daily', call: setVolume(v) })),
    );
    expect(at.filter((r) => r.status === 201)).toHaveLength(1);
    for (const r of at.filter((x) => x.status !== 201)) {
      expect(r.status).toBe(400);
      expect(r.body.detail).toMatch(/already 3 schedules/);
    }
    expect((await t.api<{ schedules: Schedule[] }>('GET', '/v1/schedules')).body.schedules).toHaveLength(3);
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
