import { isScheduledEncoder, ProviderError, type OpusEncoder, type ScheduledEncoder, type SpeechSynthesizer } from '../contracts.js';
import type { DownlinkPacer } from './pacer.js';
import { PrefetchedSpeech } from './prefetch.js';
import { emotionOf, speakable, toDevice } from './wire.js';

export interface SpeakerDeps {
  sessionId: string;
  synth: SpeechSynthesizer;
  /** A scheduled encoder gets each frame as soon as it is cut (encoded elsewhere); a plain one encodes when it is due. */
  encoder: OpusEncoder | ScheduledEncoder;
  /** PCM at the synthesiser's rate → the encoder's rate (identity when they match). */
  resample(pcm: Int16Array, from: number, to: number): Int16Array;
  pacer: DownlinkPacer;
  /** The turn's: aborting it closes the synthesis request and stops queuing audio. */
  signal: AbortSignal;
  voice?: string | undefined;
  /** A sentence could not be synthesised (counted and shown once per turn by the caller). */
  onError(e: ProviderError): void;
  /** A speaking segment begins (`tts start` queued): realtime barge-in detection starts afresh. */
  onSpeaking?(): void;
}

/**
 * Speaks one turn's sentences in order: each is synthesised (streamed), cut into frames and queued on the
 * pacer (encoded when due) behind its `tts sentence_start`; the first is preceded by `llm` (its emotion) and a single
 * `tts start`. `end()` queues `tts stop` after the last frame. A sentence's synthesis starts when the one before
 * it begins to be spoken (one request ahead at most), so its audio is at hand when the previous one's runs out.
 */
export class Speaker {
  private chain: Promise<void> = Promise.resolve();
  private started = false;
  private failed = false;
  private spokenSentences = 0;
  /** Resolves when the last sentence said so far begins to be spoken: the next one's synthesis waits for it. */
  private lastBegins: Promise<void> = Promise.resolve();

  constructor(private readonly d: SpeakerDeps) {}

  /** Sentences that reached the device as audio. */
  get spoken(): number {
    return this.spokenSentences;
  }

  get speaking(): boolean {
    return this.started;
  }

  say(sentence: string): void {
    const text = speakable(sentence);
    if (!text || !/[\p{L}\p{N}]/u.test(text)) return;
    const emotion = emotionOf(sentence);
    const { synth, signal, voice } = this.d;
    // Held unread at most: as much as the pacer queues (12 s at the default 200 frames).
    const speech = new PrefetchedSpeech(synth.sampleRate * 12, signal);
    const previousBegins = this.lastBegins;
    let begins!: () => void;
    this.lastBegins = new Promise<void>((r) => (begins = r));
    void previousBegins.then(() => {
      if (!this.failed && !speech.signal.aborted) speech.start(synth.synthesize(text, { signal: speech.signal, voice }));
    });
    this.chain = this.chain.then(() => {
      begins();
      return this.speak(text, emotion, speech);
    });
  }

  /** After the last sentence: `tts stop` once the audio is queued; resolves when it has been sent. */
  async end(): Promise<void> {
    await this.chain;
    if (this.d.signal.aborted) return;
    if (this.started) await this.d.pacer.push({ kind: 'json', message: toDevice.ttsStop(this.d.sessionId) }, this.d.signal);
    await this.d.pacer.drained();
    this.started = false;
  }

  private async speak(text: string, emotion: ReturnType<typeof emotionOf>, speech: PrefetchedSpeech): Promise<void> {
    if (this.d.signal.aborted || this.failed) return speech.cancel();
    const { encoder, pacer, synth } = this.d;
    const frame = new Int16Array(encoder.frameSamples);
    let filled = 0;
    let announced = false;
    const announce = async () => {
      if (announced) return;
      announced = true;
      if (!this.started) {
        this.started = true;
        pacer.newSegment();
        this.d.onSpeaking?.();
        await pacer.push({ kind: 'json', message: toDevice.llm(this.d.sessionId, emotion) }, this.d.signal);
        await pacer.push({ kind: 'json', message: toDevice.ttsStart(this.d.sessionId) }, this.d.signal);
      }
      await pacer.push({ kind: 'json', message: toDevice.sentence(this.d.sessionId, text) }, this.d.signal);
    };
    const emit = async () => {
      await announce();
      if (this.d.signal.aborted) return;
      // A copy: `frame` is refilled at once.
      const pcm = frame.slice();
      if (isScheduledEncoder(encoder)) await pacer.push({ kind: 'pcm', pcm, encoder }, this.d.signal);
      else await pacer.push({ kind: 'frame', opus: () => encoder.encode(pcm) }, this.d.signal);
    };
    try {
      for await (const chunk of speech) {
        if (this.d.signal.aborted) return;
        const pcm = synth.sampleRate === encoder.sampleRate ? chunk : this.d.resample(chunk, synth.sampleRate, encoder.sampleRate);
        for (let i = 0; i < pcm.length;) {
          const n = Math.min(pcm.length - i, frame.length - filled);
          frame.set(pcm.subarray(i, i + n), filled);
          filled += n;
          i += n;
          if (filled === frame.length) {
            await emit();
            if (this.d.signal.aborted) return;
            filled = 0;
          }
        }
      }
      if (filled > 0 && !this.d.signal.aborted) {
        frame.fill(0, filled);
        await emit();
      }
      if (announced) this.spokenSentences++;
    } catch (e) {
      if (this.d.signal.aborted) return;
      this.failed = true;
      this.d.onError(
        e instanceof ProviderError ? e : new ProviderError('bad_output', e instanceof Error ? e.message.slice(0, 200) : 'synthesis failed', synth.name),
      );
    } finally {
      speech.cancel(); // a request still open (an abort, a failed push) is closed
    }
  }
}
