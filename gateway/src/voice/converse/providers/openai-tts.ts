/**
 * Speech synthesis through an OpenAI-compatible `/v1/audio/speech` (OpenAI, Kokoro-FastAPI, …) with the official
 * SDK, asking for `pcm` (24 kHz 16-bit mono, raw) or `wav`, streamed: each chunk of audio is handed on as it
 * arrives. No MP3 decoder needed.
 */
import OpenAI from 'openai';
import type { Logger } from 'pino';
import { ProviderError, type SpeechSynthesizer, type SynthesizeOptions } from '../contracts.js';
import { WavStreamParser } from '../audio/wav.js';
import { Resampler } from '../audio/resample.js';
import { deadline, toProviderError } from './errors.js';
import { limitedFetch } from '../../../limited-fetch.js';

/** What the API's `pcm` format is (OpenAI's documentation: 24 kHz, 16-bit signed, little-endian, mono). */
export const OPENAI_PCM_RATE = 24_000;
/** A sentence's speech bigger than this is cut off (≈ 5 minutes at 24 kHz). */
const MAX_BYTES = 16 * 1024 * 1024;

export interface OpenAiSynthesizerOptions {
  baseUrl?: string | undefined;
  apiKey?: string | undefined;
  model: string;
  voice: string;
  format: 'pcm' | 'wav';
  /** The rate handed out (resampled from the API's when different). */
  sampleRate: number;
  /** Time to the first byte and between chunks. */
  timeoutMs: number;
  log: Logger;
}

export class OpenAiSynthesizer implements SpeechSynthesizer {
  readonly name = 'openai';
  readonly sampleRate: number;
  private readonly client: OpenAI;

  constructor(private readonly o: OpenAiSynthesizerOptions) {
    this.sampleRate = o.sampleRate;
    // An error's body is read whole by the SDK: bounded like the audio.
    this.client = new OpenAI({
      apiKey: o.apiKey ?? 'none',
      baseURL: o.baseUrl ?? null,
      maxRetries: 0,
      timeout: o.timeoutMs + 1000,
      fetch: limitedFetch(MAX_BYTES + 64 * 1024, () => new ProviderError('too_long', `the response was larger than ${MAX_BYTES + 64 * 1024} bytes`, this.name)),
    });
  }

  async *synthesize(text: string, opts: SynthesizeOptions): AsyncIterable<Int16Array> {
    const d = deadline(opts.signal, this.o.timeoutMs);
    try {
      const res = await this.client.audio.speech.create(
        { model: this.o.model, voice: opts.voice ?? this.o.voice, input: text, response_format: this.o.format },
        { signal: d.signal },
      );
      if (!res.body) throw new ProviderError('bad_output', 'speech response had no body', this.name);
      const wav = this.o.format === 'wav' ? new WavStreamParser() : undefined;
      let resampler: Resampler | undefined;
      let carry: number | undefined; // an odd byte left from the previous chunk (raw pcm)
      let total = 0;
      for await (const chunk of res.body as AsyncIterable<Uint8Array>) {
        d.touch();
        total += chunk.length;
        if (total > MAX_BYTES) throw new ProviderError('too_long', 'speech longer than the limit', this.name);
        let samples: Int16Array;
        if (wav) samples = wav.push(chunk);
        else {
          const bytes = carry === undefined ? chunk : concatByte(carry, chunk);
          const even = bytes.length & ~1;
          carry = even < bytes.length ? bytes[even] : undefined;
          samples = new Int16Array(even / 2);
          new Uint8Array(samples.buffer).set(bytes.subarray(0, even));
        }
        const rate = wav ? (wav.format?.sampleRate ?? OPENAI_PCM_RATE) : OPENAI_PCM_RATE;
        if (rate !== this.sampleRate) resampler ??= new Resampler(rate, this.sampleRate);
        const out = resampler ? resampler.push(samples) : samples;
        if (out.length) {
          d.pause();
          yield out;
          d.touch();
        }
      }
      if (wav && !wav.format) throw new ProviderError('bad_output', 'speech response was not a WAV', this.name);
      const tail = resampler?.flush();
      if (tail?.length) yield tail;
    } catch (err) {
      const e = toProviderError(err, this.name, 'speech', d, [this.o.apiKey]);
      if (e.code !== 'aborted') this.o.log.warn({ provider: this.name, code: e.code, err: e.message }, 'speech synthesis failed');
      throw e;
    } finally {
      d.clear();
    }
  }
}

function concatByte(first: number, rest: Uint8Array): Uint8Array {
  const out = new Uint8Array(rest.length + 1);
  out[0] = first;
  out.set(rest, 1);
  return out;
}
