import { Counter, Gauge, Histogram, type Registry } from 'prom-client';

export type ConverseStage = 'asr' | 'llm' | 'tts';
export type TurnOutcome = 'answered' | 'silence' | 'empty_transcript' | 'aborted' | 'barge_in' | 'failed' | 'device_gone' | 'confirmation' | 'rate_limited';

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
      'waiting (queued in time, sent late: a busy event loop), arrived (synthesis delivered it late) or encoding (its encoding finished late)',
    labelNames: ['cause'] as const,
    registers,
  });
  const encoder = {
    complexity: new Gauge({ name: 'voxgate_voice_converse_encoder_complexity', help: 'The Opus complexity downlink frames are encoded at now', registers }),
    complexityChanges: new Counter({
      name: 'voxgate_voice_converse_encoder_complexity_changes_total',
      help: 'Adaptive complexity steps: down while frames were encoded after the device needed them, up once they were not',
      labelNames: ['direction'] as const,
      registers,
    }),
    seconds: new Counter({ name: 'voxgate_voice_converse_encoder_seconds_total', help: 'Time spent in the Opus encoder itself (all processes)', registers }),
    frames: new Counter({ name: 'voxgate_voice_converse_encoder_frames_total', help: 'Downlink frames encoded by the encoder pool', registers }),
    eased: new Counter({
      name: 'voxgate_voice_converse_encoder_frames_eased_total',
      help: 'Downlink frames an encoder process encoded below the set complexity: more frames were due soon than it could encode at that one',
      registers,
    }),
    late: new Counter({
      name: 'voxgate_voice_converse_encoder_late_total',
      help: 'Downlink frames whose encoding finished after the time the device needed them',
      registers,
    }),
    pending: new Gauge({ name: 'voxgate_voice_converse_encoder_pending', help: 'Downlink frames queued for encoding, not yet encoded', registers }),
    processes: new Gauge({ name: 'voxgate_voice_converse_encoder_processes', help: 'Opus encoder processes alive (0: the main thread encodes)', registers }),
  };
  return {
    encoder,
    turns,
    framesLate: { waiting: framesLate.labels('waiting'), arrived: framesLate.labels('arrived'), encoding: framesLate.labels('encoding') },
    speculativeAsr: { used: speculative.labels('used'), aborted: speculative.labels('aborted') },
    providerErrors,
    latency,
    active,
    framesUp: framesDown.labels('up'),
    framesDown: framesDown.labels('down'),
    outcome: Object.fromEntries(
      (['answered', 'silence', 'empty_transcript', 'aborted', 'barge_in', 'failed', 'device_gone', 'confirmation', 'rate_limited'] as const).map((o) => [
        o,
        turns.labels(o),
      ]),
    ) as Record<TurnOutcome, ReturnType<typeof turns.labels>>,
  };
}

export type ConverseMetrics = ReturnType<typeof createConverseMetrics>;
