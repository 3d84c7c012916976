import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { pcmToWav } from '../../src/voice/converse/audio/wav.js';
import type { ConverseKit } from '../../src/voice/converse/converse.js';
import { AsrConfigSchema, createRecognizer, createSynthesizer, TtsConfigSchema } from '../../src/voice/converse/providers/config.js';
import { createLogger } from '../../src/log.js';
import { llmModels } from '../../../test/support/assistant.js';
import { startTestGateway, type TestGateway } from '../../../test/support/gateway-harness.js';
import { startLlmServer, type LlmServer } from '../../../test/support/llm-server.js';
import { ReferenceDevice } from '../../../test/support/reference-device.js';
import { deferred, until, type Deferred } from '../../../test/support/wait.js';
import { startSpeechServer, type SpeechServer } from '../support/speech-servers.js';
import { packetOf, standInCodec, streamFrames, wsUplink } from '../support/voice-client.js';

/**
 * modelRequests.asr through a whole gateway: reference devices converse over WebSocket, the speech providers are the
 * real OpenAI-compatible ones talking to the speech stand-in (which counts what it holds open), the codecs are
 * stand-ins (a frame's PCM travels as its own bytes after a TOC byte). One transcription at a time, one waiting.
 */

const utterance = (level: number) => [
  ...Array.from({ length: 8 }, () => packetOf(new Int16Array(960).fill(level))),
  ...Array.from({ length: 8 }, () => packetOf(new Int16Array(960))),
];
const BUSY_ANSWER = "I'm busy right now; please try again in a moment.";

function kit(speech: SpeechServer): ConverseKit {
  const log = createLogger('silent');
  const env = { SPEECH_KEY: 'sk-test-speech-key-0123' };
  return {
    asr: createRecognizer(AsrConfigSchema.parse({ baseUrl: speech.url, apiKeyEnv: 'SPEECH_KEY' }), log, env),
    tts: createSynthesizer(TtsConfigSchema.parse({ baseUrl: speech.url, apiKeyEnv: 'SPEECH_KEY' }), log, { env }),
    ...standInCodec(),
    wav: (p, r) => pcmToWav(p, r),
    resample: (p) => p,
  };
}

let mac = 0x10;
const nextMac = () => `02:00:00:00:0d:${(mac++).toString(16).padStart(2, '0')}`;

describe('modelRequests.asr: devices conversing through a full speech queue', () => {
  let llm: LlmServer;
  let speech: SpeechServer;
  let t: TestGateway;
  const cleanup: Array<() => void> = [];
  /** Transcriptions are held until released: the level of the utterance's samples names it. */
  const holds = new Map<number, Deferred<void>>();

  beforeAll(async () => {
    llm = await startLlmServer(() => ({ text: 'Here you are.' }));
    speech = await startSpeechServer({
      transcribe: (req) => {
        const level = req.samples.reduce((m, s) => Math.max(m, s), 0);
        return { text: `utterance ${level}`, hold: holds.get(level)?.promise };
      },
    });
    const { oa } = llmModels(llm);
    t = await startTestGateway(
      {
        assistant: { models: { oa }, defaultModel: 'oa' },
        voice: { mode: 'converse' },
        modelRequests: { asr: { maxConcurrent: 1, maxWaiting: 1, maxWaitMs: 60_000 } },
      },
      {},
      { converseKit: () => kit(speech) },
    );
  });
  afterEach(() => {
    for (const h of holds.values()) h.resolve();
    for (const f of cleanup.splice(0)) f();
  });
  afterAll(async () => {
    await t?.close();
    await llm?.close();
    await speech?.close();
  });

  const device = async () => {
    const d = new ReferenceDevice({ deviceId: nextMac() });
    cleanup.push(() => d.terminate());
    const ready = t.nextEvent('device.ready', d.deviceId);
    await d.connectWebSocket(t.wsUrl, { protocolVersion: 3 });
    await ready;
    return d;
  };
  const speak = async (d: ReferenceDevice, level: number) => {
    d.sendRaw(JSON.stringify({ session_id: d.sessionId, type: 'listen', state: 'start', mode: 'auto' }));
    await streamFrames(wsUplink(d, 3), utterance(level));
  };
  const stopped = (d: ReferenceDevice) => d.received.some((f) => f['type'] === 'tts' && f['state'] === 'stop');
  const waiting = (n: number) => until(async () => (await t.metric('voxgate_model_requests_waiting', { kind: 'asr' })) === n, `${n} transcriptions waiting`);

  it('a device refused by the full queue hears that the gateway is busy, and its turn ends; the others are answered', async () => {
    holds.set(1001, deferred<void>());
    const base = speech.transcriptions.length;
    const first = await device();
    const second = await device();
    const refused = await device();
    await speak(first, 1001);
    await until(() => speech.transcriptions.length === base + 1, 'the first transcription at the provider');
    await speak(second, 1002);
    await waiting(1);
    await speak(refused, 1003);
    await until(() => stopped(refused), 'the refused device’s turn ended (tts stop)');
    expect(refused.received.find((f) => f['type'] === 'alert')).toMatchObject({ message: 'Speech recognition failed (busy)' });
    expect(refused.received.filter((f) => f['type'] === 'tts' && f['state'] === 'sentence_start').map((f) => f['text'])).toEqual([BUSY_ANSWER]);
    expect(refused.received.some((f) => f['type'] === 'stt')).toBe(false);
    expect(await t.metric('voxgate_model_requests_refused_total', { kind: 'asr', reason: 'queue_full' })).toBeGreaterThanOrEqual(1);
    holds.get(1001)!.resolve();
    await until(() => stopped(first) && stopped(second), 'both waiting devices answered');
    expect(second.received.find((f) => f['type'] === 'stt')).toMatchObject({ text: 'utterance 1002' });
    // The refused utterance never reached the provider; one transcription at a time did.
    expect(speech.transcriptions.slice(base).map((r) => r.samples.reduce((m, s) => Math.max(m, s), 0))).toEqual([1001, 1002]);
    expect(speech.peak.transcriptions).toBe(1);
  });

  it('a device that aborts while its utterance waits leaves the queue; its utterance never reaches the provider', async () => {
    holds.set(2001, deferred<void>());
    const base = speech.transcriptions.length;
    const busy = await device();
    const aborting = await device();
    await speak(busy, 2001);
    await until(() => speech.transcriptions.length === base + 1, 'the first transcription at the provider');
    await speak(aborting, 2002);
    await waiting(1);
    aborting.sendRaw(JSON.stringify({ session_id: aborting.sessionId, type: 'abort' }));
    await waiting(0);
    holds.get(2001)!.resolve();
    await until(() => stopped(busy), 'the first device answered');
    expect(speech.transcriptions.slice(base)).toHaveLength(1);
    expect(aborting.received.some((f) => f['type'] === 'stt')).toBe(false);
  });
});
