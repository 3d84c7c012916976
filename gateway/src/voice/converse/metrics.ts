import { Counter, Gauge, Histogram, type Registry } from 'prom-client';

export type ConverseStage = 'asr' | 'llm' | 'tts';
export type TurnOutcome = 'answered' | 'silence' | 'empty_transcript' | 'aborted' | 'barge_in' | 'failed' | 'device_gone' | 'confirmation';

/** voice.mode "converse" counters, on the gateway's registry; hot-path children bound once. */
export function createConverseMetrics(registry: Registry) {
  const registers = [registry];
  const turns = new Counter({ name: 'voxgate_voice_converse_turns_total', help: 'Conversation turns by outcome', labelNames: ['outcome'] as const, registers });
  const providerErrors = new Counter({
    name: 'voxgate_voice_converse_provider_errors_total',
    help: 'Speech recognition, model and synthesis failures, by stage and code (timeout, http, network, ...)',
    labelNames: ['stage', 'code'] as const,
    registers,
  });
  const latency = new Histogram({
    name: 'voxgate_voice_converse_first_audio_seconds',
    help: 'From the end of speech to the first audio frame sent to the device',
    buckets: [0.05, 0.1, 0.25, 0.5, 1, 2, 4, 8, 16],
    registers,
  });
  const active = new Gauge({ name: 'voxgate_voice_converse_sessions_active', help: 'Devices in a conversation session now', registers });
  const framesDown = new Counter({
    name: 'voxgate_voice_converse_frames_total',
    help: 'Opus frames, by direction',
    labelNames: ['direction'] as const,
    registers,
  });
  const speculative = new Counter({
    name: 'voxgate_voice_converse_speculative_asr_total',
    help: 'Transcriptions sent during the end-of-speech wait: used (the utterance had ended) or aborted (speech resumed)',
    labelNames: ['result'] as const,
    registers,
  });
  const framesLate = new Counter({
    name: 'voxgate_voice_converse_frames_late_total',
    help:
      "Frames sent more than one 60 ms period after the device's playback of the previous ones ran out, by cause: " +
      'waiting (queued in time, sent late: a busy event loop) or arrived (synthesis delivered it late)',
    labelNames: ['cause'] as const,
    registers,
  });
  return {
    turns,
    framesLate: { waiting: framesLate.labels('waiting'), arrived: framesLate.labels('arrived') },
    speculativeAsr: { used: speculative.labels('used'), aborted: speculative.labels('aborted') },
    providerErrors,
    latency,
    active,
    framesUp: framesDown.labels('up'),
    framesDown: framesDown.labels('down'),
    outcome: Object.fromEntries(
      (['answered', 'silence', 'empty_transcript', 'aborted', 'barge_in', 'failed', 'device_gone', 'confirmation'] as const).map((o) => [o, turns.labels(o)]),
    ) as Record<TurnOutcome, ReturnType<typeof turns.labels>>,
  };
}

export type ConverseMetrics = ReturnType<typeof createConverseMetrics>;
