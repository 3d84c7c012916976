/**
 * End-of-speech detection over 16 kHz PCM: a statistical detector with an adaptive noise spectrum, in the line
 * of Sohn, Kim & Sung ("A statistical model-based voice activity detection", 1999), plus a harmonicity check.
 *
 * Per 20 ms hop, a 512-point Hann-windowed spectrum P[k] over 150-4000 Hz (where speech lives) is compared with
 * the noise spectrum N[k] learnt from non-speech frames: the mean log likelihood ratio (ML form: γ-ln γ-1 with
 * γ = P/N) says "louder than the noise in a speech-like way". Voiced speech is also peaky (harmonics), so its
 * γ spectrum is far from flat; a steady noise that merely gets louder (a fan turned up) scales γ evenly and is
 * rejected by a flatness test, then absorbed into N. Speech starts after 100 ms of speech frames within 200 ms,
 * and ends after `silenceMs` with no two consecutive speech frames, whatever the room's noise level.
 *
 * Why not Silero (neural): onnxruntime-node is 288 MB, its postinstall fetches a GPU provider from outside
 * the npm registry by default (an offline `npm ci` fails unless told to skip), and it runs inference only
 * asynchronously while this contract is synchronous per pushed frame. This detector costs well under 1 ms of
 * CPU per second of audio and needs no model file; memory is fixed (a few KB per device).
 */
import type { SpeechDetector, VadState } from '../contracts.js';

const RATE = 16_000;
const HOP = 320; // 20 ms
const FFT = 512;
const BIN_HZ = RATE / FFT;
const LOW_BIN = Math.ceil(150 / BIN_HZ);
const HIGH_BIN = Math.floor(4000 / BIN_HZ);
const BINS = HIGH_BIN - LOW_BIN + 1;
/** Frames used to learn the noise before any decision (the device streams room sound before the user speaks). */
const INIT_FRAMES = 5;
/** Power floor (of 16-bit samples, per bin): digital silence must not make every whisper infinitely loud. */
const POWER_FLOOR = 1e3;

export interface SpeechDetectorOptions {
  /** Silence (or noise) after speech that ends the utterance; default 600 ms (the issue allows at most 1 s). */
  silenceMs?: number;
  /** Mean log likelihood ratio above which a frame is louder than the noise; default 1.0. */
  threshold?: number;
  /** Frames of band energy below this (dBFS) are never speech; default -55. */
  minLevelDb?: number;
}

/** Hann window and bit-reversal table, shared by every detector. */
const WINDOW = Float32Array.from({ length: FFT }, (_, i) => 0.5 - 0.5 * Math.cos((2 * Math.PI * i) / FFT));
const BITREV = (() => {
  const t = new Uint16Array(FFT);
  const bits = Math.log2(FFT);
  for (let i = 0; i < FFT; i++) {
    let r = 0;
    for (let b = 0; b < bits; b++) r |= ((i >> b) & 1) << (bits - 1 - b);
    t[i] = r;
  }
  return t;
})();
const COS = Float32Array.from({ length: FFT / 2 }, (_, i) => Math.cos((2 * Math.PI * i) / FFT));
const SIN = Float32Array.from({ length: FFT / 2 }, (_, i) => -Math.sin((2 * Math.PI * i) / FFT));

export function createSpeechDetector(opts: SpeechDetectorOptions = {}): SpeechDetector {
  return new SpectralSpeechDetector(opts);
}

export class SpectralSpeechDetector implements SpeechDetector {
  private readonly endFrames: number;
  private readonly threshold: number;
  private readonly minBandPower: number;
  /** The last FFT samples (ring order: oldest first after `fill`). */
  private readonly history = new Float32Array(FFT);
  private readonly pending = new Int16Array(HOP);
  private pendingLen = 0;
  private readonly re = new Float32Array(FFT);
  private readonly im = new Float32Array(FFT);
  private readonly power = new Float32Array(BINS);
  private readonly noise = new Float32Array(BINS);
  private frames = 0;
  private recent = 0; // bit i: frame (now - i) was speech
  private quiet = 0;
  private state: VadState = 'silence';

  constructor(opts: SpeechDetectorOptions) {
    this.endFrames = Math.max(5, Math.round((opts.silenceMs ?? 600) / 20));
    this.threshold = opts.threshold ?? 1.0;
    // Band power of a full-scale sine is about (32768·FFT/4)²; the floor is relative to that.
    const fullScale = (32768 * FFT * 0.25) ** 2;
    this.minBandPower = fullScale * 10 ** ((opts.minLevelDb ?? -55) / 10);
  }

