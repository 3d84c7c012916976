import { z } from 'zod';
import { always, Bool, Csv, env, HttpUrl, Int, isPlain, Ms } from '../config/fields.js';

const ModelSlice = z.strictObject({
  /** `openai`: Chat Completions (OpenAI, Ollama, vLLM, llama.cpp, LM Studio, DeepSeek...); `anthropic`: Messages; `gemini`: Google Gemini. */
  provider: z.enum(['openai', 'anthropic', 'gemini']),
  baseUrl: HttpUrl.optional(),
  /** The environment variable holding the API key (never the key itself in the file). */
  apiKeyEnv: z
    .string()
    .regex(/^[A-Za-z_][A-Za-z0-9_]{0,127}$/)
    .optional(),
  model: z.string().min(1).max(256),
  /** `native` function calling, `markers` (tools described in the prompt, calls parsed from text), `none` (no tools). */
  toolMode: z.enum(['native', 'markers', 'none']).default('native'),
  vision: Bool.default(false),
  maxTokens: z.coerce.number().int().min(1).max(1_000_000).default(1024),
  /** SDK retries on connection errors, 408/409/429 and 5xx. */
  maxRetries: z.coerce.number().int().min(0).max(10).default(1),
});

/** The LLM tool loop (docs/assistant.md). Models are named; a turn picks one (default: `defaultModel`). */
export const AssistantSlice = z
  .strictObject({
    models: z.record(z.string().regex(/^[A-Za-z0-9_.:-]{1,64}$/, 'model names: 1-64 of A-Z a-z 0-9 _ . : -'), ModelSlice).default({}),
    defaultModel: env(
      'GATEWAY_ASSISTANT_DEFAULT_MODEL',
      z.string().optional(),
      'the model a turn uses when it names none: see [docs/assistant.md](docs/assistant.md)',
      'the first model',
    ),
    /** Answers the vision endpoint's questions about a device's photo; default: the first model with `vision: true`. */
    visionModel: z.string().optional(),
    visionPrompt: z
      .string()
      .max(16 * 1024)
      .default(
        'You are the eyes of a voice device. Answer the question about the photo in one or two short sentences that can be spoken aloud, in the language of the question.',
      ),
    systemPrompt: z
      .string()
      .max(64 * 1024)
      .default(
        'You are the assistant of a fleet of voice devices. Use the tools to act on devices and to look things up; answer briefly, in the language of the user.',
      ),
    /** Which tools a turn offers: the caller's whole namespace, device tools only, or none. */
    tools: env(
      'GATEWAY_ASSISTANT_TOOLS',
      z.enum(['all', 'devices', 'none']).default('all'),
      "which tools a turn offers: the caller's whole namespace, device tools only, or none",
    ),
    maxToolRounds: env('GATEWAY_ASSISTANT_MAX_TOOL_ROUNDS', z.coerce.number().int().min(1).max(50).default(5), 'model replies with tool calls per turn'),
    /** Tool calls run from one model reply; the rest are answered "not run" (a prompt-injected model cannot fan out without end). */
    maxToolCallsPerRound: z.coerce.number().int().min(1).max(256).default(16),
    toolTimeoutMs: env('GATEWAY_ASSISTANT_TOOL_TIMEOUT_MS', Ms(30_000), 'one tool call of a turn'),
    modelTimeoutMs: Ms(120_000),
    /**
     * A whole turn, every model request, tool call and wait in it: past it, what still runs is stopped and the turn
     * fails MODEL_TIMEOUT. Each model request also ends at modelTimeoutMs; whichever comes first ends it.
     */
    turnTimeoutMs: env(
      'GATEWAY_ASSISTANT_TURN_TIMEOUT_MS',
      Ms(300_000),
      'a whole turn (its model requests, tool calls and waits); each model request also ends at `assistant.modelTimeoutMs`',
    ),
    /** Tools that need a person's yes (besides those annotated destructiveHint): namespaced or short names. */
    confirm: env(
      'GATEWAY_ASSISTANT_CONFIRM',
      z.enum(['ask', 'deny', 'allow']).default('ask'),
      'tools that need a yes: `ask` the person, `deny` or `allow` them',
    ),
    confirmTools: env('GATEWAY_ASSISTANT_CONFIRM_TOOLS', Csv.default([]), '… those besides the ones annotated `destructiveHint`'),
    confirmTimeoutMs: Ms(60_000),
    conversationTtlMs: Ms(3_600_000, 7 * 24 * 3_600_000),
    maxConversations: z.coerce.number().int().min(1).max(1_000_000).default(10_000),
    /** Per conversation: user/answer pairs kept, and their total size; the oldest go first. */
    maxConversationTurns: z.coerce.number().int().min(1).max(1000).default(50),
    maxConversationBytes: Int(1024, 64 * 1024 * 1024, 256 * 1024),
    /** All conversations together: past it, the least recently used of the tenant holding the most bytes is forgotten. */
    maxStoredConversationBytes: Int(64 * 1024, 16 * 1024 * 1024 * 1024, 128 * 1024 * 1024),
    maxMessageBytes: Int(16, 1024 * 1024, 32 * 1024),
    /** Tool results are cut to this many characters before the model reads them. */
    maxToolResultChars: Int(256, 1024 * 1024, 16_000),
    maxConcurrentTurns: z.coerce.number().int().min(1).max(100_000).default(64),
    /** Turns running at once for one tenant (keys without a tenant share one count): no tenant can take every slot. */
    maxConcurrentTurnsPerTenant: z.coerce.number().int().min(1).max(100_000).default(16),
  })
  .refine((a) => !(typeof a?.defaultModel === 'string' && isPlain(a.models) && !(a.defaultModel in a.models)), {
    path: ['defaultModel'],
    message: 'names no model in assistant.models',
    when: always,
  })
  .refine((a) => !(typeof a?.visionModel === 'string' && isPlain(a.models) && !(a.visionModel in a.models)), {
    path: ['visionModel'],
    message: 'names no model in assistant.models',
    when: always,
  });
export type AssistantConfig = z.infer<typeof AssistantSlice>;

/** The model assumed when none is configured and `OPENAI_API_KEY` is set: one key is a whole setup (docs/voice.md). */
export const IMPLIED_MODEL_NAME = 'openai';
export const IMPLIED_MODEL = { provider: 'openai', model: 'gpt-4o-mini', apiKeyEnv: 'OPENAI_API_KEY', vision: true } as const;

/**
 * `assistant` with the implied OpenAI model added when `assistant.models` is empty and the environment has a
 * non-empty `OPENAI_API_KEY`; otherwise unchanged. Explicit models always win: the implied one is never mixed in.
 */
export function withImpliedModel(assistant: AssistantConfig, env: NodeJS.ProcessEnv): AssistantConfig {
  if (Object.keys(assistant.models).length > 0 || !env['OPENAI_API_KEY']) return assistant;
  return { ...assistant, models: { [IMPLIED_MODEL_NAME]: ModelSlice.parse(IMPLIED_MODEL) } };
}
