import pino from 'pino';
import { Registry } from 'prom-client';
import { afterEach, describe, expect, it } from 'vitest';
import { GatewayError } from '../../../../src/errors.js';
import {
  ProviderError,
  type OpusDecoder,
  type OpusEncoder,
  type SpeechDetector,
  type SpeechRecognizer,
  type SpeechSynthesizer,
  type VadState,
} from '../../../../src/voice/converse/contracts.js';
import { createConverseMetrics } from '../../../../src/voice/converse/metrics.js';
import { ConverseSession } from '../../../../src/voice/converse/session/conversation.js';
import type { TurnHandle, TurnPort, TurnSignal } from '../../../../src/voice/converse/session/ports.js';
import { isYes } from '../../../../src/voice/converse/session/confirm-words.js';
import { EMOTIONS, readVoiceInput } from '../../../../src/voice/converse/session/wire.js';
import { deferred, until } from '../../../../../test/support/wait.js';

/**
 * The conversation with stand-ins for the audio side (the contract's interfaces): a "speech" packet decodes to
 * 60 ms of tone, a "silence" packet to 60 ms of zeros; the detector ends an utterance after 5 quiet frames.
 */
const SPEECH = Uint8Array.of(1);
const QUIET = Uint8Array.of(0);

function fakeDecoder(): OpusDecoder {
  return { sampleRate: 16000, decode: (p) => new Int16Array(960).fill(p[0] === 1 ? 1000 : 0), free() {} };
}
function fakeEncoder(): OpusEncoder {
  return { sampleRate: 24000, frameMs: 60, frameSamples: 1440, encode: (f) => Uint8Array.of(0xfc, f[0]! & 0xff, 7), free() {} };
}
function fakeDetector(): SpeechDetector {
  let speech = false;
  let quiet = 0;
  return {
    push(pcm): VadState {
      if (pcm.some((s) => s !== 0)) {
        speech = true;
        quiet = 0;
        return 'speech';
      }
      if (!speech) return 'silence';
      return ++quiet >= 5 ? 'end' : 'speech';
    },
    reset() {
      speech = false;
      quiet = 0;
    },
  };
}

class FakeAsr implements SpeechRecognizer {
  readonly name = 'fake-asr';
  /** Transcripts in turn: a text, a failure, one that never comes ('hang'), or one that comes when the test says. */
  texts: Array<string | Error | 'hang' | Promise<string>> = [];
  calls = 0;
  signals: AbortSignal[] = [];
  async transcribe(_wav: Buffer, o: { signal: AbortSignal }): Promise<string> {
    this.calls++;
    this.signals.push(o.signal);
    const t = this.texts.shift() ?? '';
    if (t === 'hang') {
      await new Promise((_r, reject) =>
        o.signal.addEventListener('abort', () => reject(new ProviderError('timeout', 'timed out', 'fake-asr')), { once: true }),
      );
    }
    if (t instanceof Error) throw t;
    return await t;
  }
}

class FakeTts implements SpeechSynthesizer {
  readonly name = 'fake-tts';
  readonly sampleRate = 24000;
  /** Frames of audio per sentence. */
  framesPer = 3;
  fail = false;
  signals: AbortSignal[] = [];
  texts: string[] = [];
  async *synthesize(text: string, o: { signal: AbortSignal }): AsyncIterable<Int16Array> {
    this.signals.push(o.signal);
    this.texts.push(text);
    if (this.fail) throw new ProviderError('http', 'speech API answered 500', this.name);
    for (let i = 0; i < this.framesPer; i++) {
      if (o.signal.aborted) return;
      await new Promise((r) => setImmediate(r));
      yield new Int16Array(1440).fill(1);
    }
  }
}

interface ScriptedTurn {
  deltas?: string[];
  confirm?: { callId: string; name: string };
  /** Calls of one reply that each need a yes, asked for together (the assistant runs a reply's calls at once). */
  confirms?: Array<{ callId: string; name: string }>;
  fail?: GatewayError;
  /** Hold the answer until this resolves. */
  hold?: Promise<void>;
}

