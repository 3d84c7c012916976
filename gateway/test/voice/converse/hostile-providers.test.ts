import { pino } from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import type { SpeechSynthesizer } from '../../../src/voice/converse/contracts.js';
import { pcmToWav } from '../../../src/voice/converse/audio/wav.js';
import { AsrConfigSchema, createRecognizer, createSynthesizer, TtsConfigSchema } from '../../../src/voice/converse/providers/config.js';
import { speechPcm, startSpeechServer, type SpeechServer } from '../../support/speech-servers.js';
import { providerRejection } from '../../support/provider-error.js';

/**
 * Speech providers that misbehave on purpose, over their real wire format (the OpenAI-compatible stand-in): a
 * synthesiser that drips its audio or never stops, a recogniser that answers megabytes. Each is bounded where its
 * bytes enter the gateway, whichever provider kind it is. No clock in an assertion: each test awaits the outcome.
 */

const log = pino({ level: 'silent' });
const env = { VOICE_KEY: 'sk-test-secret-key-123456' };
const signal = (): AbortSignal => new AbortController().signal;

let server: SpeechServer | undefined;
afterEach(async () => {
  await server?.close();
  server = undefined;
});

async function drain(s: SpeechSynthesizer, text: string): Promise<number> {
  let n = 0;
  for await (const p of s.synthesize(text, { signal: signal() })) n += p.length;
  return n;
}

describe('a hostile synthesiser', () => {
  const tts = (extra: Record<string, unknown> = {}) =>
    createSynthesizer(TtsConfigSchema.parse({ baseUrl: server?.url, apiKeyEnv: 'VOICE_KEY', ...extra }), log, { env });

  it('dripping audio slower than real time (each chunk inside the idle timeout) is cut: code "slow", the request closed', { timeout: 60_000 }, async () => {
    // Two bytes (one sample, 1/24 ms of audio) every 5 ms: the idle timeout never fires, and the two minutes of audio
    // would take hours to arrive. Before, the sentence (and its turn, and its speech slot) waited all that time. The
    // idle timeout is 3 s, not less: on a busy machine one stall of the stand-in longer than it ends the request as
    // "timeout" before the drip adds up to "slow".
    server = await startSpeechServer({ speak: { pcm: new Int16Array(24_000 * 120).fill(100), chunkBytes: 2, chunkDelayMs: 5 } });
    const e = await providerRejection(drain(tts({ timeoutMs: 3000 }), 'A sentence.'));
    expect(e.code).toBe('slow');
    await server.speeches[0]!.aborted;
  });

  it('audio far longer than its sentence could take is cut: code "too_long", the request closed', { timeout: 60_000 }, async () => {
    // Three minutes of audio for "Hi." (under the 16 MB a response may carry): before, all of it was played.
    server = await startSpeechServer({ speak: { pcm: new Int16Array(24_000 * 180).fill(100), chunkBytes: 48_000 } });
    const e = await providerRejection(drain(tts(), 'Hi.'));
    expect(e.code).toBe('too_long');
    await server.speeches[0]!.aborted;
  });

  it('a provider keeping up with real time, and a paced reader, are not cut', { timeout: 60_000 }, async () => {
    const pcm = speechPcm('A sentence of a few seconds, said at an ordinary pace.');
    server = await startSpeechServer({ speak: { pcm, chunkBytes: 24_000 } });
    let n = 0;
    for await (const p of tts({ timeoutMs: 500 }).synthesize('A sentence of a few seconds, said at an ordinary pace.', { signal: signal() })) {
      n += p.length;
      // Playback at real time holds each 0.5 s chunk longer than the idle timeout: the reader's time is not the provider's.
      await new Promise((r) => setTimeout(r, 700));
    }
    expect(n).toBe(pcm.length);
  });
});

describe('a hostile recogniser', () => {
  const wav = pcmToWav(speechPcm('hello there', 16_000), 16_000);
  const asr = () => createRecognizer(AsrConfigSchema.parse({ baseUrl: server?.url, apiKeyEnv: 'VOICE_KEY' }), log, env);

  it('a transcript longer than any utterance is cut to 2048 characters', async () => {
    const text = 'word '.repeat(20_000).trim();
    server = await startSpeechServer({ transcribe: { text } });
    const got = await asr().transcribe(wav, { signal: signal() });
    expect(got.length).toBeLessThanOrEqual(2048);
    expect(text.startsWith(got)).toBe(true);
  });

  it('a response of megabytes is refused before it is all read: code "too_long"', async () => {
    // 8 MB of JSON: the SDK read all of it into memory (and the device was sent all of it as its `stt`).
    server = await startSpeechServer({ transcribe: { text: 'x'.repeat(8 * 1024 * 1024) } });
    const e = await providerRejection(asr().transcribe(wav, { signal: signal() }));
    expect(e.code).toBe('too_long');
  });
});
