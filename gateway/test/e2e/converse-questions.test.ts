import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import type { SpeechRecognizer, SpeechSynthesizer } from '../../src/voice/converse/contracts.js';
import type { ConverseKit } from '../../src/voice/converse/converse.js';
import { llmModels } from '../../../test/support/assistant.js';
import { startTestGateway, type TestGateway } from '../../../test/support/gateway-harness.js';
import { startLlmServer, type LlmServer } from '../../../test/support/llm-server.js';
import { ReferenceDevice } from '../../../test/support/reference-device.js';
import { until } from '../../../test/support/wait.js';
import { packetOf, pcmBytes, standInCodec, streamFrames, wsUplink } from '../support/voice-client.js';

/**
 * The spoken questions of one model reply through a whole gateway: a reference device over WebSocket, the real assistant
 * (its confirmation windows, assistant.confirmTimeoutMs) with the scripted LLM server, the device's tools through its
 * call queue. The questions are asked one at a time, and each window starts when its question has been spoken: before,
 * every window ran from the call, so a later question's was spent while the ones before it were asked and answered.
 */

/** The confirmation window: long enough for an answer to be streamed at real time and heard on a busy machine. */
const WINDOW_MS = 5000;
const YES = 1001;
const speech = (level: number, frames = 8) => Array.from({ length: frames }, () => packetOf(new Int16Array(960).fill(level)));
const silence = (frames = 8) => Array.from({ length: frames }, () => packetOf(new Int16Array(960)));

function kit(): ConverseKit {
  const asr: SpeechRecognizer = {
    name: 'stand-in',
    transcribe: async (wav) => {
      await new Promise((r) => setImmediate(r));
      const pcm = new Int16Array(wav.buffer.slice(wav.byteOffset, wav.byteOffset + wav.byteLength));
      return pcm.includes(YES) ? 'yes' : 'what can you do';
    },
  };
  const tts: SpeechSynthesizer = {
    name: 'stand-in',
    sampleRate: 24000,
    async *synthesize(text, o) {
      // About one 60 ms frame per 4 characters.
      for (let i = 0; i < Math.max(2, Math.ceil(text.length / 4)); i++) {
        if (o.signal.aborted) return;
        await new Promise((r) => setImmediate(r));
        yield new Int16Array(1440).fill(7);
      }
    },
  };
  return { asr, tts, ...standInCodec(), wav: (p) => pcmBytes(p), resample: (p) => p };
}

describe('voice.mode "converse": the questions of one reply, each with its own window', () => {
  let llm: LlmServer;
  let t: TestGateway;
  const cleanup: Array<() => void> = [];

  beforeAll(async () => {
    llm = await startLlmServer();
    const { oa } = llmModels(llm);
    t = await startTestGateway(
      {
        assistant: {
          models: { oa },
          defaultModel: 'oa',
          confirmTools: ['self.screen.set_brightness', 'self.audio_speaker.set_volume'],
          confirmTimeoutMs: WINDOW_MS,
        },
        voice: { mode: 'converse' },
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

  const sentences = (d: ReferenceDevice) => d.received.filter((f) => f['type'] === 'tts' && f['state'] === 'sentence_start').map((f) => String(f['text']));
  const stops = (d: ReferenceDevice) => d.received.filter((f) => f['type'] === 'tts' && f['state'] === 'stop').length;

  it('a question left unanswered for its whole window is not run; the next is asked then, and a yes within its own window runs it', async () => {
    const d = new ReferenceDevice({ deviceId: '02:00:00:00:0d:01' });
    cleanup.push(() => d.terminate());
    const ready = t.nextEvent('device.ready', d.deviceId);
    await d.connectWebSocket(t.wsUrl, { protocolVersion: 3 });
    await ready;
    llm.script([
      {
        toolCalls: [
          { name: 'self_screen_set_brightness', arguments: { brightness: 10 } },
          { name: 'self_audio_speaker_set_volume', arguments: { volume: 40 } },
        ],
      },
      { text: 'The volume is forty. The screen stays as it was.' },
    ]);
    d.sendRaw(JSON.stringify({ session_id: d.sessionId, type: 'listen', state: 'detect', text: 'dim the screen and turn it up' }));
    await until(() => stops(d) === 1, 'the first question', 15_000);
    expect(sentences(d)).toEqual(['Should I run screen set brightness? Say yes to confirm.']);
    // Nobody answers. Once the first window has closed, the second question is asked: more than a window after both
    // calls were made, so a window counted from the call would have closed before the question was even spoken (and
    // before, the second was not asked at all until the device heard something).
    await until(() => stops(d) === 2, 'the second question', WINDOW_MS + 15_000);
    expect(sentences(d)[1]).toBe('Should I run audio speaker set volume? Say yes to confirm.');
    d.sendRaw(JSON.stringify({ session_id: d.sessionId, type: 'listen', state: 'start', mode: 'auto' }));
    await streamFrames(wsUplink(d, 3), [...speech(YES), ...silence()]);
    await until(() => stops(d) === 3, 'the answer', 15_000);
    expect(d.volume).toBe(40);
    expect(d.brightness).toBe(80);
    expect(sentences(d).at(-1)).toBe('The screen stays as it was.');
    // What the model read: the first call not run (nobody answered in time), the second's result.
    const results = (llm.requests[1]!.body['messages'] as Array<{ role: string; content: string }>).filter((m) => m.role === 'tool').map((m) => m.content);
    expect(results[0]).toMatch(/nobody answered within 5 s/);
    expect(results[1]).not.toMatch(/^Not run/);
  }, 60_000);
});
