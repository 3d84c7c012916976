import { describe, expect, it } from 'vitest';
import type { VadState } from '../../../src/voice/converse/contracts.js';
import { createOpusDecoder, createOpusEncoder } from '../../../src/voice/converse/audio/opus.js';
import { resample } from '../../../src/voice/converse/audio/resample.js';
import { createSpeechDetector } from '../../../src/voice/converse/audio/vad.js';
import { parseWav } from '../../../src/voice/converse/audio/wav.js';
import { espeakWav } from '../../support/speech-servers.js';

const RATE = 16_000;
const FRAME = 960; // 60 ms, what the device sends

/** Seeded noise: white, or pink (Paul Kellet's filter), at a given RMS-ish amplitude. */
function noise(n: number, amp: number, kind: 'white' | 'pink', seed = 7): Float32Array {
  let s = seed;
  const rnd = (): number => ((s = (s * 1103515245 + 12345) & 0x7fffffff) / 0x7fffffff) * 2 - 1;
  const out = new Float32Array(n);
  let b0 = 0,
    b1 = 0,
    b2 = 0;
  for (let i = 0; i < n; i++) {
    const w = rnd();
    if (kind === 'white') out[i] = w * amp;
    else {
      b0 = 0.99765 * b0 + w * 0.099046;
      b1 = 0.963 * b1 + w * 0.2965164;
      b2 = 0.57 * b2 + w * 1.0526913;
      out[i] = (b0 + b1 + b2 + w * 0.1848) * amp * 0.3;
    }
  }
  return out;
}

/** 1 s of room, the speech, 2.5 s of room; mixed, then through the real Opus codec as a device would send it. */
function deviceStream(speech: Int16Array, room: Float32Array | undefined): { frames: Int16Array[]; speechEndS: number } {
  const pre = RATE;
  const n = pre + speech.length + Math.round(2.5 * RATE);
  const mixed = new Int16Array(n - (n % FRAME));
  for (let i = 0; i < mixed.length; i++) {
    const s = i >= pre && i < pre + speech.length ? (speech[i - pre] ?? 0) : 0;
    mixed[i] = Math.max(-32768, Math.min(32767, Math.round(s + (room?.[i] ?? 0))));
  }
  // Where the speech audibly ends (its faint tail drowns in the room's noise).
  let last = 0;
  for (let i = speech.length - 1; i >= 0 && last === 0; i--) if (Math.abs(speech[i] ?? 0) > 1500) last = i;
  const enc = createOpusEncoder(RATE, 60);
  const dec = createOpusDecoder(RATE);
  const frames: Int16Array[] = [];
  for (let off = 0; off < mixed.length; off += FRAME) frames.push(dec.decode(enc.encode(mixed.subarray(off, off + FRAME))));
  enc.free();
  dec.free();
  return { frames, speechEndS: (pre + last) / RATE };
}

function run(frames: Int16Array[]): { startS: number; endS: number; states: VadState[] } {
  const vad = createSpeechDetector();
  let t = 0,
    startS = -1,
    endS = -1;
  const states: VadState[] = [];
  for (const f of frames) {
    const st = vad.push(f);
    t += f.length / RATE;
    states.push(st);
    if (st === 'speech' && startS < 0) startS = t;
    if (st === 'end' && endS < 0) endS = t;
  }
  return { startS, endS, states };
}

describe('speech detector', async () => {
  const wav = parseWav(await espeakWav('Set the volume to forty. What is the weather like in Berlin today?'));
  const speech = resample(wav.samples, wav.sampleRate, RATE);
  const total = RATE + speech.length + 2.5 * RATE;

  it.each([
    ['silence', undefined],
    ['white noise', noise(total, 1200, 'white')],
    ['pink noise', noise(total, 1500, 'pink')],
  ] as const)('finds the speech and its end within 1 s, in %s', (_name, room) => {
    const { frames, speechEndS } = deviceStream(speech, room);
    const r = run(frames);
    expect(r.startS).toBeGreaterThan(1);
    expect(r.startS).toBeLessThan(1.5);
    expect(r.endS).toBeGreaterThan(speechEndS);
    expect(r.endS - speechEndS).toBeLessThan(1);
    // 'end' stays until reset; reset starts a new utterance but keeps the room's noise learnt.
    expect(r.states.at(-1)).toBe('end');
  });

  it.each([
    ['white', 400],
    ['white', 3000],
    ['pink', 1500],
    ['pink', 5000],
  ] as const)('never reports speech in %s noise alone (amplitude %i), nor in digital silence', (kind, amp) => {
    const room = noise(20 * RATE, amp, kind, 11);
    const { frames } = deviceStream(new Int16Array(0), room);
    expect(run(frames).states.every((s) => s === 'silence')).toBe(true);
    expect(run(Array.from({ length: 100 }, () => new Int16Array(FRAME))).states.every((s) => s === 'silence')).toBe(true);
  });

  it('does not take a steady noise getting louder for speech', () => {
    const quiet = noise(3 * RATE, 300, 'pink', 3);
    const loud = noise(10 * RATE, 2500, 'pink', 5);
    const frames: Int16Array[] = [];
    for (const part of [quiet, loud]) {
      for (let off = 0; off + FRAME <= part.length; off += FRAME) frames.push(Int16Array.from(part.subarray(off, off + FRAME), (v) => Math.round(v)));
    }
    expect(run(frames).states.every((s) => s === 'silence')).toBe(true);
  });

  it('tells how long it has been quiet since the last speech: 0 before speech, counting on past the end, 0 again on speech', () => {
    const { frames } = deviceStream(speech, noise(total, 1200, 'white'));
    const vad = createSpeechDetector();
    const seen: Array<{ state: VadState; quietMs: number }> = [];
    for (const f of frames) seen.push({ state: vad.push(f), quietMs: vad.quietMs ?? -1 });
    expect(seen.filter((x) => x.state === 'silence').every((x) => x.quietMs === 0)).toBe(true);
    const atEnd = seen.find((x) => x.state === 'end')!;
    expect(atEnd.quietMs).toBeGreaterThanOrEqual(600);
    expect(seen.at(-1)!.quietMs).toBeGreaterThan(atEnd.quietMs);
    // Speech after the end (a push-to-talk user going on) restarts the quiet run.
    const speaking = frames.slice(Math.floor(frames.length / 3), Math.floor(frames.length / 3) + 5);
    for (const f of speaking) vad.push(f);
    expect(vad.quietMs).toBeLessThan(atEnd.quietMs);
  });

  it('starts over after reset, with any chunk size', () => {
    const { frames } = deviceStream(speech, noise(total, 800, 'white', 9));
    const vad = createSpeechDetector();
    const joined = new Int16Array(frames.length * FRAME);
    frames.forEach((f, i) => joined.set(f, i * FRAME));
    let st: VadState = 'silence';
    for (let off = 0; off < joined.length; off += 123) st = vad.push(joined.subarray(off, off + 123));
    expect(st).toBe('end');
    vad.reset();
    expect(vad.push(new Int16Array(FRAME))).toBe('silence');
  });
});
