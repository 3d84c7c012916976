import pino from 'pino';
import { Registry } from 'prom-client';
import { afterEach, describe, expect, it } from 'vitest';
import type { OpusDecoder, OpusEncoder, SpeechDetector, SpeechRecognizer, SpeechSynthesizer, VadState } from '../../../../src/voice/converse/contracts.js';
import { createConverseMetrics } from '../../../../src/voice/converse/metrics.js';
import { ConverseSession } from '../../../../src/voice/converse/session/conversation.js';
import type { TurnHandle, TurnPort, TurnTimings } from '../../../../src/voice/converse/session/ports.js';
import { Speculation } from '../../../../src/voice/converse/session/speculation.js';
import { deferred, until } from '../../../../../test/support/wait.js';

/** A recogniser whose every request waits until the test answers it, recording the audio and the abort signal. */
class HeldAsr implements SpeechRecognizer {
  readonly name = 'held-asr';
  readonly requests: Array<{ samples: number; signal: AbortSignal; answer(text: string): void }> = [];
  transcribe(wav: Buffer, o: { signal: AbortSignal }): Promise<string> {
    const d = deferred<string>();
    o.signal.addEventListener('abort', () => d.reject(new Error('aborted')), { once: true });
    this.requests.push({ samples: (wav.length - 44) / 2, signal: o.signal, answer: (t) => d.resolve(t) });
    return d.promise;
  }
}

const wav = (pcm: Int16Array) => Buffer.concat([Buffer.alloc(44), Buffer.from(pcm.buffer, pcm.byteOffset, pcm.byteLength)]);

describe('Speculation (transcription during the end-of-speech wait)', () => {
  function make() {
    const asr = new HeldAsr();
    const counts: string[] = [];
    const s = new Speculation({ asr, wav, timeoutMs: 60_000, afterMs: 200, counted: (r) => counts.push(r) });
    const audio = (n: number) => () => new Int16Array(n);
    return { asr, counts, s, audio };
  }

  it('sends what was heard once the pause is long enough, and hands that request over when only quiet followed', async () => {
    const { asr, counts, s, audio } = make();
    s.update(16_000, 120, audio(16_000));
    expect(asr.requests).toHaveLength(0);
    s.update(16_960, 180, audio(16_960));
    expect(asr.requests).toHaveLength(0);
    s.update(17_920, 240, audio(17_920));
    expect(asr.requests).toHaveLength(1);
    expect(asr.requests[0]!.samples).toBe(17_920);
    // Still quiet: the same request stands (no second one).
    s.update(18_880, 300, audio(18_880));
    expect(asr.requests).toHaveLength(1);
    const taken = s.take(19_840, 360);
    expect(taken).toBeDefined();
    asr.requests[0]!.answer(' what time is it ');
    expect(await taken!.text).toBe('what time is it');
    expect(asr.requests[0]!.signal.aborted).toBe(false);
    expect(counts).toEqual(['used']);
  });

  it('aborts the request when speech resumes, and sends again after the next pause', () => {
    const { asr, counts, s, audio } = make();
    s.update(16_000, 240, audio(16_000));
    expect(asr.requests).toHaveLength(1);
    // Speech again: the quiet run restarted after the request's audio ended.
    s.update(16_960, 0, audio(16_960));
    expect(asr.requests[0]!.signal.aborted).toBe(true);
    expect(counts).toEqual(['aborted']);
    s.update(17_920, 60, audio(17_920));
    expect(asr.requests).toHaveLength(1);
    s.update(20_800, 240, audio(20_800));
    expect(asr.requests).toHaveLength(2);
    expect(asr.requests[1]!.samples).toBe(20_800);
  });

  it('gives nothing at the end of speech when speech followed the request (and closes it)', () => {
    const { asr, counts, s, audio } = make();
    s.update(16_000, 240, audio(16_000));
    // The end comes (manual stop) with a quiet run shorter than what followed the request: speech came in between.
    expect(s.take(24_000, 200)).toBeUndefined();
    expect(asr.requests[0]!.signal.aborted).toBe(true);
    expect(counts).toEqual(['aborted']);
  });

  it('does nothing without the detector’s quiet time, or when turned off', () => {
    const asr = new HeldAsr();
    const off = new Speculation({ asr, wav, timeoutMs: 60_000, afterMs: 0, counted: () => undefined });
    off.update(16_000, 5000, () => new Int16Array(16_000));
    const { s, audio } = make();
    s.update(16_000, undefined, audio(16_000));
    expect(asr.requests).toHaveLength(0);
    expect(s.take(16_000, undefined)).toBeUndefined();
  });
});

