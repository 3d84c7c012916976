import { describe, expect, it } from 'vitest';
import { createOpusDecoder, createOpusEncoder } from '../../../src/voice/converse/audio/opus.js';
import { resample, Resampler } from '../../../src/voice/converse/audio/resample.js';
import { SentenceSplitter } from '../../../src/voice/converse/audio/sentences.js';
import { parseWav, pcmToWav, WavError, WavStreamParser } from '../../../src/voice/converse/audio/wav.js';
import { espeakWav } from '../../support/speech-servers.js';

/** espeak-ng speech at `rate` (resampled from its 22050 Hz). */
async function speech(text: string, rate: number): Promise<Int16Array> {
  const p = parseWav(await espeakWav(text));
  return resample(p.samples, p.sampleRate, rate);
}

/** Best normalised cross-correlation of b against a over lags 0..maxLag (codec delay). */
function similarity(a: Int16Array, b: Int16Array, maxLag: number): number {
  let best = 0;
  const n = Math.min(a.length, b.length - maxLag);
  for (let lag = 0; lag <= maxLag; lag += 1) {
    let num = 0,
      ea = 0,
      eb = 0;
    for (let i = 0; i < n; i += 2) {
      const x = a[i] ?? 0,
        y = b[i + lag] ?? 0;
      num += x * y;
      ea += x * x;
      eb += y * y;
    }
    best = Math.max(best, num / Math.sqrt(ea * eb || 1));
  }
  return best;
}

function frames(pcm: Int16Array, size: number): Int16Array[] {
  const out: Int16Array[] = [];
  for (let off = 0; off + size <= pcm.length; off += size) out.push(pcm.subarray(off, off + size));
  return out;
}

describe('opus', () => {
  it.each([16_000, 24_000])('round-trips espeak-ng speech at %i Hz in 60 ms frames', async (rate) => {
    const pcm = await speech('Set the volume to forty.', rate);
    const enc = createOpusEncoder(rate, 60);
    const dec = createOpusDecoder(rate);
    expect(enc.frameSamples).toBe(rate * 0.06);
    const parts = frames(pcm, enc.frameSamples).map((f) => enc.encode(f));
    expect(parts.every((p) => p.length > 0 && p.length < 400)).toBe(true);
    const decoded = parts.map((p) => dec.decode(p));
    expect(decoded.every((d) => d.length === enc.frameSamples)).toBe(true);
    const joined = new Int16Array(decoded.reduce((n, d) => n + d.length, 0));
    let off = 0;
    for (const d of decoded) {
      joined.set(d, off);
      off += d.length;
    }
    expect(similarity(pcm, joined, rate / 50)).toBeGreaterThan(0.8);
    enc.free();
    dec.free();
  });

  it('keeps 150 codecs apart in one process, and a corrupt packet decodes to nothing', async () => {
    const pcm = await speech('Hello there.', 24_000);
    const input = frames(pcm, 1440).slice(4, 8);
    const reference = (() => {
      const e = createOpusEncoder(24_000, 60);
      return input.map((f) => Buffer.from(e.encode(f)));
    })();
    const many = Array.from({ length: 150 }, () => createOpusEncoder(24_000, 60));
    const decoders = Array.from({ length: 150 }, () => createOpusDecoder(16_000));
    const got = many.map(() => [] as Buffer[]);
    for (const [i, f] of input.entries()) {
      for (const [k, e] of many.entries()) {
        got[k]?.push(Buffer.from(e.encode(f)));
        decoders[k]?.decode(reference[i] ?? new Uint8Array(0));
      }
    }
    expect(got.every((g) => g.every((p, i) => p.equals(reference[i] ?? Buffer.alloc(0))))).toBe(true);
    const d = decoders[0];
    expect(d?.decode(new Uint8Array([0xff, 0xff, 0xff, 1, 2, 3])).length).toBe(0);
    expect(d?.decode(new Uint8Array(0)).length).toBe(0);
    expect(d?.decode(new Uint8Array(5000)).length).toBe(0);
    expect(() => many[0]?.encode(new Int16Array(10))).toThrow(RangeError);
    for (const c of [...many, ...decoders]) c.free();
  });
});

