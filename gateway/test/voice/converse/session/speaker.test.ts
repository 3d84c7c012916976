import { describe, expect, it, vi } from 'vitest';
import { ProviderError, type OpusEncoder, type SpeechSynthesizer } from '../../../../src/voice/converse/contracts.js';
import { DownlinkPacer } from '../../../../src/voice/converse/session/pacer.js';
import { Speaker } from '../../../../src/voice/converse/session/speaker.js';

/**
 * The speaker over a real pacer (a lead long enough that nothing waits) with a stand-in synthesiser and
 * encoder: what reaches the device, in which order, and how a failure or an abort ends it.
 */
type Sent = { json: Record<string, unknown> } | { frame: number[] };

function harness(o: { synth?: Partial<SpeechSynthesizer>; synthRate?: number; onFrame?: (framesSent: number) => void } = {}) {
  const sent: Sent[] = [];
  const pacer = new DownlinkPacer(
    {
      frame: (opus) => {
        sent.push({ frame: [...opus] });
        o.onFrame?.(sent.filter((s) => 'frame' in s).length);
      },
      json: (m) => sent.push({ json: m as Record<string, unknown> }),
    },
    { frameMs: 60, leadFrames: 10_000, maxQueued: 10_000 },
  );
  // A frame of 4 samples at 24 kHz; its "Opus" is the frame's first sample, so the test can follow the audio.
  const encoder: OpusEncoder = { sampleRate: 24_000, frameMs: 60, frameSamples: 4, encode: (f) => Uint8Array.of(f[0]! & 0xff), free() {} };
  const synth: SpeechSynthesizer = {
    name: 'stand-in',
    sampleRate: o.synthRate ?? 24_000,
    async *synthesize(text) {
      // Ten samples per sentence, numbered by the sentence's length, in chunks of 3.
      const pcm = Int16Array.from({ length: 10 }, () => text.length);
      for (let i = 0; i < pcm.length; i += 3) yield pcm.subarray(i, i + 3);
    },
    ...o.synth,
  };
  const ac = new AbortController();
  const errors: ProviderError[] = [];
  const resampled: Array<[number, number]> = [];
  const speaker = new Speaker({
    sessionId: 's-1',
    synth,
    encoder,
    resample: (pcm, from, to) => (resampled.push([from, to]), pcm),
    pacer,
    signal: ac.signal,
    onError: (e) => errors.push(e),
  });
  const shape = () =>
    sent.map((s) =>
      'json' in s
        ? `${String(s.json['type'])}:${String(s.json['state'] ?? s.json['emotion'])}${s.json['text'] ? `:${String(s.json['text'])}` : ''}`
        : `frame:${s.frame[0]}`,
    );
  return { speaker, sent, shape, ac, errors, resampled, pacer };
}

