import { Counter, Gauge, Histogram, type Registry } from 'prom-client';
import { bindCounter } from '../metrics-bound.js';

/** Voice relay counters, on the gateway's registry. No per-device labels. */
export function createVoiceMetrics(registry: Registry) {
  const registers = [registry];
  const frames = new Counter({
    name: 'voxgate_voice_audio_frames_total',
    help: 'Audio frames relayed, by direction (up: device to voice server)',
    labelNames: ['direction'] as const,
    registers,
  });
  const bytes = new Counter({
    name: 'voxgate_voice_audio_bytes_total',
    help: 'Audio payload bytes relayed, by direction',
    labelNames: ['direction'] as const,
    registers,
  });
  return {
    sessions: new Counter({
      name: 'voxgate_voice_sessions_total',
      help: 'Voice session starts by transport and outcome (opened, busy, tenant_full: the device tenant held voice.maxSessionsPerTenant, upstream_refused, upstream_timeout, upstream_error)',
      labelNames: ['transport', 'outcome'] as const,
      registers,
    }),
    ended: new Counter({ name: 'voxgate_voice_sessions_ended_total', help: 'Voice sessions ended, by reason', labelNames: ['reason'] as const, registers }),
    active: new Gauge({ name: 'voxgate_voice_sessions_active', help: 'Voice sessions relayed now', registers }),
    frames,
    bytes,
    /** The per-frame counters, bound once (see bindCounter): what every relayed frame increments. */
    relayed: {
      up: { frames: bindCounter(frames, { direction: 'up' }), bytes: bindCounter(bytes, { direction: 'up' }) },
      down: { frames: bindCounter(frames, { direction: 'down' }), bytes: bindCounter(bytes, { direction: 'down' }) },
    },
    dropped: new Counter({
      name: 'voxgate_voice_audio_dropped_total',
      help: 'Audio frames and UDP packets dropped, by direction and reason',
      labelNames: ['direction', 'reason'] as const,
      registers,
    }),
    connectSeconds: new Histogram({
      name: 'voxgate_voice_upstream_connect_seconds',
      help: 'From the device hello to the voice server hello',
      buckets: [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
      registers,
    }),
    upstreamMcp: new Counter({
      name: 'voxgate_voice_upstream_mcp_total',
      help: 'MCP requests from voice servers, by method and how they were answered (cache, device, refused)',
      labelNames: ['method', 'answer'] as const,
      registers,
    }),
  };
}

export type VoiceMetrics = ReturnType<typeof createVoiceMetrics>;
