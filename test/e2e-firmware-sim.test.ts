import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { DeviceSimProcess } from './support/device-sim-process.js';
import { startTestGateway, TEST_API_KEY, type TestGateway } from './support/gateway-harness.js';
import { openSse } from './support/sse.js';

/**
 * End to end: the real gateway and the C++ firmware simulator (firmware/host), each a real process or
 * server on 127.0.0.1. The device provisions itself through the OTA endpoint, as a flashed board does.
 */
const SECRET = 'e2e-device-secret-0123456789';

interface Tools {
  tools: Array<{ name: string; userOnly: boolean; inputSchema: { properties?: Record<string, { enum?: string[] }> } }>;
}
interface Call {
  content: Array<{ type: string; text: string }>;
  isError: boolean;
}

describe.each(['websocket', 'mqtt'] as const)('firmware simulator over %s', (transport) => {
  const cleanup: Array<() => Promise<void>> = [];
  afterEach(async () => {
    for (const f of cleanup.splice(0).reverse()) await f();
  });
  const gateway = async (ports?: { http: number; mqtt: number }, dataDir?: string, policy: 'open' | 'approve' = 'open') => {
    const t = await startTestGateway({
      deviceAuth: 'hmac',
      deviceSecret: SECRET,
      // `open`: a new device id enrolls on its first OTA check; `approve` (the hmac default): by activation code.
      enrollment: { policy },
      ota: { transport },
      ...(ports ? { http: { port: ports.http }, mqtt: { port: ports.mqtt } } : {}),
      ...(dataDir ? { dataDir } : {}),
    });
    cleanup.push(() => t.close());
    return t;
  };
  const sim = (t: TestGateway, deviceId: string, extra: string[] = []) => {
    const p = new DeviceSimProcess(['--ota', `${t.baseUrl}/xiaozhi/ota/`, '--device-id', deviceId, '--reconnect-max-ms', '1000', ...extra]);
    cleanup.push(() => p.stop());
    return p;
  };
  const mac = transport === 'websocket' ? '02:00:00:00:aa:01' : '02:00:00:00:bb:01';

  it('comes online with its whole catalog, answers calls and errors, and its notifications reach SSE', async () => {
    const t = await gateway();
    const ready = t.nextEvent('device.ready', mac, 30_000);
    const p = sim(t, mac, ['--tools', '60']);
    const e = await ready;
    expect(e.data['toolCount']).toBe(65);
    const info = await t.api<{ transport: string; server: { name: string } }>('GET', `/v1/devices/${mac}`);
    expect(info.body.transport).toBe(transport);
    expect(p.events.filter((x) => x.event === 'request' && x['method'] === 'tools/list').length).toBeGreaterThanOrEqual(3);

    const tools = (await t.api<Tools>('GET', `/v1/devices/${mac}/tools`)).body.tools;
    expect(tools.length).toBe(65);
    expect(new Set(tools.map((x) => x.name)).size).toBe(65);
    expect(tools.find((x) => x.name === 'self.reboot')?.userOnly).toBe(true);

    const set = await t.api<Call>('POST', `/v1/devices/${mac}/tools/self.audio_speaker.set_volume/call`, { arguments: { volume: 55 } });
    expect(set.status).toBe(200);
    expect(set.body).toMatchObject({ isError: false, content: [{ type: 'text', text: 'true' }] });
    const status = await t.api<Call>('POST', `/v1/devices/${mac}/tools/self.get_device_status/call`, {});
    expect(JSON.parse(status.body.content[0]!.text)).toMatchObject({ audio_speaker: { volume: 55 } });

    const sensor = tools.find((x) => x.inputSchema.properties?.['quantity']?.enum?.includes('humidity'))!;
    const read = await t.api<Call>('POST', `/v1/devices/${mac}/tools/${sensor.name}/call`, { arguments: { quantity: 'humidity' } });
    expect(read.status).toBe(200);
    expect(read.body.isError).toBe(false);

    const refused = await t.api<{ code: string; detail: string }>('POST', `/v1/devices/${mac}/tools/self.audio_speaker.set_volume/call`, {
      arguments: { volume: 101 },
    });
    expect([refused.status, refused.body.code]).toEqual([422, 'INVALID_ARGUMENTS']);
    // Past the gateway's own check, the device's JSON-RPC error comes back with its code.
    const raw = await t.api<{ code: string; rpcCode: number; detail: string }>('POST', `/v1/devices/${mac}/rpc`, {
      method: 'tools/call',
      params: { name: 'self.audio_speaker.set_volume', arguments: { volume: 500 } },
    });
    expect([raw.status, raw.body.code, raw.body.rpcCode]).toEqual([502, 'DEVICE_ERROR', -32602]);
    expect(raw.body.detail).toContain('volume');
    const unknown = await t.api<{ code: string }>('POST', `/v1/devices/${mac}/tools/self.nope/call`, {});
    expect(unknown.body.code).toBe('TOOL_NOT_FOUND');

    const sse = await openSse(`${t.baseUrl}/v1/events?device=${mac}&type=device.notification`, { authorization: `Bearer ${TEST_API_KEY}` });
    cleanup.push(async () => sse.close());
    p.command('notify notifications/state_changed {"button":"boot","pressed":true}');
    const note = JSON.parse((await sse.events.next(15_000, 'the notification on SSE')).data) as { data: { method: string; params: unknown } };
    expect(note.data).toEqual({ method: 'notifications/state_changed', params: { button: 'boot', pressed: true } });
  });

  it('enrolls by the activation code it shows: an operator approves it, and it comes online', async () => {
    const t = await gateway(undefined, undefined, 'approve');
    const p = sim(t, mac, ['--activation-poll-ms', '100']);
    const shown = await p.waitFor((e) => e.event === 'activation' && e['state'] === 'code', 15_000, 'the activation code');
    const code = String(shown['code']);
    expect(code).toMatch(/^\d{6}$/);
    expect(shown['timeout_ms']).toBeGreaterThan(0);
    const pending = await t.api<{ enrollments: Array<{ code: string; deviceId: string }> }>('GET', '/v1/enrollments');
    expect(pending.body.enrollments).toEqual([expect.objectContaining({ code, deviceId: mac })]);
    expect((await t.api('GET', `/v1/devices/${mac}`)).status).toBe(404); // no credentials yet: never connected

    const ready = t.nextEvent('device.ready', mac, 30_000);
    expect((await t.api('POST', `/v1/enrollments/${code}/approve`)).status).toBe(200);
    await p.waitFor((e) => e.event === 'activation' && e['state'] === 'activated', 15_000, 'the device to see the approval');
    await ready;
    const r = await t.api<Call>('POST', `/v1/devices/${mac}/tools/self.led.set/call`, { arguments: { on: true } });
    expect(r.status).toBe(200);
    expect((await t.api<{ enrollments: unknown[] }>('GET', '/v1/enrollments')).body.enrollments).toEqual([]);
  }, 45_000);

  it('reconnects by itself when the gateway restarts', async () => {
    // A restart keeps its data dir: the enrollment the device's credentials are bound to.
    const dataDir = mkdtempSync(join(tmpdir(), 'voxgate-e2e-'));
    cleanup.push(async () => rmSync(dataDir, { recursive: true, force: true }));
    const first = await gateway(undefined, dataDir);
    const ready = first.nextEvent('device.ready', mac, 30_000);
    const p = sim(first, mac);
    await ready;
    const ports = { http: first.gw.httpPort, mqtt: first.gw.mqttPort! };
    await first.close();
    await p.waitForNext((e) => e.event === 'closed' || e.event === 'error', 15_000, 'the device to notice the gateway is gone');

    const second = await gateway(ports, dataDir);
    await second.nextEvent('device.ready', mac, 30_000);
    const r = await second.api<Call>('POST', `/v1/devices/${mac}/tools/self.led.set/call`, { arguments: { on: true } });
    expect(r.status).toBe(200);
    expect(r.body.content[0]?.text).toBe('true');
  });
});