/**
 * The session with a detector that reports its quiet time: a "speech" packet is 60 ms of tone, a "quiet" one
 * 60 ms of zeros; the end of speech comes after 10 quiet packets (600 ms), the speculation after 200 ms.
 */
const SPEECH = Uint8Array.of(1);
const QUIET = Uint8Array.of(0);

function detector(): SpeechDetector {
  let state: VadState = 'silence';
  let quiet = 0;
  return {
    push(pcm): VadState {
      if (pcm.some((x) => x !== 0)) {
        quiet = 0;
        if (state === 'silence') state = 'speech';
      } else if (state !== 'silence') {
        quiet++;
        if (state === 'speech' && quiet >= 10) state = 'end';
      }
      return state;
    },
    get quietMs() {
      return state === 'silence' ? 0 : quiet * 60;
    },
    reset() {
      state = 'silence';
      quiet = 0;
    },
  };
}

class OneFrameTts implements SpeechSynthesizer {
  readonly name = 'tts';
  readonly sampleRate = 24000;
  async *synthesize(): AsyncIterable<Int16Array> {
    await new Promise((r) => setImmediate(r));
    yield new Int16Array(1440).fill(1);
  }
}

class Turns implements TurnPort {
  started: string[] = [];
  start(req: { text: string }, emit: (e: { type: 'text.delta'; text: string }) => void): Promise<TurnHandle> {
    this.started.push(req.text);
    const done = (async () => {
      await new Promise((r) => setImmediate(r));
      emit({ type: 'text.delta', text: 'It is noon.' });
      return { text: 'It is noon.', conversationId: 'c' };
    })();
    return Promise.resolve({ cancel: () => undefined, confirm: () => false, asked: () => false, done });
  }
}

