/**
 * Bounds every recogniser and synthesiser (whichever kind) where its audio enters the gateway, on top of each provider's own idle
 * timeout and byte cap: those let a provider that sends a few bytes inside every idle period (a slow drip) hold a
 * sentence, its turn and its speech slot for hours, and one that never stops talking play minutes of audio for a
 * sentence of three words.
 */
import type { Logger } from 'pino';
import { ThrottledLog } from '../../../throttle/throttled-log.js';
import { ProviderError, type SpeechRecognizer, type SpeechSynthesizer } from '../contracts.js';

/** A transcript longer than this is cut (the longest utterance, 60 s of fast speech, is under 1 000 characters). */
export const MAX_TRANSCRIPT_CHARS = 2048;

/**
 * `asr` whose transcripts are at most MAX_TRANSCRIPT_CHARS: what a recogniser answers goes to the device's display
 * (`stt`), the event bus and the model. A longer one is cut, `onCut` told (a counter) and a line logged, one a minute.
 */
export function boundedRecognizer(asr: SpeechRecognizer, log: Logger, onCut?: () => void): SpeechRecognizer {
  const lines = new ThrottledLog(log, 'warn', { linesPerWindow: 1, windowMs: 60_000 });
  return {
    name: asr.name,
    async transcribe(wav, opts) {
      const text = await asr.transcribe(wav, opts);
      if (text.length <= MAX_TRANSCRIPT_CHARS) return text;
      onCut?.();
      lines.write({ provider: asr.name, chars: text.length, max: MAX_TRANSCRIPT_CHARS }, 'transcript longer than any utterance; cut');
      return text.slice(0, MAX_TRANSCRIPT_CHARS);
    },
  };
}

/** The longest a sentence's speech may be: 10 s, and 400 ms a character (slow speech of any language, with room). */
export function maxSpeechMs(text: string): number {
  let chars = 0;
  for (const _ of text) chars++;
  return 10_000 + 400 * chars;
}

/**
 * `tts` with two more bounds per sentence: its audio at most `maxSpeechMs(text)` (`too_long`), and the time spent
 * waiting for the provider (not the reader's time holding a chunk) at most `timeoutMs` more than the audio it has
 * delivered (`slow`): a provider must keep up with real time, as the device plays it. Either closes the request.
 */
export function boundedSynthesizer(tts: SpeechSynthesizer, timeoutMs: number): SpeechSynthesizer {
  const { name, sampleRate } = tts;
  return {
    name,
    sampleRate,
    async *synthesize(text, opts) {
      const maxMs = maxSpeechMs(text);
      const maxSamples = Math.ceil((maxMs * sampleRate) / 1000);
      const ac = new AbortController();
      const onAbort = (): void => ac.abort();
      if (opts.signal.aborted) ac.abort();
      else opts.signal.addEventListener('abort', onAbort, { once: true });
      const source = tts.synthesize(text, { ...opts, signal: ac.signal })[Symbol.asyncIterator]();
      const slowError = () => new ProviderError('slow', 'speech arrived slower than real time', name);
      let samples = 0;
      let waited = 0;
      let slow = false;
      try {
        for (;;) {
          // Until the provider falls `timeoutMs` behind real time, its own idle timeout is the tighter bound: no timer.
          const left = timeoutMs + (samples * 1000) / sampleRate - waited;
          const timer =
            left < timeoutMs
              ? setTimeout(
                  () => {
                    slow = true;
                    ac.abort();
                  },
                  Math.max(0, left),
                )
              : undefined;
          const t0 = performance.now();
          let r: IteratorResult<Int16Array>;
          try {
            r = await source.next();
          } catch (e) {
            throw slow ? slowError() : e;
          } finally {
            clearTimeout(timer);
            waited += performance.now() - t0;
          }
          if (slow) throw slowError();
          if (r.done) return;
          samples += r.value.length;
          if (samples > maxSamples) throw new ProviderError('too_long', `speech longer than ${Math.round(maxMs / 1000)} s for its sentence`, name);
          yield r.value;
        }
      } finally {
        opts.signal.removeEventListener('abort', onAbort);
        // A request still open (a bound hit, the reader gone) is closed; its closing cannot replace why.
        ac.abort();
        try {
          await source.return?.(undefined);
        } catch {
          // the provider's own 'aborted'
        }
      }
    },
  };
}
