import { mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startTestGateway, type TestGateway } from '../../../test/support/gateway-harness.js';
import { isolatedEnv, startCompiledGateway, type GatewayProcess } from '../../../test/support/gateway-process.js';
import { ReferenceDevice } from '../../../test/support/reference-device.js';
import { until } from '../../../test/support/wait.js';

let mac = 0x10;
const nextMac = () => `02:00:00:00:0f:${(mac++).toString(16).padStart(2, '0')}`;
const mqttClientId = (d: ReferenceDevice) => `GID_voxgate@@@${d.deviceId.replace(/:/g, '_')}@@@${d.clientId}`;

interface Call {
  id: string;
  state: string;
  deviceId: string;
  result?: { content: Array<{ text?: string }>; isError: boolean };
  error?: { code: string };
}

describe('queued calls through the HTTP API (in-process gateway, reference device over MQTT)', () => {
  let t: TestGateway;
  const devices: ReferenceDevice[] = [];
  beforeAll(async () => {
    t = await startTestGateway();
  });
  afterEach(() => {
    for (const d of devices.splice(0)) d.terminate();
  });
  afterAll(() => t.close());

  it('queues a call for an offline device (202 at once) and delivers it when the device connects', async () => {
    const d = new ReferenceDevice({ deviceId: nextMac() });
    devices.push(d);
    const queued = await t.api<Call>('POST', `/v1/devices/${d.deviceId.replace(/:/g, '-')}/calls`, {
      tool: 'self.audio_speaker.set_volume',
      arguments: { volume: 23 },
    });
    expect(queued.status).toBe(202);
    expect(queued.body).toMatchObject({ state: 'queued', deviceId: d.deviceId, tool: 'self.audio_speaker.set_volume', arguments: { volume: 23 } });
    expect((await t.api<{ calls: Call[] }>('GET', `/v1/devices/${d.deviceId}/calls?state=queued`)).body.calls.map((c) => c.id)).toEqual([queued.body.id]);

    const done = t.nextEvent('call.state', d.deviceId, 20_000);
    await d.connectMqtt(t.mqttUrl, { clientId: mqttClientId(d) });
    await until(async () => (await t.api<Call>('GET', `/v1/calls/${queued.body.id}`)).body.state === 'succeeded', 'the queued call succeeded');
    await done;
    expect(d.volume).toBe(23);
    const call = await t.api<Call>('GET', `/v1/calls/${queued.body.id}`);
    expect(call.body.result).toMatchObject({ isError: false, content: [{ text: 'true' }] });
    const again = await t.api<{ code: string }>('DELETE', `/v1/calls/${queued.body.id}`);
    expect(again.status).toBe(409);
    expect(again.body.code).toBe('CALL_FINISHED');
  });

  it('refuses what it cannot queue: bad device id 400, unknown call 404, cancel of a queued call 200', async () => {
    expect((await t.api('POST', '/v1/devices/not-a-mac/calls', { tool: 'x' })).status).toBe(400);
    expect((await t.api('GET', '/v1/calls/call_unknown')).status).toBe(404);
    const c = await t.api<Call>('POST', `/v1/devices/${nextMac()}/calls`, { tool: 'x', ttlMs: 60_000 });
    const cancelled = await t.api<Call>('DELETE', `/v1/calls/${c.body.id}`);
    expect(cancelled.status).toBe(200);
    expect(cancelled.body.state).toBe('cancelled');
  });

  it('refuses a misspelled body key with 400 rather than queueing the call without it', async () => {
    const device = nextMac();
    const typo = await t.api<{ code: string; detail: string }>('POST', `/v1/devices/${device}/calls`, { tool: 'x', ttlms: 1000 });
    expect(typo.status).toBe(400);
    expect(typo.body.detail).toContain('ttlms');
    expect((await t.api<{ calls: Call[] }>('GET', `/v1/devices/${device}/calls`)).body.calls).toEqual([]);
  });

  it('runs a job over selected devices through /v1/jobs, with per-device results', async () => {
    const online = new ReferenceDevice({ deviceId: nextMac() });
    const offline = nextMac();
    devices.push(online);
    const ready = t.nextEvent('device.ready', online.deviceId);
    await online.connectMqtt(t.mqttUrl, { clientId: mqttClientId(online) });
    await ready;
    const job = await t.api<{ id: string; state: string; total: number }>('POST', '/v1/jobs', {
      tool: 'self.audio_speaker.set_volume',
      arguments: { volume: 11 },
      filter: { ids: [online.deviceId, offline] },
      concurrency: 1,
    });
    expect(job.status).toBe(202);
    expect(job.body).toMatchObject({ state: 'running', total: 2 });
    await until(
      async () => (await t.api<{ counts: { succeeded: number } }>('GET', `/v1/jobs/${job.body.id}`)).body.counts.succeeded === 1,
      'the online device ran it',
    );
    const page = await t.api<{ devices: Array<{ deviceId: string; state: string }>; nextCursor?: string }>('GET', `/v1/jobs/${job.body.id}/devices?limit=1`);
    expect(page.body.devices).toHaveLength(1);
    expect(page.body.nextCursor).toBeDefined();
    const rest = await t.api<{ devices: Array<{ deviceId: string; state: string }>; nextCursor?: string }>(
      'GET',
      `/v1/jobs/${job.body.id}/devices?limit=1&cursor=${page.body.nextCursor}`,
    );
    expect([...page.body.devices, ...rest.body.devices].map((x) => [x.deviceId, x.state]).sort()).toEqual(
      [
        [online.deviceId, 'succeeded'],
        [offline, 'queued'],
      ].sort(),
    );
    const cancelled = await t.api<{ state: string; counts: { cancelled: number } }>('POST', `/v1/jobs/${job.body.id}/cancel`);
    expect(cancelled.body).toMatchObject({ state: 'cancelled', counts: { cancelled: 1 } });
    expect((await t.api<{ jobs: Array<{ id: string }> }>('GET', '/v1/jobs')).body.jobs.map((j) => j.id)).toContain(job.body.id);
    expect((await t.api('POST', '/v1/jobs', { tool: 'x', filter: {} })).status).toBe(400);
  });
});