describe('Speaker', () => {
  it('speaks sentences in order: llm (emotion), one tts start, each sentence_start before its frames, tts stop last', async () => {
    const h = harness();
    h.speaker.say('Hi 😊');
    h.speaker.say('Bye now.');
    await h.speaker.end();
    // "Hi" (2 chars): 10 samples -> 3 frames of 4 (the last padded); "Bye now." (8): 3 frames.
    expect(h.shape()).toEqual([
      'llm:happy',
      'tts:start',
      'tts:sentence_start:Hi',
      'frame:2',
      'frame:2',
      'frame:2',
      'tts:sentence_start:Bye now.',
      'frame:8',
      'frame:8',
      'frame:8',
      'tts:stop',
    ]);
    expect(h.speaker.spoken).toBe(2);
    expect(h.speaker.speaking).toBe(false);
  });

  it('says nothing for text with no letters or digits, and sends no tts at all when nothing was said', async () => {
    const h = harness();
    h.speaker.say('**');
    h.speaker.say('😊 ...');
    await h.speaker.end();
    expect(h.sent).toEqual([]);
  });

  it('resamples when the synthesiser speaks at another rate than the downlink', async () => {
    const h = harness({ synthRate: 16_000 });
    h.speaker.say('One.');
    await h.speaker.end();
    expect(h.resampled[0]).toEqual([16_000, 24_000]);
  });

  it("requests the next sentence's speech while this one's still streams, one sentence ahead at most", async () => {
    const requested: string[] = [];
    let releaseFirst!: () => void;
    const firstHeld = new Promise<void>((r) => (releaseFirst = r));
    const h = harness({
      synth: {
        async *synthesize(text) {
          requested.push(text);
          yield Int16Array.from({ length: 4 }, () => text.length);
          if (text === 'One.') await firstHeld; // the first sentence's stream has not ended
        },
      },
    });
    h.speaker.say('One.');
    h.speaker.say('Two!');
    h.speaker.say('Three.');
    // "Two!" is asked for while "One." streams; "Three." waits until "Two!" begins to be spoken.
    await vi.waitFor(() => {
      expect(requested).toEqual(['One.', 'Two!']);
      expect(h.shape()).toContain('tts:sentence_start:One.'); // "One." is being spoken, its stream still open
    });
    releaseFirst();
    await h.speaker.end();
    expect(requested).toEqual(['One.', 'Two!', 'Three.']);
    expect(h.shape()).toEqual([
      'llm:neutral',
      'tts:start',
      'tts:sentence_start:One.',
      'frame:4',
      'tts:sentence_start:Two!',
      'frame:4',
      'tts:sentence_start:Three.',
      'frame:6',
      'tts:stop',
    ]);
  });

  it("closes the next sentence's request when this one fails", async () => {
    const signals = new Map<string, AbortSignal>();
    const h = harness({
      synth: {
        async *synthesize(text, opts) {
          signals.set(text, opts.signal);
          if (text === 'One.') {
            await vi.waitFor(() => expect(signals.has('Two.')).toBe(true));
            throw new ProviderError('http', 'speech API answered 500', 'stand-in');
          }
          for (;;) {
            yield Int16Array.from({ length: 4 }, () => 2);
            await new Promise((r) => setImmediate(r));
          }
        },
      },
    });
    h.speaker.say('One.');
    h.speaker.say('Two.');
    h.speaker.say('Three.');
    await h.speaker.end();
    expect(h.errors.map((e) => e.code)).toEqual(['http']);
    expect(signals.get('Two.')?.aborted).toBe(true);
    expect(signals.has('Three.')).toBe(false);
    expect(h.sent).toEqual([]);
  });

  it('reports a synthesis failure once, and says no later sentence of the turn', async () => {
    const h = harness({
      synth: {
        // Fails before its first chunk, as a provider refusing the request does.
        async *synthesize() {
          throw new ProviderError('http', 'speech API answered 500', 'stand-in');
        },
      },
    });
    h.speaker.say('One.');
    h.speaker.say('Two.');
    await h.speaker.end();
    expect(h.errors.map((e) => [e.code, e.message])).toEqual([['http', 'speech API answered 500']]);
    expect(h.sent).toEqual([]);
  });

  it('stops at once when the turn is aborted mid-sentence: no more frames, no tts stop', async () => {
    let request: AbortSignal | undefined;
    const h = harness({
      synth: {
        async *synthesize(_text, opts) {
          request = opts.signal;
          for (;;) {
            yield Int16Array.from({ length: 4 }, () => 5);
            await new Promise((r) => setImmediate(r));
          }
        },
      },
      // The person says "stop" as the second frame goes out.
      onFrame: (n) => n === 2 && h.ac.abort(),
    });
    h.speaker.say('A long story.');
    await h.speaker.end();
    expect(h.shape()).toEqual(['llm:neutral', 'tts:start', 'tts:sentence_start:A long story.', 'frame:5', 'frame:5']);
    expect(h.errors).toEqual([]);
    expect(request?.aborted).toBe(true); // the synthesis request is closed
  });
});
