/**
 * `voice.asr` and `voice.tts`: which speech providers voice.mode "converse" uses, and the factories building them.
 * The same names as the assistant's providers (`baseUrl`, `apiKeyEnv`: the environment variable holding the key,
 * never the key itself). Defaults give OpenAI with OPENAI_API_KEY for both, so one key is a working setup.
 */
import type { Logger } from 'pino';
import { z } from 'zod';
import type { SpeechRecognizer, SpeechSynthesizer } from '../contracts.js';
import { CommandRecognizer } from './command-asr.js';
import { CommandSynthesizer } from './command-tts.js';
import { EdgeSynthesizer } from './edge-tts.js';
import { OpenAiRecognizer } from './openai-asr.js';
import { OpenAiSynthesizer } from './openai-tts.js';

const EnvName = z.string().regex(/^[A-Za-z_][A-Za-z0-9_]{0,127}$/);
/** http(s) for the OpenAI-compatible APIs; ws(s) too for Edge's endpoint. */
const ProviderUrl = z.url({ protocol: /^(https?|wss?)$/ });
const Args = z.array(z.string().max(4096)).max(64).default([]);
const Command = z.string().min(1).max(4096);
const Timeout = (def: number) => z.coerce.number().int().min(500).max(300_000).default(def);

export const AsrConfigSchema = z
  .object({
    /** `openai`: an OpenAI-compatible /v1/audio/transcriptions; `command`: a local program (WAV in, text out). */
    provider: z.enum(['openai', 'command']).default('openai'),
    baseUrl: ProviderUrl.optional(),
    apiKeyEnv: EnvName.default('OPENAI_API_KEY'),
    model: z.string().min(1).max(256).default('whisper-1'),
    /** ISO-639-1 (or BCP-47) hint; absent lets the recogniser detect the language. */
    language: z
      .string()
      .regex(/^[A-Za-z]{2,3}(-[A-Za-z0-9]{1,8}){0,3}$/)
      .optional(),
    /** `command`: the program, and its arguments with `{file}` (the utterance's WAV; stdin when absent) and `{language}`. */
    command: Command.optional(),
    args: Args,
    timeoutMs: Timeout(15_000),
  })
  .strict()
  .refine((c) => c.provider !== 'command' || c.command !== undefined, { message: 'voice.asr.command is required with provider "command"', path: ['command'] });
export type AsrConfig = z.infer<typeof AsrConfigSchema>;

export const TtsConfigSchema = z
  .object({
    /** `openai`: /v1/audio/speech; `edge`: Microsoft Edge's free voices (needs internet); `command`: a local program. */
    provider: z.enum(['openai', 'edge', 'command']).default('openai'),
    /** OpenAI-compatible base URL, or Edge's WebSocket endpoint. */
    baseUrl: ProviderUrl.optional(),
    apiKeyEnv: EnvName.default('OPENAI_API_KEY'),
    model: z.string().min(1).max(256).default('tts-1'),
    /** openai: alloy, nova, …; edge: en-US-AriaNeural, zh-CN-XiaoxiaoNeural, …; command: `{voice}` in args. */
    voice: z.string().min(1).max(256).optional(),
    /** openai: the response_format asked for (24 kHz PCM either way). */
    format: z.enum(['pcm', 'wav']).default('pcm'),
    /** `command`: the program, and its arguments with `{text}` (stdin when absent), `{voice}` and `{file}` (WAV on stdout when absent). */
    command: Command.optional(),
    args: Args,
    timeoutMs: Timeout(15_000),
  })
  .strict()
  .refine((c) => c.provider !== 'command' || c.command !== undefined, { message: 'voice.tts.command is required with provider "command"', path: ['command'] });
export type TtsConfig = z.infer<typeof TtsConfigSchema>;

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

export function createRecognizer(cfg: AsrConfig, log: Logger, env: NodeJS.ProcessEnv = process.env): SpeechRecognizer {
  const l = log.child({ component: 'asr' });
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

export function createSynthesizer(cfg: TtsConfig, log: Logger, opts: SynthesizerOptions = {}): SpeechSynthesizer {
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
