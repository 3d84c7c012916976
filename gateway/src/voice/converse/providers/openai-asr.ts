/**
 * Speech recognition through an OpenAI-compatible `/v1/audio/transcriptions` (OpenAI, Groq, speaches,
 * faster-whisper-server) with the official SDK: multipart `file` (the utterance's WAV), `model`, and
 * `language` when configured.
 */
import OpenAI, { toFile } from 'openai';
import type { Logger } from 'pino';
import { ProviderError, type RecognizeOptions, type SpeechRecognizer } from '../contracts.js';
import { deadline, toProviderError } from './errors.js';
import { limitedFetch } from '../../../limited-fetch.js';

/** A transcription's JSON is a few hundred bytes for the longest utterance: more is not read (the SDK buffers it whole). */
const MAX_RESPONSE_BYTES = 256 * 1024;

export interface OpenAiRecognizerOptions {
  baseUrl?: string | undefined;
  apiKey?: string | undefined;
  model: string;
  language?: string | undefined;
  timeoutMs: number;
  log: Logger;
}

export class OpenAiRecognizer implements SpeechRecognizer {
  readonly name = 'openai';
  private readonly client: OpenAI;

  constructor(private readonly o: OpenAiRecognizerOptions) {
    // Local servers need no key, but the SDK insists on one. Retries would stretch a turn past the user's patience.
    this.client = new OpenAI({
      apiKey: o.apiKey ?? 'none',
      baseURL: o.baseUrl ?? null,
      maxRetries: 0,
      timeout: o.timeoutMs + 1000,
      fetch: limitedFetch(MAX_RESPONSE_BYTES, () => new ProviderError('too_long', `the response was larger than ${MAX_RESPONSE_BYTES} bytes`, this.name)),
    });
  }

  async transcribe(wav: Buffer, opts: RecognizeOptions): Promise<string> {
    const d = deadline(opts.signal, this.o.timeoutMs);
    const language = opts.language ?? this.o.language;
    try {
      const file = await toFile(wav, 'utterance.wav', { type: 'audio/wav' });
      const r = await this.client.audio.transcriptions.create(
        { file, model: this.o.model, response_format: 'json', ...(language ? { language } : {}) },
        { signal: d.signal },
      );
      return typeof r.text === 'string' ? r.text.trim() : '';
    } catch (err) {
      const e = toProviderError(err, this.name, 'transcription', d, [this.o.apiKey]);
      if (e.code !== 'aborted') this.o.log.warn({ provider: this.name, code: e.code, err: e.message }, 'speech recognition failed');
      throw e;
    } finally {
      d.clear();
    }
  }
}
