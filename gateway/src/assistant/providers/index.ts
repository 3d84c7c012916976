import type { ModelProvider, ModelReply, ModelRequest } from '../types.js';

export interface ProviderOptions {
  model: string;
  baseUrl?: string | undefined;
  apiKey?: string | undefined;
  maxTokens: number;
  maxRetries: number;
  timeoutMs: number;
}

export type ProviderName = 'openai' | 'anthropic' | 'gemini';

/**
 * One client per named model, built once: the SDK clients keep their connection pools. The SDK is loaded at the
 * model's first request, not at start: the three SDKs were ~400 modules and tens of MiB of an idle gateway's
 * memory, loaded whether or not a model is ever asked (docs/performance.md, idle memory).
 */
export function createProvider(provider: ProviderName, o: ProviderOptions): ModelProvider {
  let client: Promise<ModelProvider> | undefined;
  const load = async (): Promise<ModelProvider> => {
    if (provider === 'anthropic') return new (await import('./anthropic.js')).AnthropicProvider(o);
    if (provider === 'gemini') return new (await import('./gemini.js')).GeminiProvider(o);
    return new (await import('./openai.js')).OpenAiProvider(o);
  };
  return {
    async complete(req: ModelRequest): Promise<ModelReply> {
      client ??= load();
      return (await client).complete(req);
    },
  };
}