class FakeTurns implements TurnPort {
  scripts: ScriptedTurn[] = [];
  started: string[] = [];
  cancelled: string[] = [];
  /** The answers taken; `refused`: those given to no pending confirmation, or past its window. */
  confirmations: Array<{ callId: string; approve: boolean }> = [];
  refused: string[] = [];
  /** The questions the session said it had asked, in order. */
  asked: string[] = [];
  /** A confirmation's window on `clock`: from when the session said its question was asked (else from the call). */
  windowMs = Infinity;
  clock: () => number = () => performance.now();
  private readonly expiries = new Map<string, () => void>();

  /** A confirmation's window closes unanswered, as the assistant's timer closes it: its call's result, not run. */
  expire(callId: string): void {
    this.expiries.get(callId)?.();
  }

  async start(req: { text: string }, emit: (e: TurnSignal) => void): Promise<TurnHandle> {
    this.started.push(req.text);
    const s = this.scripts.shift() ?? { deltas: ['Okay.'] };
    const cancelled = deferred<never>();
    cancelled.promise.catch(() => undefined);
    const asks = s.confirms ?? (s.confirm ? [s.confirm] : []);
    const answers = new Map(asks.map((c) => [c.callId, deferred<boolean>()]));
    const opened = new Map<string, number>();
    for (const c of asks)
      this.expiries.set(c.callId, () => {
        const a = answers.get(c.callId);
        if (!a) return;
        answers.delete(c.callId);
        emit({ type: 'tool.result', callId: c.callId, name: c.name, isError: true, durationMs: 0 });
        a.resolve(false);
      });
    const done = (async () => {
      if (s.fail) throw s.fail;
      if (asks.length) {
        for (const c of asks) {
          opened.set(c.callId, this.clock());
          emit({ type: 'confirmation.required', callId: c.callId, name: c.name, arguments: {} });
        }
        const yes = await Promise.race([Promise.all([...answers.values()].map((a) => a.promise)), cancelled.promise]);
        emit({ type: 'text.delta', text: yes[0] ? 'Done, it is rebooting. ' : 'All right, I left it alone. ' });
      }
      for (const d of s.deltas ?? []) {
        await Promise.race([new Promise((r) => setImmediate(r)), cancelled.promise]);
        emit({ type: 'text.delta', text: d });
      }
      if (s.hold) await Promise.race([s.hold, cancelled.promise]);
      return { text: (s.deltas ?? []).join(''), conversationId: 'conv-1' };
    })();
    return {
      cancel: (reason) => {
        this.cancelled.push(reason);
        cancelled.reject(new Error(reason));
      },
      confirm: (callId, approve) => {
        const a = answers.get(callId);
        if (!a || this.clock() - opened.get(callId)! > this.windowMs) {
          this.refused.push(callId);
          return false;
        }
        this.confirmations.push({ callId, approve });
        answers.delete(callId);
        a.resolve(approve);
        return true;
      },
      asked: (callId) => {
        if (!answers.has(callId)) return false;
        if (!this.asked.includes(callId)) {
          this.asked.push(callId);
          opened.set(callId, this.clock());
        }
        return true;
      },
      done,
    };
  }
}

interface Sent {
  at: number;
  json?: Record<string, unknown>;
  frame?: Uint8Array;
}

function harness(o: { now?: () => number } = {}) {
  const asr = new FakeAsr();
  const tts = new FakeTts();
  const turns = new FakeTurns();
  if (o.now) turns.clock = o.now;
  const sent: Sent[] = [];
  const events: Array<{ kind: string; data: unknown }> = [];
  const registry = new Registry();
  const metrics = createConverseMetrics(registry);
  let conversation: string | undefined;
  const session = new ConverseSession({
    sessionId: 's-1',
    deviceId: 'aa:bb:cc:dd:ee:01',
    out: {
      json: (m) => sent.push({ at: performance.now(), json: m as Record<string, unknown> }),
      frame: (f) => sent.push({ at: performance.now(), frame: f }),
    },
    audio: { decoder: fakeDecoder(), encoder: fakeEncoder(), detector: fakeDetector(), wav: (p) => Buffer.from(p.buffer), resample: (p) => p },
    asr,
    tts,
    turns,
    limits: { frameMs: 60, leadFrames: 5, maxQueuedFrames: 50, maxUtteranceMs: 10_000, asrTimeoutMs: 2000, preRollMs: 300 },
    log: pino({ level: 'silent' }),
    metrics,
    events: {
      transcript: (text) => events.push({ kind: 'transcript', data: text }),
      tool: (e) => events.push({ kind: 'tool', data: e }),
      reply: (e) => events.push({ kind: 'reply', data: e }),
    },
    conversation: { get: () => conversation, set: (id) => (conversation = id) },
    ...(o.now ? { now: o.now } : {}),
  });
  const json = () => sent.filter((s) => s.json).map((s) => s.json!);
  const kinds = () => json().map((m) => (m['type'] === 'tts' ? `tts:${String(m['state'])}` : String(m['type'])));
  const frames = () => sent.filter((s) => s.frame).length;
  const speak = (n = 4) => {
    for (let i = 0; i < n; i++) session.audio(SPEECH);
  };
  const quiet = (n = 6) => {
    for (let i = 0; i < n; i++) session.audio(QUIET);
  };
  const counter = async (outcome: string) =>
    (await registry.getSingleMetric('voxgate_voice_converse_turns_total')!.get()).values.find((v) => v.labels['outcome'] === outcome)?.value ?? 0;
  return { session, asr, tts, turns, sent, events, json, kinds, frames, speak, quiet, counter, registry, conversation: () => conversation };
}

