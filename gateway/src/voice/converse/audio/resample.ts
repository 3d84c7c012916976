/**
 * Sample-rate conversion of 16-bit mono PCM (a command's 22.05 kHz speech to the downlink's 24 or 16 kHz, a
 * speech API's 24 kHz to a 16 kHz downlink): a streaming windowed-sinc (Blackman) interpolator from a kernel
 * table. Written here rather than taken from a library because the candidates measured worse for this use:
 * @alexanderolsen/libsamplerate-js creates a 25 MB WebAssembly memory per converter (and is async to create),
 * @echogarden/speex-resampler-wasm exposes only raw C pointers, wave-resampler only converts whole buffers.
 * Quality: ~16 zero crossings each side, pass band to 0.92 of the lower Nyquist; plenty for speech into Opus.
 */

/** Kernel table resolution: entries per input sample of distance (linear interpolation between them). */
const RES = 128;
const ZERO_CROSSINGS = 16;
const PASS = 0.92;
/** Up to this many output phases (the reduced output rate), each phase's taps are computed once. */
const MAX_PHASES = 1024;

function gcd(a: number, b: number): number {
  return b === 0 ? a : gcd(b, a % b);
}

export class Resampler {
  /** Output position = input index `ipos` + `phase`/L; each output advances it by M/L input samples (exact). */
  private readonly L: number;
  private readonly M: number;
  private readonly half: number;
  private readonly taps: number;
  /** The kernel at RES points per input sample of distance (the general case). */
  private readonly table: Float32Array;
  /** Per output phase, its taps in order (when L ≤ MAX_PHASES). */
  private readonly phases: Float32Array | undefined;
  /** Pending input (history for the kernel and what is not consumed yet). */
  private buf: Float32Array;
  private len: number;
  private ipos: number;
  private phase = 0;
  private inCount = 0;
  private outCount = 0;

  constructor(
    readonly from: number,
    readonly to: number,
  ) {
    if (!Number.isInteger(from) || !Number.isInteger(to) || from < 1000 || to < 1000 || from > 384_000 || to > 384_000) {
      throw new RangeError(`cannot resample ${from} Hz to ${to} Hz`);
    }
    const g = gcd(from, to);
    this.L = to / g;
    this.M = from / g;
    // Downsampling lowers the cut-off to the output's Nyquist, which widens the kernel in input samples.
    const cutoff = Math.min(1, to / from) * PASS;
    this.half = Math.ceil(ZERO_CROSSINGS / cutoff);
    this.taps = 2 * this.half;
    const kernel = (x: number): number => {
      const t = Math.min(1, x / this.half);
      const window = 0.42 + 0.5 * Math.cos(Math.PI * t) + 0.08 * Math.cos(2 * Math.PI * t);
      const arg = Math.PI * cutoff * x;
      return (x === 0 ? cutoff : (cutoff * Math.sin(arg)) / arg) * window;
    };
    this.table = Float32Array.from({ length: this.half * RES + 2 }, (_, i) => kernel(i / RES));
    if (this.L <= MAX_PHASES) {
      this.phases = new Float32Array(this.L * this.taps);
      for (let p = 0; p < this.L; p++) {
        for (let j = 0; j < this.taps; j++) this.phases[p * this.taps + j] = kernel(Math.abs(1 - this.half + j - p / this.L));
      }
    }
    // Start with `half` samples of silence before the first input, so output 0 aligns with input 0.
    this.buf = new Float32Array(4096 + 2 * this.half);
    this.len = this.half;
    this.ipos = this.half;
  }

  /** Input samples in → the output samples they complete. */
  push(input: Int16Array): Int16Array {
    this.inCount += input.length;
    if (this.from === this.to) {
      this.outCount += input.length;
      return input.slice();
    }
    this.append(input);
    return this.drain(this.len - this.half);
  }

  /** The rest: outputs up to the end of the input, as if silence followed. */
  flush(): Int16Array {
    if (this.from === this.to) return new Int16Array(0);
    const total = Math.round((this.inCount * this.to) / this.from);
    this.append(new Int16Array(this.half + 1));
    const rest = this.drain(this.len - this.half);
    return rest.subarray(0, Math.max(0, total - (this.outCount - rest.length)));
  }

  private append(input: Int16Array): void {
    if (this.len + input.length > this.buf.length) {
      const grown = new Float32Array(Math.max(this.buf.length * 2, this.len + input.length));
      grown.set(this.buf.subarray(0, this.len));
      this.buf = grown;
    }
    for (let i = 0; i < input.length; i++) this.buf[this.len + i] = input[i] ?? 0;
    this.len += input.length;
  }

  /** Outputs while the kernel's right side (up to `limit`) is available; then drops consumed input. */
  private drain(limit: number): Int16Array {
    const { buf, table, phases, half, taps, L, M } = this;
    const out = new Int16Array(Math.max(0, Math.ceil(((limit - this.ipos) * L - this.phase) / M)));
    for (let n = 0; n < out.length; n++) {
      const base = this.ipos - half + 1;
      let acc = 0;
      if (phases) {
        const off = this.phase * taps;
        // Indices are in range by construction (see push/flush); `!` keeps the hot loop free of checks.
        for (let j = 0; j < taps; j++) acc += buf[base + j]! * phases[off + j]!;
      } else {
        const frac = this.phase / L;
        for (let j = 0; j < taps; j++) {
          const d = Math.abs(1 - half + j - frac) * RES;
          const i = Math.floor(d);
          if (i >= table.length - 1) continue;
          const w = (table[i] ?? 0) + ((table[i + 1] ?? 0) - (table[i] ?? 0)) * (d - i);
          acc += (buf[base + j] ?? 0) * w;
        }
      }
      out[n] = acc > 32767 ? 32767 : acc < -32768 ? -32768 : Math.round(acc);
      this.phase += M;
      this.ipos += Math.floor(this.phase / L);
      this.phase %= L;
    }
    this.outCount += out.length;
    // Keep `half` samples of history before the next output position.
    const drop = this.ipos - half;
    if (drop > 0) {
      buf.copyWithin(0, drop, this.len);
      this.len -= drop;
      this.ipos -= drop;
    }
    return out;
  }
}

/** Whole-buffer conversion. */
export function resample(pcm: Int16Array, from: number, to: number): Int16Array {
  if (from === to) return pcm;
  const r = new Resampler(from, to);
  const head = r.push(pcm);
  const tail = r.flush();
  const out = new Int16Array(head.length + tail.length);
  out.set(head);
  out.set(tail, head.length);
  return out;
}
