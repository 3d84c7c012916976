import { availableParallelism } from 'node:os';
import type { Logger } from 'pino';
import type { VoiceConfig } from '../relay.js';
import { EncoderPool } from './audio/encoder-pool.js';
import { EncoderProcess } from './audio/encoder-process.js';
import { createOpusDecoder } from './audio/opus.js';
import { resample } from './audio/resample.js';
import { createSpeechDetector } from './audio/vad.js';
import { pcmToWav } from './audio/wav.js';
import type { ConverseKit } from './converse.js';
import type { ConverseMetrics } from './metrics.js';
import { createRecognizer, createSynthesizer } from './providers/config.js';

/**
 * The codecs, detector and speech providers of voice.mode "converse", from voice.asr / voice.tts. The
 * synthesiser hands out PCM at the downlink rate the server hello announces (voice.sampleRate). The downlink is
 * encoded by a pool of encoder processes (audio/encoder-pool.ts), closed with the kit.
 */
export function createConverseKit(config: VoiceConfig, log: Logger, metrics?: ConverseMetrics, env: NodeJS.ProcessEnv = process.env): ConverseKit {
  const pool = createEncoderPool(config, log, metrics);
  return {
    // A transcript cut to its bound is the recogniser's fault, though the turn goes on: counted with its failures.
    asr: createRecognizer(config.asr, log, env, () => metrics?.providerErrors.inc({ stage: 'asr', code: 'too_long' })),
    tts: createSynthesizer(config.tts, log, { sampleRate: config.sampleRate, env }),
    decoder: (rate) => createOpusDecoder(rate),
    encoder: (rate, frameMs) => pool.encoder(rate, frameMs),
    detector: () => createSpeechDetector(),
    wav: (pcm, rate) => pcmToWav(pcm, rate),
    resample: (pcm, from, to) => resample(pcm, from, to),
    close: () => pool.close(),
  };
}

/** Encoder processes: the cores available less one (the main thread's), at least 1, at most 4, unless configured. */
export function encoderProcessCount(configured: number | undefined, cores = availableParallelism()): number {
  return configured ?? Math.max(1, Math.min(4, cores - 1));
}

function createEncoderPool(config: VoiceConfig, log: Logger, metrics: ConverseMetrics | undefined): EncoderPool {
  const c = config.converse;
  const n = encoderProcessCount(c.encoderProcesses);
  const m = metrics?.encoder;
  m?.complexity.set(c.encoderComplexity);
  const pool = new EncoderPool({
    complexity: c.encoderComplexity,
    adaptive: c.adaptiveComplexity,
    backends: (hooks) => Array.from({ length: n }, () => new EncoderProcess(hooks, log, undefined, c.adaptiveComplexity)),
    observe: (o) => {
      m?.frames.inc(o.encoded);
      m?.eased.inc(o.eased);
      m?.late.inc(o.late);
      m?.seconds.inc(o.codecUs / 1e6);
      m?.complexity.set(o.complexity);
      m?.pending.set(o.pending);
      m?.processes.set(pool.processes);
      if (o.change) {
        m?.complexityChanges.inc({ direction: o.change });
        log.info({ complexity: o.complexity, lateFrames: o.late }, `Opus encoder complexity ${o.change === 'down' ? 'lowered' : 'restored'}`);
      }
    },
  });
  m?.processes.set(pool.processes);
  log.info({ processes: pool.processes, complexity: c.encoderComplexity, adaptive: c.adaptiveComplexity }, 'Opus encoder pool started');
  return pool;
}