  push(pcm16k: Int16Array): VadState {
    let off = 0;
    while (off < pcm16k.length) {
      const n = Math.min(HOP - this.pendingLen, pcm16k.length - off);
      this.pending.set(pcm16k.subarray(off, off + n), this.pendingLen);
      this.pendingLen += n;
      off += n;
      if (this.pendingLen === HOP) {
        this.pendingLen = 0;
        this.frame();
      }
    }
    return this.state;
  }

  get quietMs(): number {
    return this.state === 'silence' ? 0 : (this.quiet * HOP * 1000) / RATE;
  }

  reset(): void {
    // The noise estimate is the room's, not the utterance's: keep it across turns.
    this.recent = 0;
    this.quiet = 0;
    this.pendingLen = 0;
    this.state = 'silence';
  }

  private frame(): void {
    this.history.copyWithin(0, HOP);
    for (let i = 0; i < HOP; i++) this.history[FFT - HOP + i] = this.pending[i] ?? 0;
    this.spectrum();
    this.frames++;
    if (this.frames <= INIT_FRAMES) {
      // Learn the room: the running mean of the first frames.
      const w = 1 / this.frames;
      for (let k = 0; k < BINS; k++) this.noise[k] = (this.noise[k] ?? 0) * (1 - w) + (this.power[k] ?? 0) * w;
      return;
    }
    const speech = this.isSpeech();
    this.learnNoise(speech);
    this.recent = ((this.recent << 1) | (speech ? 1 : 0)) & 0x3ff;
    if (this.state === 'silence') {
      if (popcount(this.recent) >= 5) {
        this.state = 'speech';
        this.quiet = 0;
      }
    } else {
      // Counted on past 'end' too: a speculative transcript is only good while no speech followed it.
      this.quiet = this.recent & 1 ? 0 : this.quiet + 1;
      if (this.state === 'speech' && this.quiet >= this.endFrames) this.state = 'end';
    }
  }

  private isSpeech(): boolean {
    let llr = 0;
    let band = 0;
    let logSum = 0;
    let sum = 0;
    for (let k = 0; k < BINS; k++) {
      const p = this.power[k] ?? 0;
      band += p;
      const g = p / Math.max(this.noise[k] ?? 0, POWER_FLOOR);
      if (g > 1) llr += g - Math.log(g) - 1;
      const gg = Math.max(g, 1e-6);
      logSum += Math.log(gg);
      sum += gg;
    }
    if (band < this.minBandPower) return false;
    if (llr / BINS < this.threshold) return false;
    // Flatness of γ (geometric over arithmetic mean, dB): ≈ -2.5 dB for noise scaled evenly (the mean of ln of an exponential variate), far lower for harmonics.
    const flatnessDb = 10 * Math.log10(Math.exp(logSum / BINS) / (sum / BINS));
    return flatnessDb < -4.5;
  }

  private learnNoise(speech: boolean): void {
    for (let k = 0; k < BINS; k++) {
      const n = this.noise[k] ?? 0;
      const p = this.power[k] ?? 0;
      // Quick to follow the noise down (minimum tracking), slower up; during speech only down.
      if (p < n) this.noise[k] = 0.8 * n + 0.2 * p;
      else if (!speech) this.noise[k] = 0.9 * n + 0.1 * p;
    }
  }

  /** |FFT|² of the windowed history into `power` (band bins only). */
  private spectrum(): void {
    const { re, im } = this;
    for (let i = 0; i < FFT; i++) {
      const j = BITREV[i] ?? 0;
      re[j] = (this.history[i] ?? 0) * (WINDOW[i] ?? 0);
      im[j] = 0;
    }
    for (let size = 2; size <= FFT; size <<= 1) {
      const half = size >> 1;
      const step = FFT / size;
      for (let start = 0; start < FFT; start += size) {
        for (let j = 0; j < half; j++) {
          const c = COS[j * step] ?? 0;
          const s = SIN[j * step] ?? 0;
          const a = start + j;
          const b = a + half;
          const rb = re[b] ?? 0;
          const ib = im[b] ?? 0;
          const tr = rb * c - ib * s;
          const ti = rb * s + ib * c;
          const ra = re[a] ?? 0;
          const ia = im[a] ?? 0;
          re[b] = ra - tr;
          im[b] = ia - ti;
          re[a] = ra + tr;
          im[a] = ia + ti;
        }
      }
    }
    for (let k = 0; k < BINS; k++) {
      const r = re[LOW_BIN + k] ?? 0;
      const i = im[LOW_BIN + k] ?? 0;
      this.power[k] = r * r + i * i;
    }
  }
}

function popcount(x: number): number {
  let n = 0;
  for (let v = x; v; v &= v - 1) n++;
  return n;
}
