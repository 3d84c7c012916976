/**
 * The speech providers behind the gateway-wide bound on model requests (modelRequests.asr / .tts,
 * throttle/model-gates.ts): a request takes a slot before it reaches the provider and frees it however it ends.
 * A refusal is a ProviderError `busy`, so the conversation takes the path any provider failure takes.
 */
import { GatewayError } from '../../../errors.js';
import type { ModelGate } from '../../../throttle/model-gates.js';
import { ProviderError, type SpeechRecognizer, type SpeechSynthesizer } from '../contracts.js';

type Gate = Pick<ModelGate, 'acquire'>;

async function slotFor(gate: Gate, share: string | undefined, signal: AbortSignal, provider: string, what: string) {
  try {
    return await gate.acquire(share, signal);
  } catch (e) {
    if (e instanceof GatewayError && e.code === 'MODEL_BUSY') throw new ProviderError('busy', e.message, provider);
    // The caller's abort: the waiter left the queue and took no slot.
    if (signal.aborted) throw new ProviderError('aborted', `${what} cancelled while waiting for a slot`, provider);
    throw e;
  }
}

/** `asr` for the devices of `share` (principal.ts shareOf). */
export function gatedRecognizer(asr: SpeechRecognizer, gate: Gate, share: string | undefined): SpeechRecognizer {
  return {
    name: asr.name,
    async transcribe(wav, opts) {
      const slot = await slotFor(gate, share, opts.signal, asr.name, 'transcription');
      try {
        return await asr.transcribe(wav, opts);
      } finally {
        slot.release();
      }
    },
  };
}

/**
 * `tts` for the devices of `share`. The slot is held while the audio streams, and freed when the stream ends, fails,
 * or its reader stops early (`return()` from a `for await` break or an abort runs the `finally`). A reader that never
 * starts the stream never takes a slot.
 */
export function gatedSynthesizer(tts: SpeechSynthesizer, gate: Gate, share: string | undefined): SpeechSynthesizer {
  return {
    name: tts.name,
    sampleRate: tts.sampleRate,
    async *synthesize(text, opts) {
      const slot = await slotFor(gate, share, opts.signal, tts.name, 'speech');
      try {
        yield* tts.synthesize(text, opts);
      } finally {
        slot.release();
      }
    },
  };
}
