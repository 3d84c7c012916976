import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { pino } from 'pino';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import type { SpeechSynthesizer } from '../../../src/voice/converse/contracts.js';
import { parseWav, pcmToWav } from '../../../src/voice/converse/audio/wav.js';
import { resample } from '../../../src/voice/converse/audio/resample.js';
import { AsrConfigSchema, createRecognizer, createSynthesizer, TtsConfigSchema } from '../../../src/voice/converse/providers/config.js';
import { CommandSynthesizer } from '../../../src/voice/converse/providers/command-tts.js';
import { edgeVoiceName } from '../../../src/voice/converse/providers/edge-tts.js';
import { espeakWav, speechPcm, startEdgeTtsServer, startSpeechServer, type EdgeTtsServer, type SpeechServer } from '../../support/speech-servers.js';
import { providerRejection } from '../../support/provider-error.js';

const log = pino({ level: 'silent' });
const KEY = 'sk-test-secret-key-123456';
const env = { VOICE_KEY: KEY };
const signal = (): AbortSignal => new AbortController().signal;

async function collect(s: SpeechSynthesizer, text: string, sig: AbortSignal = signal()): Promise<Int16Array> {
  const parts: Int16Array[] = [];
  for await (const p of s.synthesize(text, { signal: sig })) parts.push(p);
  const out = new Int16Array(parts.reduce((n, p) => n + p.length, 0));
  let off = 0;
  for (const p of parts) {
    out.set(p, off);
    off += p.length;
  }
  return out;
}

let server: SpeechServer | undefined;
let edge: EdgeTtsServer | undefined;
/** Sentences a test may leave running (it failed before its program was killed), cancelled (which kills it); folders. */
const afterTest: Array<() => void> = [];
afterEach(async () => {
  for (const f of afterTest.splice(0)) f();
  await server?.close();
  await edge?.close();
  server = edge = undefined;
});
afterAll(() => {
  // Every temp folder a command provider made is gone.
  expect(readdirSync(tmpdir()).filter((n) => /^voxgate-(asr|tts)-/.test(n))).toEqual([]);
});

describe('voice.asr and voice.tts config', () => {
  it('has defaults for one OpenAI key, and is strict', () => {
    expect(AsrConfigSchema.parse({})).toMatchObject({ provider: 'openai', apiKeyEnv: 'OPENAI_API_KEY', model: 'whisper-1', args: [] });
    expect(TtsConfigSchema.parse({})).toMatchObject({ provider: 'openai', apiKeyEnv: 'OPENAI_API_KEY', model: 'tts-1', format: 'pcm' });
    expect(AsrConfigSchema.safeParse({ nope: 1 }).success).toBe(false);
    expect(AsrConfigSchema.safeParse({ provider: 'command' }).success).toBe(false);
    expect(TtsConfigSchema.safeParse({ provider: 'edge', baseUrl: 'ws://127.0.0.1:1/x' }).success).toBe(true);
    expect(TtsConfigSchema.safeParse({ baseUrl: 'file:///etc/passwd' }).success).toBe(false);
    expect(AsrConfigSchema.safeParse({ language: 'en; rm -rf' }).success).toBe(false);
  });
});

