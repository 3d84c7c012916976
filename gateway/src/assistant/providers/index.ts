import type { ModelProvider } from '../types.js';
import { AnthropicProvider } from './anthropic.js';
import { GeminiProvider } from './gemini.js';
import { OpenAiProvider } from './openai.js';

export interface ProviderOptions {
  model: string;
  baseUrl?: string | undefined;
  apiKey?: string | undefined;
  maxTokens: number;
  maxRetries: number;
  timeoutMs: number;
}

export type ProviderName = 'openai' | 'anthropic' | 'gemini';

/** One client per named model, built once: the SDK clients keep their connection pools. */
export function createProvider(provider: ProviderName, o: ProviderOptions): ModelProvider {
  if (provider === 'anthropic') return new AnthropicProvider(o);
  if (provider === 'gemini') return new GeminiProvider(o);
  return new OpenAiProvider(o);
}
