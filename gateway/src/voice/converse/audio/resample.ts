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

export class Resampler {
  private readonly step: number;
  private readonly half: number;
  private readonly table: Float32Array;
  /** Pending input (history for the kernel and what is not consumed yet). */
  private buf: Float32Array;
  private len: number;
  /** Where the next output sample sits, in `buf` coordinates. */
  private pos: number;
  private inCount = 0;
  private outCount = 0;

  constructor(
    readonly from: number,
    readonly to: number,
  ) {
    if (!Number.isInteger(from) || !Number.isInteger(to) || from < 1000 || to < 1000 || from > 384_000 || to > 384_000) {
      throw new RangeError(`cannot resample ${from} Hz to ${to} Hz`);
    }
    this.step = from / to;
    // Downsampling lowers the cut-off to the output's Nyquist, which widens the kernel in input samples.
    const cutoff = Math.min(1, to / from) * PASS;
    this.half = Math.ceil(ZERO_CROSSINGS / cutoff);
    this.table = new Float32Array(this.half * RES + 2);
    for (let i = 0; i < this.table.length; i++) {
      const x = i / RES;
      const t = Math.min(1, x / this.half);
      const window = 0.42 + 0.5 * Math.cos(Math.PI * t) + 0.08 * Math.cos(2 * Math.PI * t);
      const arg = Math.PI * cutoff * x;
      this.table[i] = (x === 0 ? cutoff : (cutoff * Math.sin(arg)) / arg) * window;
    }
    // Start with `half` samples of silence before the first input, so output 0 aligns with input 0.
    this.buf = new Float32Array(4096 + 2 * this.half);
    this.len = this.half;
    this.pos = this.half;
  }

  /** Input samples in → the output samples they complete. */
  push(input: Int16Array): Int16Array {
    if (this.from === this.to) {
      this.inCount += input.length;
      this.outCount += input.length;
      return input.slice();
    }
    this.inCount += input.length;
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
    const count = Math.max(0, Math.ceil((limit - this.pos) / this.step));
    const out = new Int16Array(count);
    const { buf, table, half } = this;
    let n = 0;
    while (n < count && this.pos < limit) {
      const center = Math.floor(this.pos);
      const frac = this.pos - center;
      let acc = 0;
      for (let k = 1 - half; k <= half; k++) {
        const d = Math.abs(k - frac) * RES;
        const i = Math.floor(d);
        if (i >= table.length - 1) continue;
        const w = (table[i] ?? 0) + ((table[i + 1] ?? 0) - (table[i] ?? 0)) * (d - i);
        acc += (buf[center + k] ?? 0) * w;
      }
      out[n++] = acc > 32767 ? 32767 : acc < -32768 ? -32768 : Math.round(acc);
      this.pos += this.step;
    }
    this.outCount += n;
    // Keep `half` samples of history before the next output position.
    const drop = Math.max(0, Math.floor(this.pos) - half);
    if (drop > 0) {
      buf.copyWithin(0, drop, this.len);
      this.len -= drop;
      this.pos -= drop;
    }
    return n === count ? out : out.subarray(0, n);
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