describe('openai transcription provider', () => {
  const wav = pcmToWav(speechPcm('hello there', 16_000), 16_000);
  const asr = (extra: Record<string, unknown> = {}) =>
    createRecognizer(AsrConfigSchema.parse({ baseUrl: server?.url, apiKeyEnv: 'VOICE_KEY', model: 'whisper-large-v3', ...extra }), log, env);

  it('sends the WAV, the model and the language, and returns the text', async () => {
    server = await startSpeechServer({ transcribe: { text: '  set the volume to forty ' } });
    expect(await asr({ language: 'en' }).transcribe(wav, { signal: signal() })).toBe('set the volume to forty');
    const req = server.transcriptions[0];
    expect(req).toMatchObject({ model: 'whisper-large-v3', language: 'en', wavProblem: '', fileType: 'audio/wav' });
    expect(req?.headers.authorization).toBe(`Bearer ${KEY}`);
    expect(req?.samples.length).toBe(speechPcm('hello there', 16_000).length);
    await asr().transcribe(wav, { signal: signal() });
    expect(server.transcriptions[1]?.fields).not.toHaveProperty('language');
  });

  it('turns HTTP errors into ProviderError without the key', async () => {
    server = await startSpeechServer({ transcribe: { status: 401, error: `Incorrect API key provided: ${KEY}. See https://x.example/keys?token=abc` } });
    const e = await providerRejection(asr().transcribe(wav, { signal: signal() }));
    expect(e.code).toBe('http');
    expect(e.provider).toBe('openai');
    expect(e.message).toContain('401');
    expect(e.message).not.toContain(KEY);
    expect(e.message).not.toContain('token=abc');
  });

  it('times out, and cancels on abort, closing the request', async () => {
    server = await startSpeechServer({ transcribe: { hang: true } });
    const e = await providerRejection(asr({ timeoutMs: 500 }).transcribe(wav, { signal: signal() }));
    expect(e.code).toBe('timeout');
    await server.transcriptions[0]?.aborted;
    const ctl = new AbortController();
    const pending = asr().transcribe(wav, { signal: ctl.signal });
    await waitFor(() => server?.transcriptions.length === 2);
    ctl.abort();
    expect((await providerRejection(pending)).code).toBe('aborted');
    await server.transcriptions[1]?.aborted;
  });

  it('says network when nothing listens', async () => {
    const r = createRecognizer(AsrConfigSchema.parse({ baseUrl: 'http://127.0.0.1:9/v1', timeoutMs: 5000 }), log, {});
    expect((await providerRejection(r.transcribe(wav, { signal: signal() }))).code).toBe('network');
  });
});

describe('openai speech provider', () => {
  const tts = (extra: Record<string, unknown> = {}, sampleRate?: number) =>
    createSynthesizer(TtsConfigSchema.parse({ baseUrl: server?.url, apiKeyEnv: 'VOICE_KEY', voice: 'nova', ...extra }), log, {
      env,
      ...(sampleRate ? { sampleRate } : {}),
    });

  it.each(['pcm', 'wav'] as const)('streams %s at 24 kHz, or resampled', async (format) => {
    server = await startSpeechServer({ speak: { chunkBytes: 999 } });
    const pcm = await collect(tts({ format }), 'Hello there.');
    expect(Array.from(pcm)).toEqual(Array.from(speechPcm('Hello there.')));
    expect(server.speeches[0]).toMatchObject({ model: 'tts-1', voice: 'nova', input: 'Hello there.', responseFormat: format });
    const s16 = await collect(tts({ format }, 16_000), 'Hello there.');
    expect(s16.length).toBe(Math.round((speechPcm('Hello there.').length * 2) / 3));
  });

  it('does not count a paced consumer holding a chunk as the provider idling', async () => {
    server = await startSpeechServer({ speak: { chunkBytes: 24_000 } });
    const parts: number[] = [];
    for await (const p of tts({ timeoutMs: 500 }).synthesize('A sentence of a few seconds.', { signal: signal() })) {
      parts.push(p.length);
      // Playback at real time holds each 0.5 s chunk longer than the idle timeout.
      await new Promise((r) => setTimeout(r, 700));
    }
    expect(parts.reduce((a, b) => a + b, 0)).toBe(speechPcm('A sentence of a few seconds.').length);
  });

  it('fails mid-stream, on HTTP errors, on timeouts and on abort, closing the request', async () => {
    server = await startSpeechServer({ speak: { failAfterChunks: 2 } });
    expect((await providerRejection(collect(tts(), 'A long sentence to say.'))).code).toBe('network');
    server.onSpeak({ status: 500, error: 'boom' });
    expect((await providerRejection(collect(tts(), 'x'))).code).toBe('http');
    server.onSpeak({ hang: true });
    expect((await providerRejection(collect(tts({ timeoutMs: 500 }), 'x'))).code).toBe('timeout');
    server.onSpeak({ chunkBytes: 480, chunkDelayMs: 20 });
    const ctl = new AbortController();
    const it = tts().synthesize('A sentence that takes a while to stream.', { signal: ctl.signal })[Symbol.asyncIterator]();
    expect((await it.next()).done).toBe(false);
    ctl.abort();
    expect((await providerRejection(it.next())).code).toBe('aborted');
    await server.speeches.at(-1)?.aborted;
  });
});

