import type { FetchLike } from '../../limited-fetch.js';
import { boundedComplete, refusalOf, replyFetch, replyLimits, saneUsage, type ReplyFault } from '../reply-bounds.js';
import type { ModelProvider, ModelReply, ModelRequest } from '../types.js';

export interface ProviderOptions {
  model: string;
  baseUrl?: string | undefined;
  apiKey?: string | undefined;
  maxTokens: number;
  maxRetries: number;
  timeoutMs: number;
  /** The SDK client's fetch: responses read to the reply's byte bound (reply-bounds.ts). */
  fetch?: FetchLike | undefined;
}

export type ProviderName = 'openai' | 'anthropic' | 'gemini';

/**
 * One client per named model, built once: the SDK clients keep their connection pools. The SDK is loaded at the
 * model's first request, not at start: the three SDKs were ~400 modules and tens of MiB of an idle gateway's
 * memory, loaded whether or not a model is ever asked (docs/performance.md, idle memory).
 * Every reply is bounded (reply-bounds.ts); a refused one rejects with ReplyRefused, reported to `onFault` first, as
 * are usage numbers that are not token counts (then 0).
 */
export function createProvider(
  provider: ProviderName,
  o: ProviderOptions,
  onFault: (reason: ReplyFault, detail: string) => void = () => undefined,
): ModelProvider {
  const limits = replyLimits(o.maxTokens);
  const opts: ProviderOptions = { ...o, fetch: replyFetch(limits) };
  let client: Promise<ModelProvider> | undefined;
  const load = async (): Promise<ModelProvider> => {
    if (provider === 'anthropic') return new (await import('./anthropic.js')).AnthropicProvider(opts);
    if (provider === 'gemini') return new (await import('./gemini.js')).GeminiProvider(opts);
    return new (await import('./openai.js')).OpenAiProvider(opts);
  };
  return {
    async complete(req: ModelRequest): Promise<ModelReply> {
      client ??= load();
      const inner = await client;
      try {
        return saneUsage(await boundedComplete(inner, limits, req), (detail) => onFault('bad_usage', detail));
      } catch (e) {
        const refused = refusalOf(e);
        if (!refused) throw e;
        onFault(refused.reason, refused.message);
        throw refused;
      }
    },
  };
}