describe('a queued call survives restarts of the compiled gateway (SIGTERM, then SIGKILL)', () => {
  const API_KEY = 'fleet-restart-key-0123456789';
  let dataDir: string;
  let run: GatewayProcess | undefined;
  beforeAll(() => {
    dataDir = mkdtempSync(join(tmpdir(), 'voxgate-fleet-'));
    writeFileSync(join(dataDir, 'gateway.config.json'), '{}');
  });
  afterAll(async () => {
    if (run && run.child.exitCode === null) {
      run.child.kill('SIGKILL');
      await run.exited;
    }
    rmSync(dataDir, { recursive: true, force: true });
  });

  const start = async () => {
    run = startCompiledGateway(isolatedEnv(dataDir, { GATEWAY_API_KEYS: API_KEY, GATEWAY_LOG_LEVEL: 'info' }));
    const started = (await run.logLine('voxgate started')) as { http: string; mqtt: string };
    const api = async <T>(method: string, path: string, body?: unknown) => {
      const res = await fetch(`http://${started.http}${path}`, {
        method,
        headers: { authorization: `Bearer ${API_KEY}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
        body: body === undefined ? null : JSON.stringify(body),
      });
      return { status: res.status, body: (await res.json()) as T };
    };
    return { api, mqttUrl: `mqtt://${started.mqtt}` };
  };

  it('is still queued after SIGTERM and after SIGKILL, and is delivered once the device connects', async () => {
    const d = new ReferenceDevice({ deviceId: nextMac() });
    try {
      let g = await start();
      const queued = await g.api<Call>('POST', `/v1/devices/${d.deviceId}/calls`, { tool: 'self.audio_speaker.set_volume', arguments: { volume: 61 } });
      expect(queued.status).toBe(202);

      run!.child.kill('SIGTERM');
      expect((await run!.exited).code).toBe(0);
      g = await start();
      expect((await g.api<Call>('GET', `/v1/calls/${queued.body.id}`)).body.state).toBe('queued');

      run!.child.kill('SIGKILL');
      await run!.exited;
      g = await start();
      expect((await g.api<Call>('GET', `/v1/calls/${queued.body.id}`)).body.state).toBe('queued');

      await d.connectMqtt(g.mqttUrl, { clientId: mqttClientId(d) });
      await until(
        async () => (await g.api<Call>('GET', `/v1/calls/${queued.body.id}`)).body.state === 'succeeded',
        'the call was delivered after the restarts',
        30_000,
      );
      expect(d.volume).toBe(61);
      expect(statSync(join(dataDir, 'voxgate.db')).size).toBeGreaterThan(0);
    } finally {
      d.terminate();
    }
  }, 120_000);
});
