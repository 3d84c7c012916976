import { encodeBinaryFrame } from '@voxgate/protocol';
import type { ReferenceDevice } from '../../../test/support/reference-device.js';
import type { UdpDeviceChannel } from '../../../test/support/udp-device.js';
import type { OpusDecoder, OpusEncoder, SpeechDetector, VadState } from '../../src/voice/converse/contracts.js';
import type { ConverseKit } from '../../src/voice/converse/converse.js';

/**
 * The device's side of a conversation's audio: uplink frames at the firmware's 60 ms, and pacing checks; and the
 * stand-in Opus packets of the e2e tests with the codec that reads them (standInCodec).
 */

export const FRAME_MS = 60;

export interface Uplink {
  send(opus: Buffer, timestampMs: number): void;
}

/** Over the device's WebSocket, framed in its binary protocol (as websocket_protocol.cc SendAudio does). */
export function wsUplink(d: ReferenceDevice, version: 1 | 2 | 3): Uplink {
  return { send: (opus, ts) => d.sendRaw(encodeBinaryFrame(version, { payload: opus, timestampMs: ts }), { binary: true }) };
}

/** Over the UDP channel (mqtt_protocol.cc SendAudio: sealed with the session key, sequence advanced). */
export function udpUplink(ch: UdpDeviceChannel): Uplink {
  return { send: (opus, ts) => ch.sendAudio(opus, ts) };
}

/** Send frames at real time (one per 60 ms, drift-corrected), as the device's audio task does. */
export async function streamFrames(up: Uplink, frames: readonly Buffer[], signal?: AbortSignal): Promise<void> {
  const t0 = performance.now();
  for (let i = 0; i < frames.length; i++) {
    if (signal?.aborted) return;
    const wait = t0 + i * FRAME_MS - performance.now();
    if (wait > 0) await new Promise((r) => setTimeout(r, wait));
    up.send(frames[i]!, i * FRAME_MS);
  }
}

/**
 * The most frames the device held unplayed when a frame arrived: it plays each frame for 60 ms from when it
 * has it (a gap means it ran dry and starts again from the next arrival). The firmware's queue holds 40.
 */
export function maxFramesAhead(arrivals: readonly number[]): number {
  let playedUntil = 0;
  let max = 0;
  for (const at of arrivals) {
    playedUntil = Math.max(playedUntil, at) + FRAME_MS;
    max = Math.max(max, Math.round((playedUntil - at) / FRAME_MS));
  }
  return max;
}

/** TOC 0x58 (SILK wideband, one 60 ms frame, mono): the UDP path checks a packet is the Opus the hello declared. */
export const TOC_60MS = 0x58;
export const pcmBytes = (p: Int16Array) => Buffer.from(p.buffer, p.byteOffset, p.byteLength);
/** A stand-in Opus packet: the TOC byte, then the frame's PCM (standInCodec's decoder reads it back). */
export const packetOf = (p: Int16Array) => Buffer.concat([Buffer.of(TOC_60MS), pcmBytes(p)]);

/**
 * The codec and speech detector of the e2e tests' stand-in kit, for packets made by packetOf, so a test needs no
 * codec in the loop: the decoder returns the PCM after the TOC byte; the encoder makes a TOC byte and the frame's
 * first 32 bytes; the detector hears speech in any non-zero sample and the end after 5 silent frames (of 60 ms; with
 * `quietMs`, it reports its quiet run as the real one does).
 */
export function standInCodec(o: { quietMs?: boolean } = {}): Pick<ConverseKit, 'decoder' | 'encoder' | 'detector'> {
  const decoder = (sampleRate: number): OpusDecoder => ({
    sampleRate,
    decode: (packet) => {
      const b = Buffer.from(packet).subarray(1); // after the TOC byte
      return new Int16Array(b.buffer.slice(b.byteOffset, b.byteOffset + (b.byteLength & ~1)));
    },
    free() {},
  });
  const encoder = (sampleRate: number, frameMs: number): OpusEncoder => ({
    sampleRate,
    frameMs,
    frameSamples: (sampleRate * frameMs) / 1000,
    encode: (f) => Uint8Array.of(0xfc, ...Buffer.from(f.buffer, f.byteOffset, 32)),
    free() {},
  });
  const detector = (): SpeechDetector => {
    let speaking = false;
    let quiet = 0;
    const d: SpeechDetector = {
      push(pcm): VadState {
        if (pcm.some((s) => s !== 0)) {
          speaking = true;
          quiet = 0;
          return 'speech';
        }
        return !speaking ? 'silence' : ++quiet >= 5 ? 'end' : 'speech';
      },
      reset() {
        speaking = false;
        quiet = 0;
      },
    };
    // The real detector reports its quiet run, which is what lets a conversation transcribe speculatively.
    if (o.quietMs) Object.defineProperty(d, 'quietMs', { get: () => quiet * 60 });
    return d;
  };
  return { decoder, encoder, detector };
}
