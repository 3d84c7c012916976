import { GatewayError } from '../../../errors.js';
import { ProviderError } from '../contracts.js';
import type { ConverseStage } from '../metrics.js';

/** A provider's (or the gateway's own bound's) failure at one stage: what is counted, logged and shown on the device. */
export function describeFailure(stage: ConverseStage, e: unknown): { code: string; provider: string; message: string; shown: string } {
  const code = e instanceof ProviderError ? e.code : e instanceof GatewayError ? e.code.toLowerCase() : 'error';
  const provider = e instanceof ProviderError ? e.provider : stage;
  const message = e instanceof Error ? e.message.slice(0, 300) : String(e).slice(0, 300);
  const what = stage === 'asr' ? 'Speech recognition failed' : stage === 'tts' ? 'Speech synthesis failed' : 'The assistant is unavailable';
  return { code, provider, message, shown: `${what} (${code})` };
}
