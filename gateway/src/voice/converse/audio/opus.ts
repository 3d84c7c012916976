/**
 * Opus through @evan/opus: libopus as a prebuilt Node-API addon shipped inside the npm package (Linux/macOS/
 * Windows, x64/arm64), with a WebAssembly build of the same libopus as the fallback, so it installs from the
 * registry alone with no build and no download. (opusscript was tried first: its cached heap views detach when
 * the wasm memory grows, so a few hundred codecs in one process throw; see the tests.)
 */
import { Decoder, Encoder } from '@evan/opus';
import type { OpusDecoder, OpusEncoder } from '../contracts.js';

export const OPUS_RATES = [8000, 12000, 16000, 24000, 48000] as const;
export type OpusRate = (typeof OPUS_RATES)[number];
const FRAME_MS = [10, 20, 40, 60] as const;

/** OPUS_SET_COMPLEXITY / OPUS_SET_BITRATE / OPUS_SET_SIGNAL (opus_defines.h). */
const SET_COMPLEXITY = 4010;
const SET_BITRATE = 4002;
const SET_SIGNAL = 4024;
const SIGNAL_VOICE = 3001;

export function isOpusRate(rate: number): rate is OpusRate {
  return (OPUS_RATES as readonly number[]).includes(rate);
}

/** The codecs hold native or wasm memory that the garbage collector also frees; drop() frees it now where offered. */
function release(codec: object): void {
  const drop = (codec as { drop?: () => void }).drop;
  if (typeof drop === 'function') drop.call(codec);
}

/** A decoder for one device's uplink. A corrupt, empty or oversized packet decodes to no samples. */
export function createOpusDecoder(sampleRate: number): OpusDecoder {
  if (!isOpusRate(sampleRate)) throw new RangeError(`Opus cannot decode at ${sampleRate} Hz`);
  let dec: Decoder | undefined = new Decoder({ channels: 1, sample_rate: sampleRate });
  // 120 ms is the longest an Opus packet can hold; 1275 bytes × 3 the largest packet (RFC 6716 §3.2.5).
  const maxSamples = (sampleRate * 120) / 1000;
  return {
    sampleRate,
    decode(packet: Uint8Array): Int16Array {
      if (!dec || packet.length === 0 || packet.length > 3 * 1275) return new Int16Array(0);
      try {
        const bytes = dec.decode(packet);
        const samples = Math.min(maxSamples, bytes.length >> 1);
        // Copy: the addon reuses one output buffer across calls.
        const out = new Int16Array(samples);
        new Uint8Array(out.buffer).set(bytes.subarray(0, samples * 2));
        return out;
      } catch {
        return new Int16Array(0);
      }
    },
    free() {
      if (dec) release(dec);
      dec = undefined;
    },
  };
}

export interface OpusEncoderOptions {
  /** 0-10; libopus's default is 10. 5 costs about half as much CPU for speech with no audible loss at 24 kHz. */
  complexity?: number;
  /** Bits per second; default: libopus's choice for the rate (about 32 kbit/s at 24 kHz mono VOIP). */
  bitrate?: number;
}

/** An encoder for one device's downlink: exactly `frameSamples` samples in, one packet out. */
export function createOpusEncoder(sampleRate: number, frameMs: number, opts: OpusEncoderOptions = {}): OpusEncoder {
  if (!isOpusRate(sampleRate)) throw new RangeError(`Opus cannot encode at ${sampleRate} Hz`);
  if (!(FRAME_MS as readonly number[]).includes(frameMs)) throw new RangeError(`Opus frames of ${frameMs} ms are not supported here`);
  let enc: Encoder | undefined = new Encoder({ channels: 1, sample_rate: sampleRate, application: 'voip' });
  enc.ctl(SET_SIGNAL, SIGNAL_VOICE);
  enc.ctl(SET_COMPLEXITY, Math.max(0, Math.min(10, Math.round(opts.complexity ?? 5))));
  if (opts.bitrate !== undefined) enc.ctl(SET_BITRATE, Math.max(6000, Math.min(510_000, Math.round(opts.bitrate))));
  const frameSamples = (sampleRate * frameMs) / 1000;
  return {
    sampleRate,
    frameMs,
    frameSamples,
    encode(frame: Int16Array): Uint8Array {
      if (!enc) throw new Error('Opus encoder already freed');
      if (frame.length !== frameSamples) throw new RangeError(`an Opus frame is ${frameSamples} samples, got ${frame.length}`);
      // Copy: the addon reuses one output buffer across calls.
      return Uint8Array.from(enc.encode(frame));
    },
    setComplexity(complexity: number) {
      enc?.ctl(SET_COMPLEXITY, Math.max(0, Math.min(10, Math.round(complexity))));
    },
    free() {
      if (enc) release(enc);
      enc = undefined;
    },
  };
}