describe('wav', () => {
  it('writes exact RIFF sizes for 16 kHz 16-bit mono and reads them back', () => {
    const samples = Int16Array.from({ length: 16_001 }, (_, i) => Math.round(10_000 * Math.sin(i / 7)));
    const wav = pcmToWav(samples, 16_000);
    expect(wav.length).toBe(44 + 2 * 16_001);
    expect(wav.toString('ascii', 0, 4)).toBe('RIFF');
    expect(wav.readUInt32LE(4)).toBe(wav.length - 8);
    expect(wav.toString('ascii', 8, 16)).toBe('WAVEfmt ');
    expect([wav.readUInt16LE(20), wav.readUInt16LE(22), wav.readUInt32LE(24), wav.readUInt32LE(28), wav.readUInt16LE(32), wav.readUInt16LE(34)]).toEqual([
      1, 1, 16_000, 32_000, 2, 16,
    ]);
    expect(wav.toString('ascii', 36, 40)).toBe('data');
    expect(wav.readUInt32LE(40)).toBe(2 * 16_001);
    const back = parseWav(wav);
    expect(back.sampleRate).toBe(16_000);
    expect(Array.from(back.samples)).toEqual(Array.from(samples));
    expect(pcmToWav(new Int16Array(0), 16_000).readUInt32LE(4)).toBe(36);
  });

  it('reads espeak-ng output, streamed WAVs of unknown length byte by byte, and refuses what is not 16-bit PCM', async () => {
    const espeak = parseWav(await espeakWav('Hi.'));
    expect(espeak.sampleRate).toBe(22_050);
    expect(espeak.samples.length).toBeGreaterThan(1000);
    const wav = pcmToWav(Int16Array.from([1, -2, 3, -4, 5]), 24_000);
    wav.writeUInt32LE(0xffffffff, 40);
    const p = new WavStreamParser();
    const got: number[] = [];
    for (const b of wav) got.push(...p.push(Uint8Array.of(b)));
    expect(got).toEqual([1, -2, 3, -4, 5]);
    const float = Buffer.from(wav);
    float.writeUInt16LE(3, 20);
    expect(() => parseWav(float)).toThrow(WavError);
    expect(() => parseWav(Buffer.from('RIFF....WAVEjunk'))).toThrow(WavError);
    const huge = Buffer.from(wav);
    huge.write('LIST', 36, 'ascii');
    huge.writeUInt32LE(0x7fffffff, 40);
    expect(() => parseWav(huge)).toThrow(/too large/);
    expect(() => parseWav(Buffer.alloc(100), 50)).toThrow(WavError);
  });
});

describe('resample', () => {
  const tone = (hz: number, rate: number, seconds: number): Int16Array =>
    Int16Array.from({ length: Math.round(rate * seconds) }, (_, i) => Math.round(12_000 * Math.sin((2 * Math.PI * hz * i) / rate)));
  const crossings = (a: Int16Array): number => a.reduce((n, v, i) => n + (i > 0 && (a[i - 1] ?? 0) < 0 && v >= 0 ? 1 : 0), 0);

  it.each([
    [22_050, 24_000],
    [24_000, 16_000],
    [16_000, 24_000],
    [48_000, 16_000],
    [22_051, 24_000], // no small common divisor: the interpolated-kernel path
  ])('%i Hz → %i Hz keeps length and pitch, streamed or whole', (from, to) => {
    const input = tone(440, from, 1);
    const whole = resample(input, from, to);
    expect(whole.length).toBe(to);
    expect(Math.abs(crossings(whole) - 440)).toBeLessThanOrEqual(2);
    const r = new Resampler(from, to);
    const parts: number[] = [];
    for (let off = 0; off < input.length; off += 333) parts.push(...r.push(input.subarray(off, off + 333)));
    parts.push(...r.flush());
    expect(parts.length).toBe(to);
    expect(Math.max(...parts.slice(100, -100).map(Math.abs))).toBeGreaterThan(11_000);
    expect(Math.max(...parts.map(Math.abs))).toBeLessThan(13_500);
  });

  it('removes what the lower rate cannot carry', () => {
    const out = resample(tone(10_000, 48_000, 0.5), 48_000, 16_000);
    expect(Math.max(...out.slice(200, -200).map(Math.abs))).toBeLessThan(1500);
  });
});

