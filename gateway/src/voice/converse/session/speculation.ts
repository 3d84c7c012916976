import type { SpeechRecognizer } from '../contracts.js';
import { UPLINK_RATE } from './ports.js';

/** One transcription request of an utterance (or of what has been heard of it so far). */
export interface AsrRequest {
  ac: AbortController;
  /** performance.now() when it was sent. */
  startedAt: number;
  /** The transcript, trimmed; rejects like SpeechRecognizer.transcribe (a handled rejection: await it or drop it). */
  text: Promise<string>;
}

export interface AsrRequestDeps {
  asr: SpeechRecognizer;
  wav(pcm: Int16Array, sampleRate: number): Buffer;
  language?: string | undefined;
  timeoutMs: number;
}

/** Sends `pcm` (16 kHz) to the recogniser now, under its own abort and the recogniser's timeout. */
export function requestTranscript(d: AsrRequestDeps, pcm: Int16Array): AsrRequest {
  const ac = new AbortController();
  const signal = AbortSignal.any([ac.signal, AbortSignal.timeout(d.timeoutMs)]);
  const text = d.asr.transcribe(d.wav(pcm, UPLINK_RATE), { signal, language: d.language }).then((t) => t.trim());
  text.catch(() => undefined);
  return { ac, startedAt: performance.now(), text };
}

/** Speculative transcriptions started per utterance at most (each long pause may start one). */
const MAX_PER_UTTERANCE = 4;

export interface SpeculationDeps extends AsrRequestDeps {
  /** Quiet after speech that starts a speculative transcription (well inside the detector's end-of-speech wait). */
  afterMs: number;
  counted(result: 'used' | 'aborted'): void;
}

/**
 * Speculative transcription: when the detector has heard `afterMs` of quiet after speech (the start of its
 * end-of-speech wait), what has been heard is sent to the recogniser at once; if speech resumes the request is
 * aborted and listening goes on; when the end of speech is confirmed the request in flight (or done) is the
 * utterance's transcript. Recognition has no side effects, so starting it early is safe; the model's turn is
 * never started speculatively. It pays a recogniser request per pause longer than `afterMs` (counted).
 */
export class Speculation {
  private current: (AsrRequest & { samples: number }) | undefined;
  private started = 0;

  constructor(private readonly d: SpeculationDeps) {}

  /**
   * After each uplink packet once speech was heard: `samples` heard so far, the last `quietMs` of them quiet.
   * `audio()` gives them (called only when a request starts); `admit()` says whether the utterance may reach the
   * recogniser at all (asked only when a request would start: the device's rate of utterances).
   */
  update(samples: number, quietMs: number | undefined, audio: () => Int16Array, admit: () => boolean = () => true): void {
    if (quietMs === undefined || this.d.afterMs <= 0) return;
    if (this.current && !this.covers(samples, quietMs)) this.abort();
    if (this.current || quietMs < this.d.afterMs || this.started >= MAX_PER_UTTERANCE || !admit()) return;
    this.started++;
    this.current = { ...requestTranscript(this.d, audio()), samples };
  }

  /** At the end of speech: the request whose audio is the whole utterance (nothing but quiet followed it), if any. */
  take(samples: number, quietMs: number | undefined): AsrRequest | undefined {
    const c = this.current;
    this.current = undefined;
    this.started = 0;
    if (!c) return undefined;
    if (quietMs === undefined || !this.covers(samples, quietMs, c)) {
      this.count(c);
      return undefined;
    }
    this.d.counted('used');
    return c;
  }

  /** Speech resumed, or the utterance was dropped: the request is closed. */
  abort(): void {
    const c = this.current;
    this.current = undefined;
    if (c) this.count(c);
  }

  /** A new utterance. */
  reset(): void {
    this.abort();
    this.started = 0;
  }

  private count(c: AsrRequest): void {
    c.ac.abort();
    this.d.counted('aborted');
  }

  /** Whether everything heard after the request's audio is quiet (the quiet run began at or before its end). */
  private covers(samples: number, quietMs: number, c = this.current): boolean {
    return c !== undefined && samples - (quietMs * UPLINK_RATE) / 1000 <= c.samples;
  }
}
