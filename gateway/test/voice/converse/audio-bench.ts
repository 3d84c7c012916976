/**
 * CPU cost of the converse audio path per second of audio, for the bench (never asserted in tests):
 * uplink Opus decode at 16 kHz + the speech detector, downlink Opus encode at 24 kHz (60 ms frames), and the
 * same codec calls on @evan/opus directly (the codec's own cost, without this project's wrappers).
 * Measured as process CPU time (user + system), so a busy machine inflates it less than wall time would.
 *
 *   npx tsx gateway/test/voice/converse/audio-bench.ts [seconds-of-audio]
 */
import { createRequire } from 'node:module';
import { Decoder, Encoder } from '@evan/opus';
import { createOpusDecoder, createOpusEncoder } from '../../../src/voice/converse/audio/opus.js';
import { resample } from '../../../src/voice/converse/audio/resample.js';
import { createSpeechDetector } from '../../../src/voice/converse/audio/vad.js';
import { parseWav } from '../../../src/voice/converse/audio/wav.js';
import { espeakWav } from '../../support/speech-servers.js';

export interface AudioCost {
  /** CPU milliseconds per second of audio. */
  decode16k: number;
  vad16k: number;
  encode24k: number;
  /** @evan/opus alone, same frames. */
  codecDecode16k: number;
  codecEncode24k: number;
  /** A 60 ms frame, in microseconds of CPU. */
  encodeFrameUs: number;
  decodeFrameUs: number;
}

function cpuMs(fn: () => void): number {
  const start = process.cpuUsage();
  fn();
  const d = process.cpuUsage(start);
  return (d.user + d.system) / 1000;
}

function tile(pcm: Int16Array, samples: number): Int16Array {
  const out = new Int16Array(samples);
  for (let off = 0; off < samples; off += pcm.length) out.set(pcm.subarray(0, Math.min(pcm.length, samples - off)), off);
  return out;
}

export async function measureAudioCost(seconds = 30): Promise<AudioCost> {
  const wav = parseWav(await espeakWav('Set the volume to forty. What is the weather like in Berlin today? It is sunny.'));
  const s16 = tile(resample(wav.samples, wav.sampleRate, 16_000), seconds * 16_000);
  const s24 = tile(resample(wav.samples, wav.sampleRate, 24_000), seconds * 24_000);
  const frames16: Int16Array[] = [];
  for (let off = 0; off + 960 <= s16.length; off += 960) frames16.push(s16.subarray(off, off + 960));
  const frames24: Int16Array[] = [];
  for (let off = 0; off + 1440 <= s24.length; off += 1440) frames24.push(s24.subarray(off, off + 1440));
  // Uplink packets as a device would send them (16 kHz, 60 ms).
  const upEnc = createOpusEncoder(16_000, 60);
  const packets = frames16.map((f) => upEnc.encode(f));
  upEnc.free();
  // Warm the JIT and the codec on a slice first.
  const warm = (n: number): void => {
    const d = createOpusDecoder(16_000);
    const v = createSpeechDetector();
    const e = createOpusEncoder(24_000, 60);
    for (let i = 0; i < n; i++) {
      v.push(d.decode(packets[i % packets.length] ?? new Uint8Array(0)));
      e.encode(frames24[i % frames24.length] ?? new Int16Array(1440));
    }
  };
  warm(50);

  const dec = createOpusDecoder(16_000);
  let decoded: Int16Array[] = [];
  const decodeMs = cpuMs(() => {
    decoded = packets.map((p) => dec.decode(p));
  });
  const vad = createSpeechDetector();
  const vadMs = cpuMs(() => {
    for (const f of decoded) vad.push(f);
  });
  const enc = createOpusEncoder(24_000, 60);
  const encodeMs = cpuMs(() => {
    for (const f of frames24) enc.encode(f);
  });
  const rawDec = new Decoder({ channels: 1, sample_rate: 16_000 });
  const codecDecodeMs = cpuMs(() => {
    for (const p of packets) rawDec.decode(p);
  });
  const rawEnc = new Encoder({ channels: 1, sample_rate: 24_000, application: 'voip' });
  rawEnc.ctl(4010, 5); // the same complexity as createOpusEncoder's default
  rawEnc.ctl(4024, 3001);
  const codecEncodeMs = cpuMs(() => {
    for (const f of frames24) rawEnc.encode(f);
  });
  const audioS = frames24.length * 0.06;
  return {
    decode16k: decodeMs / audioS,
    vad16k: vadMs / audioS,
    encode24k: encodeMs / audioS,
    codecDecode16k: codecDecodeMs / audioS,
    codecEncode24k: codecEncodeMs / audioS,
    encodeFrameUs: (encodeMs * 1000) / frames24.length,
    decodeFrameUs: (decodeMs * 1000) / packets.length,
  };
}

interface RawEncoder {
  ctl(cmd: number, arg: number): number;
  encode(pcm: Uint8Array): Uint8Array;
}
type RawEncoderClass = new (o: { channels: number; sample_rate: number; application: string }) => RawEncoder;

/**
 * µs of CPU per 60 ms frame at 24 kHz, in this process, for @evan/opus's native addon (what the encoder processes
 * load) and its WebAssembly build (what a worker_thread could use: the addon crashes there), at complexity 5 and 0.
 */
export async function encoderFrameCosts(seconds = 10): Promise<Record<'native5' | 'native0' | 'wasm5' | 'wasm0', number>> {
  const wav = parseWav(await espeakWav('Set the volume to forty. What is the weather like in Berlin today? It is sunny.'));
  const s24 = tile(resample(wav.samples, wav.sampleRate, 24_000), seconds * 24_000);
  const frames: Uint8Array[] = [];
  for (let off = 0; off + 1440 <= s24.length; off += 1440) frames.push(new Uint8Array(s24.buffer, s24.byteOffset + off * 2, 2880));
  const req = createRequire(import.meta.url);
  const builds = {
    native: req('@evan/opus/node/index.js') as { Encoder: RawEncoderClass },
    wasm: req('@evan/opus/wasm/index.js') as { Encoder: RawEncoderClass },
  };
  const out: Record<string, number> = {};
  // Twice each, interleaved, keeping the second (the first warms the JIT and the wasm tiers).
  for (let round = 0; round < 2; round++)
    for (const [name, lib] of Object.entries(builds))
      for (const complexity of [5, 0]) {
        const e = new lib.Encoder({ channels: 1, sample_rate: 24_000, application: 'voip' });
        e.ctl(4024, 3001);
        e.ctl(4010, complexity);
        out[`${name}${complexity}`] = (cpuMs(() => frames.forEach((f) => e.encode(f))) * 1000) / frames.length;
      }
  return out as Record<'native5' | 'native0' | 'wasm5' | 'wasm0', number>;
}

if (process.argv[1]?.endsWith('audio-bench.ts')) {
  const seconds = Number(process.argv[2] ?? 30);
  const r = await measureAudioCost(seconds);
  const f = (n: number): string => n.toFixed(2);
  console.log(`CPU ms per second of audio over ${seconds} s (60 ms frames):`);
  console.log(`  uplink  decode 16 kHz ${f(r.decode16k)} (codec alone ${f(r.codecDecode16k)}), VAD ${f(r.vad16k)}`);
  console.log(`  downlink encode 24 kHz ${f(r.encode24k)} (codec alone ${f(r.codecEncode24k)})`);
  console.log(`  per 60 ms frame: encode ${r.encodeFrameUs.toFixed(0)} µs, decode ${r.decodeFrameUs.toFixed(0)} µs`);
}
