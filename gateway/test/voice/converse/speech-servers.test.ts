import OpenAI, { toFile } from 'openai';
import { afterEach, describe, expect, it } from 'vitest';
import { WebSocket } from 'ws';
import { pcmToWav } from '../../../src/voice/converse/audio/wav.js';
import { edgeSecMsGec, speechPcm, startEdgeTtsServer, startSpeechServer, type EdgeTtsServer, type SpeechServer } from '../../support/speech-servers.js';

let server: SpeechServer | undefined;
let edge: EdgeTtsServer | undefined;
afterEach(async () => {
  await server?.close();
  await edge?.close();
  server = edge = undefined;
});

describe('speech stand-ins', () => {
  it('speak the OpenAI transcription wire format through the SDK, checking the WAV', async () => {
    server = await startSpeechServer({ transcribe: (req) => ({ text: `heard ${req.samples.length} samples` }) });
    const client = new OpenAI({ apiKey: 'k', baseURL: server.url, maxRetries: 0 });
    const wav = pcmToWav(speechPcm('hello', 16_000), 16_000);
    const r = await client.audio.transcriptions.create({ file: await toFile(wav, 'u.wav', { type: 'audio/wav' }), model: 'whisper-1', language: 'en' });
    expect(r.text).toBe(`heard ${speechPcm('hello', 16_000).length} samples`);
    expect(server.transcriptions[0]).toMatchObject({ model: 'whisper-1', language: 'en', wavProblem: '', fileName: 'u.wav' });
    const bad = Buffer.from(wav);
    bad.writeUInt32LE(1, 4);
    await expect(client.audio.transcriptions.create({ file: await toFile(bad, 'u.wav'), model: 'm' })).rejects.toMatchObject({ status: 400 });
  });

  it('stream speech as pcm and wav', async () => {
    server = await startSpeechServer();
    const client = new OpenAI({ apiKey: 'k', baseURL: server.url, maxRetries: 0 });
    const res = await client.audio.speech.create({ model: 'tts-1', voice: 'alloy', input: 'Hello there.', response_format: 'pcm' });
    const bytes = Buffer.from(await res.arrayBuffer());
    expect(bytes.length).toBe(speechPcm('Hello there.').length * 2);
    const wav = await client.audio.speech.create({ model: 'tts-1', voice: 'alloy', input: 'Hi.', response_format: 'wav' });
    expect(Buffer.from(await wav.arrayBuffer()).readUInt32LE(40)).toBe(0xffffffff);
  });

  it('speak the Edge read-aloud wire format', async () => {
    edge = await startEdgeTtsServer();
    const ws = new WebSocket(`${edge.url}?TrustedClientToken=6A5AA1D4EAFF4E9FB37E23D68491D6F4&ConnectionId=abc&Sec-MS-GEC=${edgeSecMsGec(Date.now())}`);
    const frames: Array<string | Buffer> = [];
    const done = new Promise<void>((resolve) =>
      ws.on('message', (d: Buffer, bin: boolean) => {
        frames.push(bin ? d : d.toString());
        if (!bin && d.toString().includes('Path:turn.end')) resolve();
      }),
    );
    await new Promise((r) => ws.once('open', r));
    ws.send(
      'X-Timestamp:now\r\nContent-Type:application/json; charset=utf-8\r\nPath:speech.config\r\n\r\n' +
        '{"context":{"synthesis":{"audio":{"metadataoptions":{"sentenceBoundaryEnabled":"false","wordBoundaryEnabled":"true"},"outputFormat":"audio-24khz-48kbitrate-mono-mp3"}}}}\r\n',
    );
    ws.send(
      "X-RequestId:r1\r\nContent-Type:application/ssml+xml\r\nX-Timestamp:now\r\nPath:ssml\r\n\r\n<speak version='1.0' xmlns='http://www.w3.org/2001/10/synthesis' xml:lang='en-US'><voice name='en-US-AriaNeural'><prosody pitch='+0Hz' rate='+0%' volume='+0%'>Hi &amp; bye</prosody></voice></speak>",
    );
    await done;
    ws.close();
    expect(edge.requests[0]).toMatchObject({ voice: 'en-US-AriaNeural', text: 'Hi & bye', outputFormat: 'audio-24khz-48kbitrate-mono-mp3' });
    expect(frames.some((f) => Buffer.isBuffer(f))).toBe(true);
  });
});