describe('edge read-aloud provider', () => {
  const tts = (extra: Record<string, unknown> = {}, sampleRate?: number) =>
    createSynthesizer(TtsConfigSchema.parse({ provider: 'edge', baseUrl: edge?.url, ...extra }), log, sampleRate ? { sampleRate } : {});

  it('speaks the wire format and decodes the MP3 to 24 kHz PCM', async () => {
    edge = await startEdgeTtsServer();
    const pcm = await collect(tts({ voice: 'zh-CN-XiaoxiaoNeural' }), 'Tom & Jerry <3');
    const expected = speechPcm('Tom & Jerry <3').length;
    // MP3 adds the encoder's delay and pads to whole frames.
    expect(pcm.length).toBeGreaterThan(expected);
    expect(pcm.length).toBeLessThan(expected + 4 * 1152);
    expect(Math.max(...pcm.map(Math.abs))).toBeGreaterThan(3000);
    expect(edge.requests[0]).toMatchObject({
      text: 'Tom & Jerry <3',
      voice: 'Microsoft Server Speech Text to Speech Voice (zh-CN, XiaoxiaoNeural)',
      outputFormat: 'audio-24khz-48kbitrate-mono-mp3',
    });
    expect(edge.requests[0]?.query['Sec-MS-GEC-Version']).toMatch(/^1-\d+\./);
    const p16 = await collect(tts({}, 16_000), 'Tom & Jerry <3');
    expect(Math.abs(p16.length - (pcm.length * 2) / 3)).toBeLessThan(4);
    expect(edgeVoiceName('Custom Voice')).toBe('Custom Voice');
  }, 60_000);

  it('fails when the service drops the socket or refuses the connection, times out, and cancels on abort', async () => {
    edge = await startEdgeTtsServer({ speak: { closeCode: 1011 } });
    const refused = createSynthesizer(TtsConfigSchema.parse({ provider: 'edge', baseUrl: edge.url.replace('/edge/v1', '/other') }), log);
    const e = await providerRejection(collect(refused, 'x'));
    expect([e.code, e.message]).toEqual(['http', 'speech failed: HTTP 403']);
    expect((await providerRejection(collect(tts(), 'x'))).code).toBe('network');
    edge.onSpeak({ hang: true });
    expect((await providerRejection(collect(tts({ timeoutMs: 500 }), 'x'))).code).toBe('timeout');
    edge.onSpeak({ chunkBytes: 200, chunkDelayMs: 20 });
    const ctl = new AbortController();
    const it = tts().synthesize('Tom & Jerry <3', { signal: ctl.signal })[Symbol.asyncIterator]();
    expect((await it.next()).done).toBe(false);
    ctl.abort();
    expect((await providerRejection(it.next())).code).toBe('aborted');
    await edge.requests.at(-1)?.aborted;
  });
});

describe('command recogniser', () => {
  const wav = pcmToWav(speechPcm('hi', 16_000), 16_000);

  it('recognises espeak-ng speech offline with pocketsphinx and a grammar', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'voxgate-grammar-'));
    try {
      const grammar = join(dir, 'commands.gram');
      writeFileSync(
        grammar,
        '#JSGF V1.0;\ngrammar commands;\npublic <c> = set the volume to ( ten | twenty | thirty | forty | fifty ) | turn on the light | what time is it;\n',
      );
      const asr = createRecognizer(
        AsrConfigSchema.parse({
          provider: 'command',
          command: '/usr/bin/pocketsphinx_continuous',
          args: ['-infile', '{file}', '-jsgf', grammar, '-logfn', '/dev/null'],
          timeoutMs: 60_000,
        }),
        log,
      );
      const spoken = parseWav(await espeakWav('Set the volume to forty'));
      const utterance = pcmToWav(resample(spoken.samples, spoken.sampleRate, 16_000), 16_000);
      expect(await asr.transcribe(utterance, { signal: signal() })).toBe('set the volume to forty');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }, 60_000);

  it('feeds stdin without {file}, bounds time, cancels, and reports a missing program', async () => {
    const make = (command: string, args: string[], timeoutMs = 10_000) =>
      createRecognizer(AsrConfigSchema.parse({ provider: 'command', command, args, timeoutMs }), log);
    expect(await make('/bin/sh', ['-c', 'wc -c']).transcribe(wav, { signal: signal() })).toBe(String(wav.length));
    expect(await make('/bin/sh', ['-c', 'test -s "$0" && echo "  two\n words "', '{file}']).transcribe(wav, { signal: signal() })).toBe('two words');
    expect((await providerRejection(make('/bin/sh', ['-c', 'sleep 30'], 500).transcribe(wav, { signal: signal() }))).code).toBe('timeout');
    const ctl = new AbortController();
    const pending = make('/bin/sh', ['-c', 'sleep 30', '{file}']).transcribe(wav, { signal: ctl.signal });
    setImmediate(() => ctl.abort());
    expect((await providerRejection(pending)).code).toBe('aborted');
    expect((await providerRejection(make('/nonexistent/asr', []).transcribe(wav, { signal: signal() }))).code).toBe('process');
    expect((await providerRejection(make('/bin/sh', ['-c', 'exit 3']).transcribe(wav, { signal: signal() }))).message).toContain('code 3');
    expect((await providerRejection(make('/bin/sh', ['-c', 'head -c 100000 /dev/zero']).transcribe(wav, { signal: signal() }))).code).toBe('too_long');
  });
});

