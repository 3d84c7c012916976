/**
 * The factories building `voice.asr` and `voice.tts` providers (their schemas: ./schema.ts). Loaded with the
 * conversation's audio kit (converse/kit.ts), at the first conversation: an idle gateway holds no speech SDK.
 */
import type { Logger } from 'pino';
import type { SpeechRecognizer, SpeechSynthesizer } from '../contracts.js';
import { boundedRecognizer, boundedSynthesizer } from './bounded.js';
import { CommandRecognizer } from './command-asr.js';
import { CommandSynthesizer } from './command-tts.js';
import { EdgeSynthesizer } from './edge-tts.js';
import { OpenAiRecognizer } from './openai-asr.js';
import { OpenAiSynthesizer } from './openai-tts.js';
import type { AsrConfig, TtsConfig } from './schema.js';

export { AsrConfigSchema, TtsConfigSchema, type AsrConfig, type TtsConfig } from './schema.js';

const DEFAULT_VOICE: Record<TtsConfig['provider'], string | undefined> = { openai: 'alloy', edge: 'en-US-AriaNeural', command: undefined };

function apiKey(name: string, env: NodeJS.ProcessEnv, log: Logger, what: string): string | undefined {
  const key = env[name];
  // Local servers need no key: warn, do not fail (the request says 401 if one was needed).
  if (!key) log.warn({ apiKeyEnv: name }, `${what}: the API key variable is not set`);
  return key || undefined;
}

function httpUrl(url: string | undefined, what: string): string | undefined {
  if (url !== undefined && !/^https?:/.test(url)) throw new Error(`${what}.baseUrl must be http(s) for this provider`);
  return url;
}

/**
 * A recogniser of `voice.asr`, its transcripts bounded whatever its kind (./bounded.ts); `onCut` counts the ones cut.
 */
export function createRecognizer(cfg: AsrConfig, log: Logger, env: NodeJS.ProcessEnv = process.env, onCut?: () => void): SpeechRecognizer {
  const l = log.child({ component: 'asr' });
  return boundedRecognizer(providerRecognizer(cfg, l, env), l, onCut);
}

function providerRecognizer(cfg: AsrConfig, l: Logger, env: NodeJS.ProcessEnv): SpeechRecognizer {
  if (cfg.provider === 'command') {
    return new CommandRecognizer({ command: cfg.command ?? '', args: cfg.args, language: cfg.language, timeoutMs: cfg.timeoutMs, log: l });
  }
  return new OpenAiRecognizer({
    baseUrl: httpUrl(cfg.baseUrl, 'voice.asr'),
    apiKey: apiKey(cfg.apiKeyEnv, env, l, 'voice.asr'),
    model: cfg.model,
    language: cfg.language,
    timeoutMs: cfg.timeoutMs,
    log: l,
  });
}

export interface SynthesizerOptions {
  /** The rate the synthesiser hands out (the downlink's); default 24000, the speech APIs' own. */
  sampleRate?: number;
  env?: NodeJS.ProcessEnv;
}

/** A synthesiser of `voice.tts`, bounded in its audio's length and pace whatever its kind (./bounded.ts). */
export function createSynthesizer(cfg: TtsConfig, log: Logger, opts: SynthesizerOptions = {}): SpeechSynthesizer {
  return boundedSynthesizer(providerSynthesizer(cfg, log, opts), cfg.timeoutMs);
}

function providerSynthesizer(cfg: TtsConfig, log: Logger, opts: SynthesizerOptions): SpeechSynthesizer {
  const l = log.child({ component: 'tts' });
  const sampleRate = opts.sampleRate ?? 24_000;
  const voice = cfg.voice ?? DEFAULT_VOICE[cfg.provider];
  if (cfg.provider === 'command') {
    return new CommandSynthesizer({ command: cfg.command ?? '', args: cfg.args, voice, sampleRate, timeoutMs: cfg.timeoutMs, log: l });
  }
  if (cfg.provider === 'edge') {
    if (cfg.baseUrl !== undefined && !/^wss?:/.test(cfg.baseUrl)) throw new Error('voice.tts.baseUrl must be ws(s) for provider "edge"');
    return new EdgeSynthesizer({ url: cfg.baseUrl, voice: voice ?? 'en-US-AriaNeural', sampleRate, timeoutMs: cfg.timeoutMs, log: l });
  }
  return new OpenAiSynthesizer({
    baseUrl: httpUrl(cfg.baseUrl, 'voice.tts'),
    apiKey: apiKey(cfg.apiKeyEnv, opts.env ?? process.env, l, 'voice.tts'),
    model: cfg.model,
    voice: voice ?? 'alloy',
    format: cfg.format,
    sampleRate,
    timeoutMs: cfg.timeoutMs,
    log: l,
  });
}