const sessions: ConverseSession[] = [];
afterEach(() => {
  for (const s of sessions.splice(0)) s.close();
});
function make(o: { now?: () => number } = {}) {
  const h = harness(o);
  sessions.push(h.session);
  return h;
}

/** The order the firmware's state machine needs, as the device saw it. */
function expectFirmwareOrder(kinds: string[]): void {
  const at = (k: string) => kinds.indexOf(k);
  expect(at('stt')).toBe(0);
  expect(at('llm')).toBeGreaterThan(at('stt'));
  expect(at('tts:start')).toBeGreaterThan(at('llm'));
  expect(at('tts:sentence_start')).toBeGreaterThan(at('tts:start'));
  expect(kinds.filter((k) => k === 'tts:start')).toHaveLength(1);
  expect(kinds[kinds.length - 1]).toBe('tts:stop');
}

describe('conversation session (stand-in audio and providers)', () => {
  it('auto: the end of speech starts the turn; stt, llm, one tts start, sentence text before its audio, tts stop', async () => {
    const h = make();
    h.asr.texts = ['what time is it'];
    h.turns.scripts = [{ deltas: ['It is ', 'noon. Have ', 'a nice day!'] }];
    h.session.input({ kind: 'listen_start', mode: 'auto' });
    h.speak();
    h.quiet();
    await until(() => h.kinds().includes('tts:stop'), 'tts stop');
    const kinds = h.kinds();
    expectFirmwareOrder(kinds);
    expect(h.json()[0]).toMatchObject({ type: 'stt', text: 'what time is it', session_id: 's-1' });
    for (const m of h.json().filter((j) => j['type'] === 'llm')) expect(EMOTIONS).toContain(m['emotion']);
    const sentences = h
      .json()
      .filter((m) => m['state'] === 'sentence_start')
      .map((m) => m['text']);
    expect(sentences).toEqual(['It is noon.', 'Have a nice day!']);
    // Each sentence_start comes before its own frames: 3 frames per sentence, all after the first sentence_start.
    const firstSentence = h.sent.findIndex((s) => s.json?.['state'] === 'sentence_start');
    const secondSentence = h.sent.findIndex((s, i) => i > firstSentence && s.json?.['state'] === 'sentence_start');
    expect(h.sent.slice(firstSentence, secondSentence).filter((s) => s.frame)).toHaveLength(3);
    expect(h.frames()).toBe(6);
    expect(h.conversation()).toBe('conv-1');
    expect(h.events.find((e) => e.kind === 'reply')?.data).toMatchObject({ outcome: 'answered', text: 'It is noon. Have a nice day!' });
  });

  it('manual: the utterance ends at listen stop, not at the pause', async () => {
    const h = make();
    h.asr.texts = ['turn it up'];
    h.session.input({ kind: 'listen_start', mode: 'manual' });
    h.speak();
    h.quiet(10);
    h.speak(2);
    expect(h.asr.calls).toBe(0);
    h.session.input({ kind: 'listen_stop' });
    await until(() => h.kinds().includes('tts:stop'), 'tts stop');
    expect(h.turns.started).toEqual(['turn it up']);
    expectFirmwareOrder(h.kinds());
  });

  it('silence, noise or an empty transcript ends the turn quietly: no stt, no tts', async () => {
    const h = make();
    h.session.input({ kind: 'listen_start', mode: 'manual' });
    h.quiet(20);
    h.session.input({ kind: 'listen_stop' });
    expect(h.asr.calls).toBe(0);
    h.asr.texts = [''];
    h.session.input({ kind: 'listen_start', mode: 'auto' });
    h.speak();
    h.quiet();
    await until(() => h.asr.calls === 1, 'the recogniser was asked');
    await until(async () => (await h.counter('empty_transcript')) === 1, 'counted');
    expect(h.sent).toEqual([]);
    expect(h.session.state).toBe('listening');
  });

  it('abort: tts stop at once, no frame after it, the turn and the synthesis cancelled', async () => {
    const h = make();
    h.asr.texts = ['tell me a long story'];
    h.tts.framesPer = 40;
    h.turns.scripts = [{ deltas: ['Once upon a time there was a gateway. ', 'It talked a lot. ', 'The end.'], hold: new Promise(() => undefined) }];
    h.session.input({ kind: 'listen_start', mode: 'auto' });
    h.speak();
    h.quiet();
    await until(() => h.frames() >= 2, 'speaking');
    h.session.input({ kind: 'abort' });
    // Looked for straight after the synchronous input(): the stop leaves in the same turn as the abort
    // is handled (the firmware's 500 ms with no wait at all), and it is the last thing sent.
    const stopIdx = h.sent.findIndex((s, i) => s.json?.['state'] === 'stop' && i > 0);
    expect(stopIdx).toBe(h.sent.length - 1);
    expect(h.turns.cancelled).toHaveLength(1);
    expect(h.tts.signals.at(-1)!.aborted).toBe(true);
    const before = h.sent.length;
    await new Promise((r) => setTimeout(r, 200));
    expect(h.sent.slice(before).filter((s) => s.frame).length).toBeLessThanOrEqual(3);
    expect(h.sent.slice(stopIdx + 1).filter((s) => s.frame)).toHaveLength(0);
    expect(await h.counter('aborted')).toBe(1);
  });

  it('realtime: speech over its own playback is a barge-in; what follows is the next utterance', async () => {
    const h = make();
    h.asr.texts = ['read me the news', 'stop, what is the weather'];
    h.tts.framesPer = 30;
    h.turns.scripts = [{ deltas: ['Here is the news. ', 'Markets went up. '], hold: new Promise(() => undefined) }, { deltas: ['Sunny.'] }];
    h.session.input({ kind: 'listen_start', mode: 'realtime' });
    h.speak();
    h.quiet();
    await until(() => h.frames() >= 2, 'speaking');
    // The device streams silence while it plays (its AEC removed the echo), then the person talks.
    h.quiet(3);
    expect(h.turns.cancelled).toHaveLength(0);
    h.speak(3);
    expect(h.turns.cancelled).toHaveLength(1);
    expect(h.kinds().filter((k) => k === 'tts:stop')).toHaveLength(1);
    h.quiet();
    await until(() => h.turns.started.length === 2, 'the second turn');
    expect(h.turns.started[1]).toBe('stop, what is the weather');
    await until(() => h.kinds().filter((k) => k === 'tts:stop').length === 2, 'the second answer');
    expect(await h.counter('barge_in')).toBe(1);
  });

  it('listen detect (wake word) starts a turn with its text, without the recogniser', async () => {
    const h = make();
    h.session.input(readVoiceInput({ type: 'listen', state: 'detect', text: '你好小智' }));
    await until(() => h.kinds().includes('tts:stop'), 'answer');
    expect(h.asr.calls).toBe(0);
    expect(h.turns.started).toEqual(['你好小智']);
    expectFirmwareOrder(h.kinds());
  });

  it('a tool that needs a yes: the question is spoken, the next utterance answers it', async () => {
    const h = make();
    h.asr.texts = ['reboot the device', 'yes please'];
    h.turns.scripts = [{ confirm: { callId: 'call-7', name: 'self_reboot' } }];
    h.session.input({ kind: 'listen_start', mode: 'auto' });
    h.speak();
    h.quiet();
    await until(() => h.kinds().includes('tts:stop'), 'the question');
    expect(h.json().find((m) => m['state'] === 'sentence_start')?.['text']).toBe('Should I run reboot? Say yes to confirm.');
    expect(h.session.state).toBe('listening');
    h.session.input({ kind: 'listen_start', mode: 'auto' });
    h.speak();
    h.quiet();
    await until(() => h.kinds().filter((k) => k === 'tts:stop').length === 2, 'the answer after the yes');
    expect(h.turns.confirmations).toEqual([{ callId: 'call-7', approve: true }]);
    expect(
      h
        .json()
        .filter((m) => m['type'] === 'stt')
        .map((m) => m['text']),
    ).toEqual(['reboot the device', 'yes please']);
    expect(
      h
        .json()
        .filter((m) => m['state'] === 'sentence_start')
        .at(-1)?.['text'],
    ).toBe('Done, it is rebooting.');
    expect(isYes('No, do not')).toBe(false);
    expect(isYes('是的')).toBe(true);
  });

  it('a confirmation whose answer cannot be transcribed ends its turn: nothing is left running that abort or close cannot stop', async () => {
    const h = make();
    h.asr.texts = ['reboot the device', new ProviderError('http', 'transcription answered 503', 'fake-asr'), 'what time is it'];
    h.turns.scripts = [{ confirm: { callId: 'call-7', name: 'self_reboot' } }, { deltas: ['It is noon.'] }];
    h.session.input({ kind: 'listen_start', mode: 'auto' });
    h.speak();
    h.quiet();
    await until(() => h.kinds().includes('tts:stop'), 'the question');
    expect(h.session.state).toBe('listening');
    // The answer to the question: the recogniser fails, the apology is spoken.
    h.speak();
    h.quiet();
    await until(() => h.kinds().filter((k) => k === 'tts:stop').length === 2, 'the spoken apology');
    await until(() => h.session.state === 'listening', 'listening again');
    // The turn waiting for the yes is over (its tool not run), not left waiting out assistant.confirmTimeoutMs unreachable:
    // before, the apology took its place, and neither an abort nor the device leaving reached it again.
    expect(h.turns.cancelled).toHaveLength(1);
    expect(h.turns.confirmations).toEqual([]);
    h.speak();
    h.quiet();
    await until(() => h.turns.started.length === 2, 'the next turn');
    await until(() => h.kinds().filter((k) => k === 'tts:stop').length === 3, 'its answer');
    expect(h.turns.confirmations).toEqual([]);
  });

  it('two calls of one reply that need a yes are asked one at a time: each answer answers the question heard just before it', async () => {
    const h = make();
    h.asr.texts = ['reboot both', 'yes', 'no'];
    h.turns.scripts = [
      {
        confirms: [
          { callId: 'call_1_1', name: 'self_reboot' },
          { callId: 'call_1_2', name: 'self_factory_reset' },
        ],
      },
    ];
    const questions = () =>
      h
        .json()
        .filter((m) => m['state'] === 'sentence_start')
        .map((m) => String(m['text']));
    h.session.input({ kind: 'listen_start', mode: 'auto' });
    h.speak();
    h.quiet();
    await until(() => h.kinds().includes('tts:stop') && h.session.state === 'listening', 'the first question');
    // Before, both questions were spoken back to back and the session took one answer, for whichever question it had
    // registered last: a yes said to one question could run the other call, and the other was left waiting, the
    // device deaf, until the assistant gave up on it.
    expect(questions()).toEqual(['Should I run reboot? Say yes to confirm.']);
    h.speak();
    h.quiet();
    await until(() => h.turns.confirmations.length === 1 && h.session.state === 'listening', 'the second question');
    expect(h.turns.confirmations).toEqual([{ callId: 'call_1_1', approve: true }]);
    expect(questions()).toEqual(['Should I run reboot? Say yes to confirm.', 'Should I run factory reset? Say yes to confirm.']);
    h.speak();
    h.quiet();
    await until(() => h.turns.confirmations.length === 2, 'the second answer');
    expect(h.turns.confirmations).toEqual([
      { callId: 'call_1_1', approve: true },
      { callId: 'call_1_2', approve: false },
    ]);
  });

  it("each question's window starts when it has been spoken: the second can be confirmed after the first took most of the window", async () => {
    // One clock for the session and the assistant's windows (1 s), moved on by the test only.
    let clock = 0;
    const h = make({ now: () => clock });
    h.turns.windowMs = 1000;
    h.asr.texts = ['reboot both', 'yes', 'yes'];
    h.turns.scripts = [
      {
        confirms: [
          { callId: 'call_1_1', name: 'self_reboot' },
          { callId: 'call_1_2', name: 'self_factory_reset' },
        ],
      },
    ];
    h.session.input({ kind: 'listen_start', mode: 'auto' });
    h.speak();
    h.quiet();
    await until(() => h.kinds().includes('tts:stop') && h.session.state === 'listening', 'the first question');
    expect(h.turns.asked).toEqual(['call_1_1']);
    // The person takes 900 ms of the first question's 1000 to answer it.
    clock = 900;
    h.speak();
    h.quiet();
    await until(() => h.turns.confirmations.length === 1 && h.session.state === 'listening', 'the second question');
    expect(h.turns.asked).toEqual(['call_1_1', 'call_1_2']);
    // The second is answered 900 ms after it was asked, 1800 ms after its call was made: before, its window ran from
    // the call, so it had expired (here, and in the assistant it would have closed before it was even spoken).
    clock = 1800;
    h.speak();
    h.quiet();
    await until(() => h.turns.confirmations.length + h.turns.refused.length === 2, 'the second answer');
    expect(h.turns.refused).toEqual([]);
    expect(h.turns.confirmations).toEqual([
      { callId: 'call_1_1', approve: true },
      { callId: 'call_1_2', approve: true },
    ]);
  });

  it('a question whose window closes unanswered is not run, and the next is asked at once; a late answer answers only the first', async () => {
    const h = make();
    const late = deferred<string>();
    h.asr.texts = ['reboot both', late.promise, 'yes'];
    h.turns.scripts = [
      {
        confirms: [
          { callId: 'call_1_1', name: 'self_reboot' },
          { callId: 'call_1_2', name: 'self_factory_reset' },
        ],
      },
    ];
    const questions = () =>
      h
        .json()
        .filter((m) => m['state'] === 'sentence_start')
        .map((m) => String(m['text']));
    h.session.input({ kind: 'listen_start', mode: 'auto' });
    h.speak();
    h.quiet();
    await until(() => h.kinds().includes('tts:stop') && h.session.state === 'listening', 'the first question');
    // The person answers, but the window closes while the answer is being transcribed.
    h.speak();
    h.quiet();
    await until(() => h.asr.calls === 2, 'the answer sent to the recogniser');
    h.turns.expire('call_1_1');
    // The turn moves on: the second question is asked (before, the session waited on for an answer to the first, the
    // second unasked, its window never started).
    await until(() => questions().length === 2 && h.session.state === 'listening', 'the second question');
    expect(questions()[1]).toBe('Should I run factory reset? Say yes to confirm.');
    // The late yes was said to the first question: it does not answer the second, nor start a turn of its own.
    late.resolve('yes');
    await until(() => h.turns.refused.length === 1, 'the late answer');
    expect(h.turns.refused).toEqual(['call_1_1']);
    expect(h.turns.started).toHaveLength(1);
    expect(h.session.state).toBe('listening');
    h.speak();
    h.quiet();
    await until(() => h.turns.confirmations.length === 1, 'the answer to the second question');
    expect(h.turns.confirmations).toEqual([{ callId: 'call_1_2', approve: true }]);
    await until(() => h.events.some((e) => e.kind === 'reply'), 'the turn ended');
  });

  it('realtime: a question is not answered by its own playback, still under way at the device when its last frame has left', async () => {
    // The session's clock, held still while the device plays what it was sent (the pacer reads the same clock).
    let clock = 0;
    const h = make({ now: () => clock });
    h.asr.texts = ['reboot the device', 'yes'];
    h.turns.scripts = [{ confirm: { callId: 'call-7', name: 'self_reboot' } }];
    h.session.input({ kind: 'listen_start', mode: 'realtime' });
    h.speak();
    h.quiet();
    await until(() => h.kinds().includes('tts:stop') && h.session.state === 'listening', 'the question, its frames sent');
    expect(h.frames()).toBe(3);
    // The device plays "... Say yes to confirm." for 180 ms more and streams its microphone meanwhile (realtime): what
    // its echo canceller left of it is not the person's answer. Before, it was transcribed as one, and its yes ran the tool.
    h.speak();
    h.quiet();
    expect(h.asr.calls).toBe(1);
    expect(h.turns.confirmations).toEqual([]);
    // Once the question has been played, the person's answer is heard.
    clock = 1000;
    h.speak();
    h.quiet();
    await until(() => h.turns.confirmations.length === 1, 'the answer');
    expect(h.turns.confirmations).toEqual([{ callId: 'call-7', approve: true }]);
    expect(h.asr.calls).toBe(2);
  });

  it('provider failures are shown (alert), counted, and the model failure is spoken', async () => {
    const h = make();
    h.asr.texts = [new ProviderError('http', 'transcription answered 503', 'fake-asr'), 'hello'];
    h.turns.scripts = [{ fail: new GatewayError('MODEL_ERROR', 'model "m" failed: 500') }];
    h.session.input({ kind: 'listen_start', mode: 'auto' });
    h.speak();
    h.quiet();
    await until(() => h.json().some((m) => m['type'] === 'alert'), 'alert');
    expect(h.json()[0]).toMatchObject({ type: 'alert', status: 'error', emotion: 'sad' });
    await until(() => h.kinds().includes('tts:stop'), 'the spoken apology');
    await until(() => h.session.state === 'listening', 'listening again');
    h.sent.length = 0;
    h.speak();
    h.quiet();
    await until(() => h.kinds().includes('tts:stop'), 'the spoken failure');
    expect(h.kinds()[0]).toBe('stt');
    expect(h.json().some((m) => m['type'] === 'alert' && String(m['message']).includes('model_error'))).toBe(true);
    expect(h.json().find((m) => m['state'] === 'sentence_start')?.['text']).toBe("Sorry, I can't answer right now.");
    const errs = (await h.registry.getSingleMetric('voxgate_voice_converse_provider_errors_total')!.get()).values;
    expect(errs.map((v) => `${v.labels['stage']}:${v.labels['code']}`).sort()).toEqual(['asr:http', 'llm:model_error']);
  });

  it('a recogniser that hangs is timed out and shown', async () => {
    const h = make();
    h.asr.texts = ['hang'];
    h.session.input({ kind: 'listen_start', mode: 'auto' });
    h.speak();
    h.quiet();
    await until(() => h.json().some((m) => m['type'] === 'alert'), 'alert after the ASR timeout', 10_000);
    expect(h.asr.signals[0]!.aborted).toBe(true);
  });

  it('synthesis failure: an alert, no audio, the turn still ends', async () => {
    const h = make();
    h.asr.texts = ['hi'];
    h.tts.fail = true;
    h.session.input({ kind: 'listen_start', mode: 'auto' });
    h.speak();
    h.quiet();
    await until(() => h.json().some((m) => m['type'] === 'alert'), 'alert');
    await until(() => h.session.state === 'listening', 'the turn ended');
    expect(h.frames()).toBe(0);
  });

  it('the device vanishing mid-turn cancels everything and sends nothing more', async () => {
    const h = make();
    h.asr.texts = ['tell me everything'];
    h.tts.framesPer = 50;
    h.turns.scripts = [{ deltas: ['A long answer. ', 'And more. '], hold: new Promise(() => undefined) }];
    h.session.input({ kind: 'listen_start', mode: 'auto' });
    h.speak();
    h.quiet();
    await until(() => h.frames() >= 1, 'speaking');
    h.session.close();
    const n = h.sent.length;
    await new Promise((r) => setTimeout(r, 150));
    expect(h.sent.length).toBe(n);
    expect(h.turns.cancelled).toHaveLength(1);
    expect(h.tts.signals.every((s) => s.aborted)).toBe(true);
  });

  it('paces the downlink: never more than the lead (far under 40 frames) ahead of playback', async () => {
    const h = make();
    h.asr.texts = ['count'];
    h.tts.framesPer = 30;
    h.turns.scripts = [{ deltas: ['One two three. ', 'Four five six.'] }];
    h.session.input({ kind: 'listen_start', mode: 'auto' });
    h.speak();
    h.quiet();
    await until(() => h.kinds().includes('tts:stop'), 'tts stop', 15_000);
    // The device plays each frame for 60 ms from when it has it; count what it holds unplayed at each arrival.
    let playedUntil = 0;
    let maxAhead = 0;
    for (const s of h.sent.filter((x) => x.frame)) {
      playedUntil = Math.max(playedUntil, s.at) + 60;
      maxAhead = Math.max(maxAhead, Math.round((playedUntil - s.at) / 60));
    }
    expect(h.frames()).toBe(60);
    expect(maxAhead).toBeLessThanOrEqual(40);
    expect(maxAhead).toBeLessThanOrEqual(5 + 1);
  });
});
