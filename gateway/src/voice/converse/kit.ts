import type { Logger } from 'pino';
import type { VoiceConfig } from '../relay.js';
import { createOpusDecoder, createOpusEncoder } from './audio/opus.js';
import { resample } from './audio/resample.js';
import { createSpeechDetector } from './audio/vad.js';
import { pcmToWav } from './audio/wav.js';
import type { ConverseKit } from './converse.js';
import { createRecognizer, createSynthesizer } from './providers/config.js';

/**
 * The codecs, detector and speech providers of voice.mode "converse", from voice.asr / voice.tts. The
 * synthesiser hands out PCM at the downlink rate the server hello announces (voice.sampleRate).
 */
export function createConverseKit(config: VoiceConfig, log: Logger, env: NodeJS.ProcessEnv = process.env): ConverseKit {
  return {
    asr: createRecognizer(config.asr, log, env),
    tts: createSynthesizer(config.tts, log, { sampleRate: config.sampleRate, env }),
    decoder: (rate) => createOpusDecoder(rate),
    encoder: (rate, frameMs) => createOpusEncoder(rate, frameMs, { complexity: config.converse.encoderComplexity }),
    detector: () => createSpeechDetector(),
    wav: (pcm, rate) => pcmToWav(pcm, rate),
    resample: (pcm, from, to) => resample(pcm, from, to),
  };
}
