import { afterEach, describe, expect, it } from 'vitest';
import type { ConverseKit } from '../../src/voice/converse/converse.js';
import { llmModels } from '../../../test/support/assistant.js';
import { startTestGateway, type TestGateway } from '../../../test/support/gateway-harness.js';
import { startLlmServer } from '../../../test/support/llm-server.js';
import { ReferenceDevice } from '../../../test/support/reference-device.js';
import { VoiceServerDouble } from '../../../test/support/voice-server.js';
import { until } from '../../../test/support/wait.js';
import { pcmBytes, standInCodec } from '../support/voice-client.js';

/**
 * voice.maxSessionsPerTenant (red team 11, 2026-11-30): one tenant's fleet held every session of voice.maxSessions,
 * and every other tenant's devices were refused voice. Real sockets on 127.0.0.1; each step awaits what it needs.
 */

let mac = 0x10;
const nextMac = () => `02:00:00:00:0e:${(mac++).toString(16).padStart(2, '0')}`;
const SHARE_LINE = "voice session refused: the device's tenant holds its share of the voice sessions (voice.maxSessionsPerTenant)";

interface OtaMqtt {
  mqtt: { client_id: string; username: string; password: string; publish_topic: string };
}

const cleanup: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const f of cleanup.splice(0).reverse()) await f();
});

/** A device of `tenant` (undefined: none), known to the gateway's tenancy before it connects. */
async function deviceOf(t: TestGateway, tenant: string | undefined): Promise<ReferenceDevice> {
  const d = new ReferenceDevice({ deviceId: nextMac() });
  cleanup.push(() => d.terminate());
  if (tenant !== undefined) await t.gw.deviceTenants.set(d.deviceId, tenant);
  return d;
}

async function relayGateway(voice: Record<string, unknown>, extra: Record<string, unknown> = {}): Promise<TestGateway> {
  const vs = await VoiceServerDouble.start();
  cleanup.push(() => vs.close());
  const t = await startTestGateway({ ...extra, voice: { mode: 'relay', upstream: { url: vs.url }, ...voice } });
  cleanup.push(() => t.close());
  return t;
}

