import { isScheduledEncoder, ProviderError, type OpusEncoder, type ScheduledEncoder, type SpeechSynthesizer } from '../contracts.js';
import type { DownlinkPacer } from './pacer.js';
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

/** A sentence waiting to be spoken, and its synthesis once requested. */
interface Upcoming {
  text: string;
  emotion: ReturnType<typeof emotionOf>;
  audio?: { it: AsyncIterator<Int16Array>; first: Promise<IteratorResult<Int16Array>> };
}

/**
 * Sentences whose synthesis is requested ahead of the one being spoken, once its audio has begun to arrive (not
 * before: the first sentence's request has the path to itself): the next sentence's audio is on its way while this
 * one plays, so a slow first byte from the provider does not open a gap at the boundary.
 */
const SYNTH_AHEAD = 1;

/**
 * Speaks one turn's sentences in order: each is synthesised (streamed), cut into frames and queued on the
 * pacer (encoded when due) behind its `tts sentence_start`; the first is preceded by `llm` (its emotion) and a single
 * `tts start`. `end()` queues `tts stop` after the last frame. The next sentence's synthesis is requested while the
 * one before it plays (see SYNTH_AHEAD), its chunks read in order once its turn comes.
 */
export class Speaker {
  private chain: Promise<void> = Promise.resolve();
  private readonly upcoming: Upcoming[] = [];
  /** The sentence speaking now has had audio for a period: the ones after it are requested as they are said. */
  private flowing = false;
  private started = false;
  private failed = false;
  private spokenSentences = 0;

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
    const next: Upcoming = { text, emotion: emotionOf(sentence) };
    this.upcoming.push(next);
    if (this.flowing) this.requestAhead(SYNTH_AHEAD);
    this.chain = this.chain.then(async () => {
      try {
        await this.speak(next);
      } finally {
        this.upcoming.shift();
      }
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

  /** Starts the synthesis of the sentence speaking now and of `ahead` after it (the request and its first chunk). */
  private requestAhead(ahead: number): void {
    if (this.d.signal.aborted || this.failed) return;
    for (const u of this.upcoming.slice(0, 1 + ahead)) {
      if (u.audio) continue;
      const it = this.d.synth.synthesize(u.text, { signal: this.d.signal, voice: this.d.voice })[Symbol.asyncIterator]();
      const first = it.next();
      // Awaited in its turn (where a failure is reported); until then a rejection is not unhandled.
      first.catch(() => undefined);
      u.audio = { it, first };
    }
  }

  private async speak(u: Upcoming): Promise<void> {
    if (this.d.signal.aborted || this.failed) return void u.audio?.it.return?.().catch(() => undefined);
    this.flowing = false;
    this.requestAhead(0);
    const { text, emotion } = u;
    const { encoder, pacer, synth } = this.d;
    const audio = u.audio!;
    const frame = new Int16Array(encoder.frameSamples);
    let filled = 0;
    let announced = false;
    let armed = false;
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
      for (let r = await audio.first; !r.done; r = await audio.it.next()) {
        const chunk = r.value;
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
        // One period after the first chunk's frames went to the encoder: the next sentence's request (the SDK's work for
        // it) is then out of the way of this one's first frame, and still has this sentence's playback to arrive in.
        if (!armed) {
          armed = true;
          setTimeout(() => {
            if (this.upcoming[0] === u) this.flowing = true;
            this.requestAhead(SYNTH_AHEAD);
          }, encoder.frameMs).unref();
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
      // Closes the request when the turn stopped reading it (an abort); a no-op once it ended.
      void audio.it.return?.()?.catch(() => undefined);
    }
  }
}
