import { pino } from 'pino';
import { Registry } from 'prom-client';
import { afterEach, describe, expect, it } from 'vitest';
import { ModelRequestsSlice } from '../../../src/throttle/config.js';
import { createModelGates, type ModelGates } from '../../../src/throttle/model-gates.js';
import { pcmToWav } from '../../../src/voice/converse/audio/wav.js';
import { ProviderError } from '../../../src/voice/converse/contracts.js';
import { AsrConfigSchema, createRecognizer, createSynthesizer, TtsConfigSchema } from '../../../src/voice/converse/providers/config.js';
import { gatedRecognizer, gatedSynthesizer } from '../../../src/voice/converse/providers/gated.js';
import { deferred, until } from '../../../../test/support/wait.js';
import { speechPcm, startSpeechServer, type SpeechServer } from '../../support/speech-servers.js';

/**
 * The speech providers behind modelRequests.asr / .tts (providers/gated.ts), against the OpenAI-compatible speech
 * stand-in, which counts the requests it is answering at once.
 */

const log = pino({ level: 'silent' });
const env = { VOICE_KEY: 'sk-test-secret-key-123456' };
const wav = pcmToWav(speechPcm('hello there', 16_000), 16_000);
const open = () => new AbortController().signal;

let server: SpeechServer | undefined;
afterEach(async () => {
  await server?.close();
  server = undefined;
});

function gates(o: { maxConcurrent: number; maxWaiting?: number; maxWaitingPerTenant?: number }): ModelGates {
  const limits = { maxConcurrent: o.maxConcurrent, maxWaiting: o.maxWaiting ?? 16, maxWaitingPerTenant: o.maxWaitingPerTenant ?? 16, maxWaitMs: 60_000 };
  return createModelGates(ModelRequestsSlice.parse({ asr: limits, tts: limits }), new Registry(), log);
}
const asrOf = (s: SpeechServer) => createRecognizer(AsrConfigSchema.parse({ baseUrl: s.url, apiKeyEnv: 'VOICE_KEY' }), log, env);
const ttsOf = (s: SpeechServer) => createSynthesizer(TtsConfigSchema.parse({ baseUrl: s.url, apiKeyEnv: 'VOICE_KEY', voice: 'nova' }), log, { env });

async function providerError(p: Promise<unknown>): Promise<ProviderError> {
  const e = await p.then(
    () => undefined,
    (err: unknown) => err,
  );
  expect(e).toBeInstanceOf(ProviderError);
  return e as ProviderError;
}

