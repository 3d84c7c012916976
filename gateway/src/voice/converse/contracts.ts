/**
 * The seams of voice.mode "converse" (Voxgate answers a device's voice session itself: speech in, the
 * assistant with the fleet's tools, speech out). Audio and providers live under audio/ and providers/;
 * the per-device conversation (protocol, turn, pacing) under session/. Each side depends only on these.
 */

/** 16-bit signed little-endian mono PCM samples at a stated rate. */
export interface Pcm {
  readonly samples: Int16Array;
  readonly sampleRate: number;
}

/** Decodes one device's uplink Opus packets (one 20/60 ms packet each) to PCM at `sampleRate`. */
export interface OpusDecoder {
  readonly sampleRate: number;
  /** One Opus packet → its PCM; a corrupt packet gives an empty array, never a throw. */
  decode(packet: Uint8Array): Int16Array;
  free(): void;
}

/** Encodes PCM at `sampleRate` to Opus packets of exactly `frameMs` each (the server hello's audio_params). */
export interface OpusEncoder {
  readonly sampleRate: number;
  readonly frameMs: number;
  /** Samples per frame: sampleRate * frameMs / 1000. */
  readonly frameSamples: number;
  /** Exactly `frameSamples` samples → one Opus packet. */
  encode(frame: Int16Array): Uint8Array;
  /** Changes the complexity (0-10) from the next frame on, keeping the encoder's state. */
  setComplexity?(complexity: number): void;
  free(): void;
}

/** One frame queued on a ScheduledEncoder: its packet arrives later (encoded elsewhere, earliest deadline first). */
export interface EncodeJob {
  /** The packet once encoded; undefined before that, and for a frame that failed or was cancelled. */
  readonly packet: Uint8Array | undefined;
  readonly settled: boolean;
  /** Called once when the job settles (at once when it already has). */
  onSettled(fn: () => void): void;
  /** Not wanted any more (abort): skipped if not yet encoded, its packet dropped if it is. */
  cancel(): void;
  /** Frames (of every device) queued for encoding and not yet encoded when this one was scheduled. */
  readonly backlog?: number;
}

/**
 * A downlink encoder whose frames are encoded off the caller's stack (another process, or the main thread in short
 * slices), ordered across all devices by when each device needs its next frame. One device's frames encode in the
 * order scheduled (Opus is stateful).
 */
export interface ScheduledEncoder {
  readonly sampleRate: number;
  readonly frameMs: number;
  readonly frameSamples: number;
  /** Exactly `frameSamples` samples; `deadlineMs` (performance.now() clock): when the device would run dry without it. */
  schedule(frame: Int16Array, deadlineMs: number): EncodeJob;
  free(): void;
}

export function isScheduledEncoder(e: OpusEncoder | ScheduledEncoder): e is ScheduledEncoder {
  return typeof (e as Partial<ScheduledEncoder>).schedule === 'function';
}

/** What the end-of-speech detector decided about the audio pushed so far. */
export type VadState = 'silence' | 'speech' | 'end';

/**
 * Voice activity over a stream of 16 kHz PCM: 'speech' once speech started, 'end' once speech was followed by
 * enough silence (or steady room noise) — within 1 s of the speaker stopping.
 */
export interface SpeechDetector {
  push(pcm16k: Int16Array): VadState;
  /**
   * Once speech was heard: how long the audio analysed so far has been quiet since the last speech (0 before any
   * speech). Optional: without it no transcription is started speculatively.
   */
  readonly quietMs?: number;
  /** Forget the utterance (new turn). */
  reset(): void;
}

export interface RecognizeOptions {
  signal: AbortSignal;
  /** BCP-47 or ISO-639-1, as configured; absent lets the recogniser decide. */
  language?: string | undefined;
}

/** Speech → text. The audio is a complete utterance as a WAV file (16 kHz, 16-bit, mono). */
export interface SpeechRecognizer {
  readonly name: string;
  /** The transcript ('' for silence or noise). Rejects with ProviderError on failure or abort. */
  transcribe(wav: Buffer, opts: RecognizeOptions): Promise<string>;
}

export interface SynthesizeOptions {
  signal: AbortSignal;
  /** Overrides the configured voice (per tenant or device). */
  voice?: string | undefined;
}

/** Text → speech as PCM chunks at `sampleRate` (any chunk size), streamed as the provider produces them. */
export interface SpeechSynthesizer {
  readonly name: string;
  readonly sampleRate: number;
  synthesize(text: string, opts: SynthesizeOptions): AsyncIterable<Int16Array>;
}

/**
 * A speech provider failed: `code` is stable (for metrics), `message` is safe to show (no key, no URL query). `slow`:
 * a synthesiser delivering its audio slower than real time; `too_long`: more output than the request could need.
 */
export class ProviderError extends Error {
  constructor(
    readonly code: 'timeout' | 'aborted' | 'http' | 'network' | 'bad_output' | 'process' | 'busy' | 'slow' | 'too_long',
    message: string,
    readonly provider: string,
  ) {
    super(message);
    this.name = 'ProviderError';
  }
}
