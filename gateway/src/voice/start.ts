import type { Logger } from 'pino';
import type { Metrics } from '../metrics.js';
import { createVoiceMetrics, type VoiceMetrics } from './metrics.js';
import { VoiceRelay, type VoiceConfig } from './relay.js';
import { UdpAudio } from './udp-audio.js';

export interface Voice {
  relay: VoiceRelay;
  metrics: VoiceMetrics;
  /** The UDP audio socket for MQTT devices. */
  udp: UdpAudio;
  close(): void;
}

/** The voice relay for voice.mode "relay", with its one UDP socket for MQTT devices' audio. */
export async function startVoice(config: VoiceConfig, metrics: Metrics, log: Logger): Promise<Voice> {
  const voiceMetrics = createVoiceMetrics(metrics.registry);
  const voiceLog = log.child({ component: 'voice' });
  const udp = await UdpAudio.start(config, voiceMetrics, voiceLog);
  const relay = new VoiceRelay({ config, log: voiceLog, metrics: voiceMetrics, udp });
  log.info({ upstream: redactedUrl(config.upstream.url!), udp: `${config.udp.host}:${udp.port}` }, 'voice relay on');
  return {
    relay,
    metrics: voiceMetrics,
    udp,
    close: () => {
      relay.close();
      udp.close();
    },
  };
}

/** The voice server's URL without credentials or query (a token may ride there). */
function redactedUrl(url: string): string {
  const u = new URL(url);
  return `${u.protocol}//${u.host}${u.pathname}`;
}
