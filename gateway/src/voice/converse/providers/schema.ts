/**
 * `voice.asr` and `voice.tts`: which speech providers voice.mode "converse" uses (the factories: ./config.ts).
 * The same names as the assistant's providers (`baseUrl`, `apiKeyEnv`: the environment variable holding the key,
 * never the key itself). Defaults give OpenAI with OPENAI_API_KEY for both, so one key is a working setup.
 * The configuration reads these schemas at start; the factories that build the providers (./config.ts) and the
 * SDKs they use (openai, mpg123-decoder) load with the conversation's audio kit, at the first conversation.
 */
import { z } from 'zod';

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