describe('command synthesiser', () => {
  it.each([
    ['stdout', ['--stdout', '-v', '{voice}', '{text}']],
    ['a file', ['-w', '{file}', '-v', '{voice}', '{text}']],
    ['stdin text', ['--stdout', '-v', '{voice}']],
  ])('speaks with espeak-ng (WAV on %s), resampled to the synthesiser rate', async (_how, args) => {
    const tts = createSynthesizer(TtsConfigSchema.parse({ provider: 'command', command: 'espeak-ng', args, voice: 'en-us' }), log, { sampleRate: 24_000 });
    expect(tts.sampleRate).toBe(24_000);
    const pcm = await collect(tts, 'Hello from the gateway.');
    const direct = parseWav(await espeakWav('Hello from the gateway.', { voice: 'en-us', wordsPerMinute: 175 }));
    expect(Math.abs(pcm.length / 24_000 - direct.samples.length / 22_050)).toBeLessThan(0.2);
    expect(Math.max(...pcm.map(Math.abs))).toBeGreaterThan(3000);
  });

  it('refuses output that is not a WAV', async () => {
    const tts = createSynthesizer(TtsConfigSchema.parse({ provider: 'command', command: '/bin/echo', args: ['not a wav'] }), log);
    expect((await providerRejection(collect(tts, 'x'))).code).toBe('bad_output');
  });

  it('kills a running program once its file passes the bound: code "too_long", the program gone', { timeout: 120_000 }, async () => {
    // A real child process that writes past the bound and does not exit. Before, the file was measured only when the
    // program exited: one writing without end filled the disk until the sentence's timeout (here 10 minutes).
    const bound = 1024 * 1024;
    const statusDir = mkdtempSync(join(tmpdir(), 'voxgate-test-status-'));
    afterTest.push(() => rmSync(statusDir, { recursive: true, force: true }));
    const status = join(statusDir, 'status');
    const writer = fileURLToPath(new URL('../../fixtures/endless-wav-writer.mjs', import.meta.url));
    const tts = new CommandSynthesizer({
      command: process.execPath,
      args: [writer, '{file}', String(bound), status],
      sampleRate: 24_000,
      timeoutMs: 600_000,
      log,
      maxWavBytes: bound,
    });
    const stop = new AbortController();
    afterTest.push(() => stop.abort());
    const e = await providerRejection(collect(tts, 'Hello.', stop.signal));
    expect(e.code).toBe('too_long');
    expect(e.message).toBe(`synthesiser output larger than ${bound} bytes`);
    // The rejection comes after the program's close: it is gone (killed, with its group) while it still ran (it never
    // exits by itself; the sentence's timeout is 10 minutes), after passing the bound.
    const [pid, written] = readFileSync(status, 'utf8').split(' ').map(Number) as [number, number];
    expect(() => process.kill(pid, 0)).toThrow(expect.objectContaining({ code: 'ESRCH' }));
    // The status trails the file by the write the kill may have caught before its status was written: the last 64 KiB.
    expect(written).toBeGreaterThanOrEqual(bound);
    expect(written).toBeLessThanOrEqual(bound + 64 * 1024);
  });
});

async function waitFor(cond: () => boolean): Promise<void> {
  while (!cond()) await new Promise((r) => setTimeout(r, 10));
}
