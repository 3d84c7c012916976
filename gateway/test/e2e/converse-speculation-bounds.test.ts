import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { SpeechRecognizer, SpeechSynthesizer } from '../../src/voice/converse/contracts.js';
import type { ConverseKit } from '../../src/voice/converse/converse.js';
import { llmModels } from '../../../test/support/assistant.js';
import { startTestGateway, type TestGateway } from '../../../test/support/gateway-harness.js';
import { startLlmServer, type LlmServer } from '../../../test/support/llm-server.js';
import { ReferenceDevice } from '../../../test/support/reference-device.js';
import { until } from '../../../test/support/wait.js';
import { packetOf, pcmBytes, standInCodec, wsUplink } from '../support/voice-client.js';

/**
 * voice.converse.turnsPerMinute holds for utterances whose transcript was asked for speculatively (the default,
 * speculateAfterMs 200 ms): the stand-in kit's detector reports its quiet run (quietMs) as the real one does, so the
 * session sends the utterance to the recogniser during the end-of-speech wait.
 */

const speech = (frames: number) => Array.from({ length: frames }, () => packetOf(new Int16Array(960).fill(1005)));
const silence = (frames: number) => Array.from({ length: frames }, () => packetOf(new Int16Array(960)));

describe('voice.mode "converse": speculative recognition is within the device turn rate', () => {
  let llm: LlmServer;
  let t: TestGateway;
  let asrCalls = 0;
  const cleanup: Array<() => void> = [];

  beforeAll(async () => {
    llm = await startLlmServer();
    const { oa } = llmModels(llm);
    const kit = (): ConverseKit => {
      const asr: SpeechRecognizer = {
        name: 'stand-in',
        transcribe: async () => {
          asrCalls++;
          await new Promise((r) => setImmediate(r));
          return 'what can you do';
        },
      };
      const tts: SpeechSynthesizer = {
        name: 'stand-in',
        sampleRate: 24000,
        async *synthesize() {
          await new Promise((r) => setImmediate(r));
          yield new Int16Array(1440).fill(7);
        },
      };
      return { asr, tts, ...standInCodec({ quietMs: true }), wav: (p) => pcmBytes(p), resample: (p) => p };
    };
    t = await startTestGateway(
      {
        assistant: { models: { oa }, defaultModel: 'oa' },
        voice: { mode: 'converse', converse: { speculateAfterMs: 200, turnsPerMinute: 1, turnBurst: 3 } },
      },
      {},
      { converseKit: kit },
    );
  });
  afterEach(() => {
    for (const f of cleanup.splice(0)) f();
  });
  afterAll(async () => {
    await t.close();
    await llm.close();
  });

  it('utterances answered from a speculative transcript count against voice.converse.turnsPerMinute', { timeout: 60_000 }, async () => {
    const d = new ReferenceDevice({ deviceId: '02:00:00:00:0d:01' });
    cleanup.push(() => d.terminate());
    const ready = t.nextEvent('device.ready', d.deviceId);
    await d.connectWebSocket(t.wsUrl, { protocolVersion: 3 });
    await ready;
    // The model holds every answer: the device aborts each turn and speaks again at once.
    llm.script(() => ({ hang: true }));
    const limited = () => t.metric('voxgate_voice_converse_turns_total', { outcome: 'rate_limited' });
    const used = () => t.metric('voxgate_voice_converse_speculative_asr_total', { result: 'used' });
    const before = { llm: llm.requests.length, asr: asrCalls, limited: await limited(), used: await used() };
    const up = wsUplink(d, 3);
    const stts = () => d.received.filter((f) => f['type'] === 'stt').length;
    d.sendRaw(JSON.stringify({ session_id: d.sessionId, type: 'listen', state: 'start', mode: 'auto' }));
    let ts = 0;
    for (let i = 0; i < 8; i++) {
      const [sttBefore, limitedBefore] = [stts(), await limited()];
      // 240 ms of speech, then quiet: the recogniser is asked after 200 ms of it, the end of speech comes at 300 ms.
      for (const f of [...speech(4), ...silence(6)]) up.send(f, (ts += 60));
      await until(async () => stts() > sttBefore || (await limited()) > limitedBefore, `utterance ${i} answered or refused`, 15_000);
      d.sendRaw(JSON.stringify({ session_id: d.sessionId, type: 'abort' }));
    }
    // The first utterance's transcript was the speculative one: the path this test is about was taken.
    expect((await used()) - before.used).toBeGreaterThanOrEqual(1);
    // A burst of 3, then about one a minute: 8 utterances in a few seconds reach the recogniser and the model 3 times.
    expect(stts()).toBe(3);
    expect(asrCalls - before.asr).toBeLessThanOrEqual(3);
    // (An admitted turn aborted before its request left reaches the model less often still.)
    expect(llm.requests.length - before.llm).toBeLessThanOrEqual(3);
    expect((await limited()) - before.limited).toBe(5);
  });
});
