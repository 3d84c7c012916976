/**
 * WAV (RIFF/WAVE, PCM) in both directions: `pcmToWav` writes the canonical 44-byte header with exact sizes (what
 * the transcription APIs get); `parseWav` reads a whole file; `WavStreamParser` reads a WAV arriving in chunks
 * (a speech API's or a program's stdout), where the header's sizes may be unknown (0 or 0xFFFFFFFF).
 * Only 16-bit PCM is accepted (what every speech engine here writes); any channel count is mixed to mono.
 */
import { endianness } from 'node:os';
import type { Pcm } from '../contracts.js';

const HEADER_BYTES = 44;
const LITTLE_ENDIAN = endianness() === 'LE';
/** A header claiming more than this is refused (2^31: no utterance or sentence comes near). */
const MAX_DATA_BYTES = 0x7fff_ffff;
/** Chunks before `data` (LIST, fact, …) are skipped up to this many bytes in total. */
const MAX_SKIPPED_BYTES = 64 * 1024;

export class WavError extends Error {
  override readonly name = 'WavError';
}

/** A canonical 16-bit mono PCM WAV of `samples` at `sampleRate`, RIFF and data sizes exact. */
export function pcmToWav(samples: Int16Array, sampleRate: number): Buffer {
  const dataBytes = samples.length * 2;
  const out = Buffer.alloc(HEADER_BYTES + dataBytes);
  out.write('RIFF', 0, 'ascii');
  out.writeUInt32LE(36 + dataBytes, 4);
  out.write('WAVE', 8, 'ascii');
  out.write('fmt ', 12, 'ascii');
  out.writeUInt32LE(16, 16);
  out.writeUInt16LE(1, 20); // PCM
  out.writeUInt16LE(1, 22); // mono
  out.writeUInt32LE(sampleRate, 24);
  out.writeUInt32LE(sampleRate * 2, 28); // byte rate
  out.writeUInt16LE(2, 32); // block align
  out.writeUInt16LE(16, 34);
  out.write('data', 36, 'ascii');
  out.writeUInt32LE(dataBytes, 40);
  // Little-endian hosts (every target) copy the samples as they are; writing each one is the endian-proof way.
  if (LITTLE_ENDIAN) Buffer.from(samples.buffer, samples.byteOffset, dataBytes).copy(out, HEADER_BYTES);
  else for (let i = 0; i < samples.length; i++) out.writeInt16LE(samples[i] ?? 0, HEADER_BYTES + i * 2);
  return out;
}

interface WavFormat {
  sampleRate: number;
  channels: number;
}

/** A whole WAV file → mono PCM. Throws WavError on anything but 16-bit PCM; a truncated data chunk is read as far as it goes. */
export function parseWav(file: Uint8Array, maxBytes = 64 * 1024 * 1024): Pcm {
  if (file.length > maxBytes) throw new WavError(`WAV larger than ${maxBytes} bytes`);
  const parser = new WavStreamParser();
  const first = parser.push(file);
  const format = parser.format;
  if (!format) throw new WavError(parser.problem ?? 'incomplete WAV header');
  return { samples: first, sampleRate: format.sampleRate };
}

/**
 * Incremental WAV reader: push bytes as they come, get mono samples out. The header is validated once complete;
 * the data chunk's size is honoured when it is known and ignored when it is 0 or 0xFFFFFFFF (streamed WAV).
 */
export class WavStreamParser {
  format: WavFormat | undefined;
  /** Why the input was refused (set when push throws). */
  problem: string | undefined;
  private head = Buffer.alloc(0);
  private remaining = Infinity;
  private carry: Buffer = Buffer.alloc(0);

  /** Bytes in → mono samples out (possibly none yet). Throws WavError when the header is not 16-bit PCM. */
  push(chunk: Uint8Array): Int16Array {
    let data: Buffer;
    if (!this.format) {
      this.head = Buffer.concat([this.head, chunk]);
      const start = this.readHeader();
      if (start === undefined) return new Int16Array(0);
      data = this.head.subarray(start);
      this.head = Buffer.alloc(0);
    } else {
      data = Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength);
    }
    if (this.remaining !== Infinity) {
      data = data.subarray(0, Math.min(data.length, this.remaining));
      this.remaining -= data.length;
    }
    return this.toMono(data);
  }

  private fail(problem: string): never {
    this.problem = problem;
    throw new WavError(problem);
  }

  /** The offset where sample data starts, once the header is all there; undefined while more bytes are needed. */
  private readHeader(): number | undefined {
    const h = this.head;
    if (h.length < 12) return undefined;
    if (h.toString('ascii', 0, 4) !== 'RIFF' || h.toString('ascii', 8, 12) !== 'WAVE') this.fail('not a RIFF/WAVE file');
    let pos = 12;
    let fmt: WavFormat | undefined;
    for (;;) {
      if (pos > 12 + MAX_SKIPPED_BYTES) this.fail('too many chunks before the data');
      if (h.length < pos + 8) return undefined;
      const id = h.toString('ascii', pos, pos + 4);
      const size = h.readUInt32LE(pos + 4);
      if (id === 'data') {
        if (!fmt) this.fail('data chunk before fmt');
        this.format = fmt;
        const unknown = size === 0 || size === 0xffffffff;
        if (!unknown && size > MAX_DATA_BYTES) this.fail('data chunk too large');
        this.remaining = unknown ? Infinity : size;
        return pos + 8;
      }
      if (size > MAX_SKIPPED_BYTES) this.fail(`chunk ${JSON.stringify(id)} too large`);
      const padded = size + (size & 1);
      if (h.length < pos + 8 + padded) return undefined;
      if (id === 'fmt ') {
        if (size < 16) this.fail('fmt chunk too short');
        const tag = h.readUInt16LE(pos + 8);
        const channels = h.readUInt16LE(pos + 10);
        const sampleRate = h.readUInt32LE(pos + 12);
        const bits = h.readUInt16LE(pos + 22);
        // 0xFFFE (extensible) is accepted when its sub-format is PCM, which is what 16-bit tools write.
        const pcm = tag === 1 || (tag === 0xfffe && size >= 40 && h.readUInt16LE(pos + 8 + 24) === 1);
        if (!pcm || bits !== 16) this.fail(`only 16-bit PCM WAV is supported (format ${tag}, ${bits} bits)`);
        if (channels < 1 || channels > 8) this.fail(`unsupported channel count ${channels}`);
        if (sampleRate < 4000 || sampleRate > 192_000) this.fail(`unsupported sample rate ${sampleRate}`);
        fmt = { sampleRate, channels };
      }
      pos += 8 + padded;
    }
  }

  private toMono(data: Buffer): Int16Array {
    const channels = this.format?.channels ?? 1;
    const frameBytes = 2 * channels;
    const bytes = this.carry.length ? Buffer.concat([this.carry, data]) : data;
    const frames = Math.floor(bytes.length / frameBytes);
    this.carry = Buffer.from(bytes.subarray(frames * frameBytes));
    const out = new Int16Array(frames);
    for (let f = 0; f < frames; f++) {
      let sum = 0;
      for (let c = 0; c < channels; c++) sum += bytes.readInt16LE(f * frameBytes + c * 2);
      out[f] = Math.round(sum / channels);
    }
    return out;
  }
}