describe('speech recognition behind modelRequests.asr', () => {
  it('lets at most maxConcurrent transcriptions reach the provider; the rest wait, then complete', async () => {
    const release = deferred();
    server = await startSpeechServer({ transcribe: (_req, i) => ({ text: `utterance ${i}`, hold: release.promise }) });
    const g = gates({ maxConcurrent: 2 });
    const asr = gatedRecognizer(asrOf(server), g.asr, 'acme');
    const texts = Array.from({ length: 5 }, () => asr.transcribe(wav, { signal: open() }));
    await until(() => server!.transcriptions.length === 2 && g.asr.waiting === 3, 'two at the provider, three waiting');
    expect(server.inFlight.transcriptions).toBe(2);
    release.resolve();
    expect((await Promise.all(texts)).sort()).toEqual([0, 1, 2, 3, 4].map((i) => `utterance ${i}`));
    expect(server.transcriptions).toHaveLength(5);
    expect(server.peak.transcriptions).toBe(2);
    expect([g.asr.inFlight, g.asr.waiting]).toEqual([0, 0]);
  });

  it('refuses past the queue with ProviderError "busy" (the provider never sees it), and a cancelled waiter never reaches it', async () => {
    const release = deferred();
    server = await startSpeechServer({ transcribe: { text: 'ok', hold: release.promise } });
    const g = gates({ maxConcurrent: 1, maxWaiting: 1 });
    const asr = gatedRecognizer(asrOf(server), g.asr, 'acme');
    const first = asr.transcribe(wav, { signal: open() });
    await until(() => server!.transcriptions.length === 1, 'the first at the provider');
    const ac = new AbortController();
    const cancelled = asr.transcribe(wav, { signal: ac.signal });
    const busy = await providerError(asr.transcribe(wav, { signal: open() }));
    expect(busy.code).toBe('busy');
    expect(busy.message).toMatch(/busy/);
    ac.abort();
    expect((await providerError(cancelled)).code).toBe('aborted');
    expect(g.asr.waiting).toBe(0);
    release.resolve();
    expect(await first).toBe('ok');
    expect(await asr.transcribe(wav, { signal: open() })).toBe('ok');
    // The first and the last: neither the refused request nor the cancelled one went out.
    expect(server.transcriptions).toHaveLength(2);
    expect(server.peak.transcriptions).toBe(1);
  });

  it("one tenant filling its share of the queue leaves room for another tenant's devices", async () => {
    const release = deferred();
    server = await startSpeechServer({ transcribe: { text: 'ok', hold: release.promise } });
    const g = gates({ maxConcurrent: 1, maxWaiting: 4, maxWaitingPerTenant: 2 });
    const acme = gatedRecognizer(asrOf(server), g.asr, 'acme');
    const globex = gatedRecognizer(asrOf(server), g.asr, 'globex');
    const acmeTexts = [0, 1, 2].map(() => acme.transcribe(wav, { signal: open() }));
    await until(() => server!.transcriptions.length === 1 && g.asr.waiting === 2, "acme's share of the queue full");
    expect((await providerError(acme.transcribe(wav, { signal: open() }))).code).toBe('busy');
    const globexText = globex.transcribe(wav, { signal: open() });
    expect(g.asr.waiting).toBe(3);
    release.resolve();
    expect(await Promise.all([...acmeTexts, globexText])).toEqual(['ok', 'ok', 'ok', 'ok']);
  });
});

describe('speech synthesis behind modelRequests.tts', () => {
  it('holds the slot while the audio streams, and frees it when the reader stops early or the stream dies', async () => {
    server = await startSpeechServer({ speak: { chunkBytes: 4800 } });
    const g = gates({ maxConcurrent: 1 });
    const tts = gatedSynthesizer(ttsOf(server), g.tts, 'acme');
    // A reader that stops after the first chunk (a barge-in): the request is closed and the slot freed.
    const ac = new AbortController();
    const early = tts.synthesize('A long sentence that streams in many chunks.', { signal: ac.signal })[Symbol.asyncIterator]();
    expect((await early.next()).done).toBe(false);
    expect(g.tts.inFlight).toBe(1);
    // A second stream waits for the slot while the first one is held.
    const second = (async () => {
      let samples = 0;
      for await (const chunk of tts.synthesize('Hello.', { signal: open() })) samples += chunk.length;
      return samples;
    })();
    await until(() => g.tts.waiting === 1, 'the second stream waiting');
    expect(server.speeches).toHaveLength(1);
    // As the speaker stops a sentence: the turn's signal aborts, the reader breaks out (return() may say "cancelled").
    ac.abort();
    await early.return?.().catch((e: unknown) => expect((e as ProviderError).code).toBe('aborted'));
    expect(await second).toBe(speechPcm('Hello.').length);
    expect(server.peak.speeches).toBe(1);
    // A provider dying mid-stream: the error reaches the reader, and the slot is free again.
    server.onSpeak({ failAfterChunks: 1 });
    const died = (async () => {
      for await (const _ of tts.synthesize('A sentence the provider drops.', { signal: open() }));
    })();
    expect((await providerError(died)).code).toBe('network');
    expect([g.tts.inFlight, g.tts.waiting]).toEqual([0, 0]);
    server.onSpeak({});
    let samples = 0;
    for await (const chunk of tts.synthesize('Hi.', { signal: open() })) samples += chunk.length;
    expect(samples).toBe(speechPcm('Hi.').length);
    expect(g.tts.inFlight).toBe(0);
  });
});