describe('voice.maxSessionsPerTenant: one tenant cannot take every voice session', () => {
  it("WebSocket: acme fills its share, its next device is refused as for a full pool; globex still talks; acme's count returns to zero", async () => {
    const t = await relayGateway({ maxSessions: 4, maxSessionsPerTenant: 2 });
    const shares = t.gw.voice!.shares;
    const a1 = await deviceOf(t, 'acme');
    const a2 = await deviceOf(t, 'acme');
    await a1.connectWebSocket(t.wsUrl);
    await a2.connectWebSocket(t.wsUrl);
    expect(shares.heldBy('acme')).toBe(2);

    const a3 = await deviceOf(t, 'acme');
    const alert = a3.waitForFrame((f) => f['type'] === 'alert', 10_000);
    await expect(a3.connectWebSocket(t.wsUrl)).rejects.toThrow();
    // The same answer as a full pool: an alert the firmware shows, then the close.
    expect(await alert).toMatchObject({ status: 'error', message: expect.stringContaining('busy') as unknown });
    expect(await t.metric('voxgate_voice_sessions_total', { transport: 'websocket', outcome: 'tenant_full' })).toBe(1);
    expect(await t.metric('voxgate_voice_sessions_total', { outcome: 'busy' })).toBe(0);
    const line = t.logs.find((l) => l['msg'] === SHARE_LINE);
    expect(line).toMatchObject({ deviceId: a3.deviceId, tenant: 'acme', maxSessionsPerTenant: 2 });

    // Another tenant's device, and a device without a tenant (the operator's bucket), still get voice.
    const b = await deviceOf(t, 'globex');
    await b.connectWebSocket(t.wsUrl);
    const o = await deviceOf(t, undefined);
    await o.connectWebSocket(t.wsUrl);
    expect([shares.heldBy('globex'), shares.heldBy(undefined)]).toEqual([1, 1]);

    // One acme session ends by its goodbye, the other by its device going away: each is released once.
    a1.sendRaw(JSON.stringify({ type: 'goodbye', session_id: a1.sessionId }));
    a2.terminate();
    await until(() => shares.heldBy('acme') === 0, "acme's sessions released");
    const a4 = await deviceOf(t, 'acme');
    await a4.connectWebSocket(t.wsUrl);
    expect(shares.heldBy('acme')).toBe(1);
    expect(t.gw.voice!.relay!.activeCount).toBe(3);
  });

  it('a hello refused by the voice server (upstream unreachable) frees its share at once', async () => {
    const gone = await VoiceServerDouble.start();
    const url = gone.url;
    await gone.close();
    const t = await startTestGateway({ voice: { mode: 'relay', upstream: { url }, maxSessions: 4, maxSessionsPerTenant: 1 } });
    cleanup.push(() => t.close());
    for (let i = 0; i < 3; i++) {
      const d = await deviceOf(t, 'acme');
      const alert = d.waitForFrame((f) => f['type'] === 'alert', 10_000);
      await expect(d.connectWebSocket(t.wsUrl)).rejects.toThrow();
      expect(await alert).toMatchObject({ message: expect.stringContaining('unavailable') as unknown });
    }
    expect(await t.metric('voxgate_voice_sessions_total', { outcome: 'tenant_full' })).toBe(0);
    expect(t.gw.voice!.shares.heldBy('acme')).toBe(0);
  });

  it('unset, the share is 3/4 of voice.maxSessions once a device has a tenant (until then, the whole)', async () => {
    const t = await relayGateway({ maxSessions: 4 });
    expect(t.gw.voice!.shares.limit).toBe(4);
    const devices = [await deviceOf(t, 'acme'), await deviceOf(t, 'acme'), await deviceOf(t, 'acme'), await deviceOf(t, 'acme')];
    expect(t.gw.voice!.shares.limit).toBe(3);
    for (const d of devices.slice(0, 3)) await d.connectWebSocket(t.wsUrl);
    const alert = devices[3]!.waitForFrame((f) => f['type'] === 'alert', 10_000);
    await expect(devices[3]!.connectWebSocket(t.wsUrl)).rejects.toThrow();
    await alert;
    expect(await t.metric('voxgate_voice_sessions_total', { outcome: 'tenant_full' })).toBe(1);
    const b = await deviceOf(t, 'globex');
    await b.connectWebSocket(t.wsUrl);
  });

  it('MQTT + UDP: the refused device gets the alert and goodbye of a full pool and keeps its link; globex opens; acme opens again after goodbye', async () => {
    const t = await relayGateway(
      { maxSessions: 4, maxSessionsPerTenant: 1, udp: { publicHost: '127.0.0.1' } },
      { deviceAuth: 'hmac', deviceSecret: 'mqtt-voice-secret-0123456789', enrollment: { policy: 'open' }, ota: { transport: 'mqtt' } },
    );
    const online = async (tenant: string) => {
      const d = await deviceOf(t, tenant);
      const res = await fetch(`${t.baseUrl}/xiaozhi/ota/`, {
        method: 'POST',
        headers: { 'device-id': d.deviceId, 'client-id': d.clientId, 'content-type': 'application/json' },
        body: JSON.stringify({ application: { version: '1.7.6' } }),
      });
      const c = ((await res.json()) as OtaMqtt).mqtt;
      const ready = t.nextEvent('device.ready', d.deviceId);
      await d.connectMqtt(t.mqttUrl, { clientId: c.client_id, username: c.username, password: c.password, publishTopic: c.publish_topic });
      await ready;
      return d;
    };
    const a1 = await online('acme');
    const a2 = await online('acme');
    const b = await online('globex');
    expect(await a1.openAudioChannel()).toBe(true);

    const alert = a2.waitForFrame((f) => f['type'] === 'alert', 10_000);
    const bye = a2.waitForFrame((f) => f['type'] === 'goodbye', 10_000);
    expect(await a2.openAudioChannel()).toBe(false);
    expect(await alert).toMatchObject({ status: 'error', message: expect.stringContaining('busy') as unknown });
    await bye;
    expect(a2.connected).toBe(true);
    expect(await t.metric('voxgate_voice_sessions_total', { transport: 'udp', outcome: 'tenant_full' })).toBe(1);

    expect(await b.openAudioChannel()).toBe(true);
    a1.sendRaw(JSON.stringify({ session_id: a1.sessionId, type: 'goodbye' }));
    await until(() => t.gw.voice!.shares.heldBy('acme') === 0, "acme's session released by its goodbye");
    expect(await a2.openAudioChannel()).toBe(true);
  });

  it('voice.mode "converse": the share holds for conversations too', async () => {
    const llm = await startLlmServer();
    cleanup.push(() => llm.close());
    const kit = (): ConverseKit => ({
      asr: { name: 'stand-in', transcribe: () => Promise.resolve('') },
      tts: { name: 'stand-in', sampleRate: 24000, synthesize: async function* () {} },
      ...standInCodec(),
      wav: (p) => pcmBytes(p),
      resample: (p) => p,
    });
    const t = await startTestGateway(
      { assistant: { models: { oa: llmModels(llm).oa }, defaultModel: 'oa' }, voice: { mode: 'converse', maxSessions: 4, maxSessionsPerTenant: 1 } },
      {},
      { converseKit: kit },
    );
    cleanup.push(() => t.close());
    const a1 = await deviceOf(t, 'acme');
    await a1.connectWebSocket(t.wsUrl);
    const a2 = await deviceOf(t, 'acme');
    const alert = a2.waitForFrame((f) => f['type'] === 'alert', 10_000);
    await expect(a2.connectWebSocket(t.wsUrl)).rejects.toThrow();
    expect(await alert).toMatchObject({ message: expect.stringContaining('busy') as unknown });
    expect(await t.metric('voxgate_voice_sessions_total', { outcome: 'tenant_full' })).toBe(1);
    const b = await deviceOf(t, 'globex');
    await b.connectWebSocket(t.wsUrl);
    a1.terminate();
    await until(() => t.gw.voice!.shares.heldBy('acme') === 0, "acme's conversation released");
    expect(t.gw.voice!.converse.activeCount).toBe(1);
  });
});
