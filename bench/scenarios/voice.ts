import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { freePort, spawnTs } from '../lib/procs.js';
import { runVoiceLoad, type VoiceLoadResult } from '../lib/voice.js';
import { API_KEY, type Bench } from './bench.js';
import { metric, ratio, round, until } from './measure.js';

/**
 * Relayed audio: devices -> a gateway with voice.mode "relay" -> the voice server double (echo) -> back, against
 * the same devices connected straight to the double (the floor), in the same run. Its own gateway process:
 * with the relay on, every WebSocket hello opens a voice session, which the call-path and fleet rows must not.
 */
export async function voiceScenarios(b: Bench, dataDir: string): Promise<void> {
  const voiceServer = spawnTs('voice-server', 'bench/floors/voice-server.ts');
  const upstreamUrl = (await voiceServer.hello)['url'] as string;
  const [httpPort, mqttPort] = [await freePort(), await freePort()];
  const voiceDir = join(dataDir, 'voice');
  mkdirSync(voiceDir, { recursive: true });
  writeFileSync(join(voiceDir, 'config.json'), '{}');
  const gateway = spawnTs('voice-gateway', 'bench/procs/gateway.ts', {
    env: {
      GATEWAY_HTTP_HOST: '127.0.0.1',
      GATEWAY_HTTP_PORT: String(httpPort),
      GATEWAY_MQTT_HOST: '127.0.0.1',
      GATEWAY_MQTT_PORT: String(mqttPort),
      GATEWAY_API_KEYS: API_KEY,
      GATEWAY_DATA_DIR: voiceDir,
      GATEWAY_LOG_LEVEL: 'warn',
      GATEWAY_CONFIG: join(voiceDir, 'config.json'),
      GATEWAY_VOICE_MODE: 'relay',
      GATEWAY_VOICE_UPSTREAM_URL: upstreamUrl,
      GATEWAY_VOICE_UDP_HOST: '127.0.0.1',
      GATEWAY_VOICE_UDP_PORT: '0',
      GATEWAY_VOICE_UDP_PUBLIC_HOST: '127.0.0.1',
    },
  });
  const gwUrl = `http://127.0.0.1:${httpPort}`;
  await until('the voice gateway to be ready', async () => (await fetch(`${gwUrl}/readyz`).catch(() => undefined))?.status === 200, 30_000, 100);
  b.log(`voice: gateway on ${gwUrl} relaying to ${upstreamUrl}`);
  const runs = [
    { pace: 'paced' as const, devices: b.voice.devices, window: 1, seconds: b.voice.seconds },
    { pace: 'saturate' as const, devices: b.voice.satDevices, window: b.voice.satWindow, seconds: b.voice.satSeconds },
  ];
  let macGroup = 0;
  try {
    for (const transport of ['ws', 'udp'] as const) {
      const label = transport === 'ws' ? 'websocket' : 'mqtt+udp';
      for (const r of runs) {
        const common = { devices: r.devices, pace: r.pace, window: r.window, seconds: r.seconds, connectTimeoutMs: 30_000, drainMs: 5_000 };
        const gwTarget = transport === 'ws' ? `ws://127.0.0.1:${httpPort}/xiaozhi/v1/` : `mqtt://127.0.0.1:${mqttPort}`;
        // The gateway talks binary protocol 2 upstream for UDP devices: their floor speaks it straight to the double.
        const version = transport === 'ws' ? 1 : 2;
        const g = await runVoiceLoad({ ...common, transport, url: gwTarget, version, macGroup: macGroup++, expectMcp: true });
        await until('the voice sessions to end on the gateway', async () => (await metric(gwUrl, 'voxgate_voice_sessions_active')) === 0, 30_000, 50);
        const f = await runVoiceLoad({ ...common, transport: 'ws', url: upstreamUrl, version, macGroup: macGroup++, expectMcp: false });
        pushVoiceRows(b, transport, label, r, g, f);
        b.log(
          `voice ${label} ${r.pace} n=${r.devices}: gateway ${g.perSecond.toFixed(0)} frames/s p50 ${g.p50.toFixed(2)} p99 ${g.p99.toFixed(2)} ms, ` +
            `floor ${f.perSecond.toFixed(0)} frames/s p50 ${f.p50.toFixed(2)} p99 ${f.p99.toFixed(2)} ms; lost ${g.lost}/${f.lost}`,
        );
      }
    }
  } finally {
    await Promise.all([gateway.stop(), voiceServer.stop()]);
  }
}

function pushVoiceRows(b: Bench, transport: 'ws' | 'udp', label: string, r: { pace: string; devices: number; window: number; seconds: number }, g: VoiceLoadResult, f: VoiceLoadResult): void {
  const errs = (x: VoiceLoadResult) => x.lost + x.corrupt + x.connectFailures;
  const base = {
    transport: label,
    pace: r.pace,
    devices: r.devices,
    ...(r.pace === 'saturate' ? { window: r.window } : { frameMs: 60 }),
    floorPath: transport === 'ws' ? 'device -> voice server, WebSocket, protocol 1' : 'device -> voice server, WebSocket, protocol 2 (a UDP device has no direct path)',
    errors: errs(g),
    floorErrors: errs(f),
  };
  const name = `voice_${transport}`;
  b.results.push({
    name: `${name}.frames_per_s`,
    value: round(g.perSecond),
    unit: 'frames/s',
    floor: round(f.perSecond),
    ratio: ratio(g.perSecond, f.perSecond),
    params: { ...base, seconds: round(g.seconds, 2), frames: g.received, floorFrames: f.received, sent: g.sent, lost: g.lost, corrupt: g.corrupt, floorLost: f.lost },
  });
  b.results.push({ name: `${name}.rtt_p50_ms`, value: round(g.p50, 3), unit: 'ms', floor: round(f.p50, 3), ratio: ratio(f.p50, g.p50), params: { ...base, addedMs: round(g.p50 - f.p50, 3) } });
  b.results.push({ name: `${name}.rtt_p99_ms`, value: round(g.p99, 3), unit: 'ms', floor: round(f.p99, 3), ratio: ratio(f.p99, g.p99), params: { ...base, addedMs: round(g.p99 - f.p99, 3) } });
}
