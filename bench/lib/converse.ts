/**
 * Devices holding a conversation with the gateway (voice.mode "converse"), for the bench: reference devices
 * (test/support/reference-device.ts: they answer the gateway's MCP set-up as the firmware does) that stream
 * real Opus speech at 60 ms frames in `auto` mode and record when each answer frame arrives.
 */
import { createOpusEncoder } from '../../gateway/src/voice/converse/audio/opus.js';
import { resample } from '../../gateway/src/voice/converse/audio/resample.js';
import { parseWav } from '../../gateway/src/voice/converse/audio/wav.js';
import { espeakWav } from '../../gateway/test/support/speech-servers.js';
import { FRAME_MS, streamFrames, wsUplink } from '../../gateway/test/support/voice-client.js';
import { ReferenceDevice } from '../../test/support/reference-device.js';

export interface Utterance {
  frames: Buffer[];
  /** Index of the first frame after the speech clip (espeak-ng's own trailing silence included; room noise follows). */
  speechEndFrame: number;
  /** Index of the frame holding the clip's last voiced sample: where the speaker stops talking. */
  lastVoicedFrame: number;
}

/** Room noise: low and steady, not zeros. */
function noise(samples: number): Int16Array {
  const out = new Int16Array(samples);
  let seed = 12345;
  for (let i = 0; i < out.length; i++) {
    seed = (seed * 1103515245 + 12345) & 0x7fffffff;
    out[i] = ((seed % 61) - 30) | 0;
  }
  return out;
}

/** espeak-ng speech at 16 kHz between 400 ms and 1.5 s of room noise, as 60 ms Opus frames. */
export async function spokenUtterance(text: string): Promise<Utterance> {
  const wav = parseWav(await espeakWav(text));
  const voice = resample(wav.samples, wav.sampleRate, 16_000);
  const before = noise(16 * 400);
  const after = noise(16 * 1500);
  const all = new Int16Array(before.length + voice.length + after.length);
  all.set(before);
  all.set(voice, before.length);
  all.set(after, before.length + voice.length);
  const enc = createOpusEncoder(16_000, FRAME_MS);
  const frames: Buffer[] = [];
  for (let i = 0; i + 960 <= all.length; i += 960) frames.push(Buffer.from(enc.encode(all.subarray(i, i + 960))));
  enc.free();
  let last = voice.length - 1;
  while (last > 0 && Math.abs(voice[last]!) < VOICED) last--;
  return { frames, speechEndFrame: Math.ceil((before.length + voice.length) / 960), lastVoicedFrame: Math.floor((before.length + last) / 960) };
}

/** A sample this loud (of 32 767) is voice, not espeak-ng's trailing silence. */
const VOICED = 300;

/**
 * How the device ends its utterance: `auto` streams on (room noise) until Voxgate detects the end of speech;
 * `manual` (push to talk) sends `listen stop` right after the frame with the last voiced sample.
 */
export type ListenMode = 'auto' | 'manual';

export interface TurnObservation {
  /**
   * From the end of speech to the first answer frame, ms. The end of speech: auto, when the frame holding the
   * last voiced sample was sent; manual, when `listen stop` was sent (right after that frame).
   */
  firstAudioMs: number;
  framesDown: number;
  /** Answer frames that came more than one 60 ms period after the device's playback ran out. */
  lateFrames: number;
  /** The most frames the device held unplayed (its decode queue holds 40). */
  maxAhead: number;
  /** Each late frame: its index in the answer, when it arrived (performance.now()), how long the device had been dry. */
  late: LateFrame[];
  /** When the answer's first frame arrived (performance.now()). */
  firstAt: number;
}

export interface LateFrame {
  index: number;
  at: number;
  dryMs: number;
}

export class ConversationDevice {
  private readonly d: ReferenceDevice;

  constructor(deviceId: string) {
    this.d = new ReferenceDevice({ deviceId });
  }

  connect(wsUrl: string): Promise<void> {
    return this.d.connectWebSocket(wsUrl, { protocolVersion: 1 });
  }

  /** One turn: listen, the utterance at real time, then wait for `tts stop`. */
  async turn(u: Utterance, timeoutMs: number, mode: ListenMode = 'auto'): Promise<TurnObservation> {
    const d = this.d;
    const framesBefore = d.audioReceivedAt.length;
    const stopsBefore = this.stops();
    d.sendRaw(JSON.stringify({ session_id: d.sessionId, type: 'listen', state: 'start', mode }), {});
    let speechEndAt = 0;
    const up = wsUplink(d, 1);
    const frames = mode === 'manual' ? u.frames.slice(0, u.lastVoicedFrame + 1) : u.frames;
    await streamFrames({ send: (opus, ts) => (up.send(opus, ts), ts === u.lastVoicedFrame * FRAME_MS && (speechEndAt = performance.now())) }, frames);
    if (mode === 'manual') {
      d.sendRaw(JSON.stringify({ session_id: d.sessionId, type: 'listen', state: 'stop' }), {});
      speechEndAt = performance.now();
    }
    const end = Date.now() + timeoutMs;
    while (this.stops() === stopsBefore) {
      if (Date.now() > end) throw new Error(`device ${d.deviceId}: no answer within ${timeoutMs} ms`);
      await new Promise((r) => setTimeout(r, 20));
    }
    const arrivals = d.audioReceivedAt.slice(framesBefore);
    if (arrivals.length === 0) throw new Error(`device ${d.deviceId}: the answer had no audio`);
    return { firstAudioMs: arrivals[0]! - speechEndAt, framesDown: arrivals.length, firstAt: arrivals[0]!, ...playback(arrivals) };
  }

  close(): void {
    this.d.terminate();
  }

  private stops(): number {
    return this.d.received.filter((f) => f['type'] === 'tts' && f['state'] === 'stop').length;
  }
}

/** The device plays each frame for 60 ms from when it has it; a frame arriving after playback ran dry is late. */
function playback(arrivals: readonly number[]): { lateFrames: number; maxAhead: number; late: LateFrame[] } {
  let playedUntil = 0;
  const late: LateFrame[] = [];
  let maxAhead = 0;
  arrivals.forEach((at, index) => {
    if (playedUntil > 0 && at - playedUntil > FRAME_MS) late.push({ index, at, dryMs: at - playedUntil });
    playedUntil = Math.max(playedUntil, at) + FRAME_MS;
    maxAhead = Math.max(maxAhead, Math.round((playedUntil - at) / FRAME_MS));
  });
  return { lateFrames: late.length, maxAhead, late };
}