describe('sentences', () => {
  const split = (deltas: string[], maxChars?: number): string[][] => {
    const s = new SentenceSplitter(maxChars ? { maxChars } : {});
    const out = deltas.map((d) => s.push(d));
    out.push(s.flush());
    return out;
  };

  it('hands out each sentence as soon as it ends', () => {
    expect(split(['Hel', 'lo there', '. How', ' are you?', ' Fine'])).toEqual([[], [], ['Hello there.'], [], ['How are you?'], ['Fine']]);
    expect(split(['你好。今天', '天气很好！', '要出去吗？好'])).toEqual([['你好。'], ['今天天气很好！'], ['要出去吗？'], ['好']]);
    expect(split(['Wait… what?! ', 'Yes.'])).toEqual([['Wait…', 'what?!'], [], ['Yes.']]);
    expect(split(['He said "stop." Then', ' left.'])).toEqual([['He said "stop."'], [], ['Then left.']]);
  });

  it('does not end a sentence at decimals, abbreviations, initials or domain names', () => {
    expect(split(['It is 3.5 degrees. Dr. Smith and J. R. R. Tolkien, e.g. this, visit example.com today. Ok'])).toEqual([
      ['It is 3.5 degrees.', 'Dr. Smith and J. R. R. Tolkien, e.g. this, visit example.com today.'],
      ['Ok'],
    ]);
    expect(split(['Costs 3.', '5 euros. Next'])).toEqual([[], ['Costs 3.5 euros.'], ['Next']]);
  });

  it('cuts an endless sentence at a comma or a space, and splits at line breaks', () => {
    const long = 'word '.repeat(30) + 'and then, more words follow here ' + 'x'.repeat(10);
    const out = split([long], 60).flat();
    expect(out.every((s) => s.length <= 60)).toBe(true);
    expect(out.join(' ').replace(/\s+/g, ' ')).toBe(long.trim().replace(/\s+/g, ' '));
    expect(split(['- one\n- two\n', '**Done.**'])).toEqual([['- one', '- two'], [], ['**Done.**']]);
    expect(split(['...', ' ', '!'])).toEqual([[], [], [], []]);
    expect(split(['-\n*\n𠀋\n'])).toEqual([['-\n*\n𠀋'], []]);
  });

  it('reads a huge answer in one delta in linear time (a model that does not stream hands over its whole answer)', () => {
    // Each initial's check matched the whole text before it, and each line break tested the whole text before it for
    // a word: 200 000 letters then 50 initials, or 200 000 line breaks, held the event loop for minutes.
    const word = 'a'.repeat(200_000);
    const text = `${word} ${'A. B. C. D. E. '.repeat(10)}end.`;
    const initials = split([text]).flat();
    expect(initials.join('').replace(/\s+/g, '')).toBe(text.replace(/\s+/g, ''));
    expect(initials.every((s) => s.length <= 240)).toBe(true);
    const breaks = split(['-\n'.repeat(200_000) + 'Done.']).flat();
    expect(breaks).toHaveLength(1);
    expect(breaks[0]!.endsWith('-\nDone.') && breaks[0]!.length <= 240).toBe(true);
  });
});
