import type { Logger } from 'pino';
import type { Metrics } from '../metrics.js';
import { createVoiceMetrics, type VoiceMetrics } from './metrics.js';
import { VoiceRelay, type VoiceConfig } from './relay.js';

export interface Voice {
  relay: VoiceRelay;
  metrics: VoiceMetrics;
  close(): void;
}

/** The voice relay for voice.mode "relay". */
export async function startVoice(config: VoiceConfig, metrics: Metrics, log: Logger): Promise<Voice> {
  const voiceMetrics = createVoiceMetrics(metrics.registry);
  const relay = new VoiceRelay({ config, log: log.child({ component: 'voice' }), metrics: voiceMetrics });
  log.info({ upstream: redactedUrl(config.upstream.url!) }, 'voice relay on');
  return {
    relay,
    metrics: voiceMetrics,
    close: () => relay.close(),
  };
}

/** The voice server's URL without credentials or query (a token may ride there). */
function redactedUrl(url: string): string {
  const u = new URL(url);
  return `${u.protocol}//${u.host}${u.pathname}`;
}
