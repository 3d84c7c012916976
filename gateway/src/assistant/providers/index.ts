import type { ModelProvider } from '../types.js';
import { AnthropicProvider } from './anthropic.js';
import { OpenAiProvider } from './openai.js';

export interface ProviderOptions {
  model: string;
  baseUrl?: string | undefined;
  apiKey?: string | undefined;
  maxTokens: number;
  maxRetries: number;
  timeoutMs: number;
}

export type ProviderName = 'openai' | 'anthropic';

/** One client per named model, built once: the SDK clients keep their connection pools. */
export function createProvider(provider: ProviderName, o: ProviderOptions): ModelProvider {
  return provider === 'anthropic' ? new AnthropicProvider(o) : new OpenAiProvider(o);
}
