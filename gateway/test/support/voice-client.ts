import { encodeBinaryFrame } from '@voxgate/protocol';
import type { ReferenceDevice } from '../../../test/support/reference-device.js';
import type { UdpDeviceChannel } from '../../../test/support/udp-device.js';

/** The device's side of a conversation's audio: uplink frames at the firmware's 60 ms, and pacing checks. */

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