describe('conversation session with speculative transcription', () => {
  const sessions: ConverseSession[] = [];
  afterEach(() => {
    for (const s of sessions.splice(0)) s.close();
  });

  function harness() {
    const asr = new HeldAsr();
    const turns = new Turns();
    const registry = new Registry();
    const sent: Array<Record<string, unknown>> = [];
    const replies: TurnTimings[] = [];
    const decoder: OpusDecoder = { sampleRate: 16000, decode: (p) => new Int16Array(960).fill(p[0] === 1 ? 1000 : 0), free() {} };
    const encoder: OpusEncoder = { sampleRate: 24000, frameMs: 60, frameSamples: 1440, encode: () => Uint8Array.of(0xfc), free() {} };
    const session = new ConverseSession({
      sessionId: 's',
      deviceId: 'aa:bb:cc:dd:ee:02',
      out: { json: (m) => sent.push(m as Record<string, unknown>), frame: () => undefined },
      audio: { decoder, encoder, detector: detector(), wav, resample: (p) => p },
      asr,
      tts: new OneFrameTts(),
      turns,
      limits: { frameMs: 60, leadFrames: 5, maxQueuedFrames: 50, maxUtteranceMs: 10_000, asrTimeoutMs: 60_000, preRollMs: 300, speculateAfterMs: 200 },
      log: pino({ level: 'silent' }),
      metrics: createConverseMetrics(registry),
      events: { transcript: () => undefined, tool: () => undefined, reply: (e) => replies.push(e.timings) },
      conversation: { get: () => undefined, set: () => undefined },
    });
    sessions.push(session);
    const packets = (p: Uint8Array, n: number) => {
      for (let i = 0; i < n; i++) session.audio(p);
    };
    const counted = async (result: string) =>
      (await registry.getSingleMetric('voxgate_voice_converse_speculative_asr_total')!.get()).values.find((v) => v.labels['result'] === result)?.value ?? 0;
    return { session, asr, turns, sent, replies, packets, counted };
  }

  it('auto: a pause sends the utterance early; speech resuming aborts it; the final request answers the turn', async () => {
    const h = harness();
    h.session.input({ kind: 'listen_start', mode: 'auto' });
    h.packets(SPEECH, 5);
    h.packets(QUIET, 4); // 240 ms of quiet: sent speculatively
    expect(h.asr.requests).toHaveLength(1);
    expect(h.asr.requests[0]!.samples).toBe(9 * 960);
    h.packets(SPEECH, 3); // the person goes on: that request is closed
    expect(h.asr.requests[0]!.signal.aborted).toBe(true);
    expect(await h.counted('aborted')).toBe(1);
    h.packets(QUIET, 4);
    expect(h.asr.requests).toHaveLength(2);
    expect(h.asr.requests[1]!.samples).toBe(16 * 960);
    // The transcript arrives during the detector's wait; the turn starts only once the end of speech is confirmed.
    h.asr.requests[1]!.answer('what time is it');
    await new Promise((r) => setImmediate(r));
    expect(h.turns.started).toEqual([]);
    h.packets(QUIET, 6);
    await until(() => h.sent.some((m) => m['type'] === 'tts' && m['state'] === 'stop'), 'tts stop');
    expect(h.turns.started).toEqual(['what time is it']);
    expect(h.asr.requests).toHaveLength(2);
    expect(h.asr.requests[1]!.signal.aborted).toBe(false);
    expect(await h.counted('used')).toBe(1);
    // Sent before the end of speech (a negative offset, rounded to the millisecond).
    expect(h.replies[0]!.asrStartMs).toBeLessThanOrEqual(0);
  });

  it('manual: a stop after a pause uses the request in flight; a stop after more speech sends the whole utterance', async () => {
    const h = harness();
    h.session.input({ kind: 'listen_start', mode: 'manual' });
    h.packets(SPEECH, 5);
    h.packets(QUIET, 4);
    expect(h.asr.requests).toHaveLength(1);
    h.session.input({ kind: 'listen_stop' });
    expect(h.asr.requests).toHaveLength(1);
    h.asr.requests[0]!.answer('turn it up');
    await until(() => h.turns.started.length === 1, 'the turn');
    expect(h.turns.started).toEqual(['turn it up']);
    await until(() => h.replies.length === 1, 'the turn to finish');

    h.session.input({ kind: 'listen_start', mode: 'manual' });
    h.packets(SPEECH, 5);
    h.packets(QUIET, 4);
    h.packets(SPEECH, 1);
    h.session.input({ kind: 'listen_stop' });
    // The speculative request lacked the last words: closed, and the whole utterance sent instead.
    expect(h.asr.requests).toHaveLength(3);
    expect(h.asr.requests[1]!.signal.aborted).toBe(true);
    expect(h.asr.requests[2]!.samples).toBe(10 * 960);
    h.asr.requests[2]!.answer('turn it down');
    await until(() => h.turns.started.length === 2, 'the second turn');
    expect(h.turns.started[1]).toBe('turn it down');
  });

  it('closing the session closes a speculative request', () => {
    const h = harness();
    h.session.input({ kind: 'listen_start', mode: 'auto' });
    h.packets(SPEECH, 5);
    h.packets(QUIET, 4);
    h.session.close();
    expect(h.asr.requests[0]!.signal.aborted).toBe(true);
  });
});
