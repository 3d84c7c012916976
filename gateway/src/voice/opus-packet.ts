/**
 * The shape of an Opus packet (RFC 6716 §3.1–3.4), read from its TOC byte and frame-count byte: the one
 * check a MAC-less AES-128-CTR payload allows. A packet encrypted under another key (or none) decrypts to
 * random bytes, whose TOC describes the device's declared audio (mono, its frame duration) by chance
 * about once in 85 tries; every packet the device's encoder makes passes. Cheap: two or three bytes read, bounded by the frame count.
 */

/** Frame duration in microseconds per TOC config (0–11 SILK, 12–15 hybrid, 16–31 CELT). */
function frameMicros(config: number): number {
  if (config < 12) return [10_000, 20_000, 40_000, 60_000][config % 4]!;
  if (config < 16) return [10_000, 20_000][config % 2]!;
  return [2_500, 5_000, 10_000, 20_000][config % 4]!;
}
/** frameMicros of each of the 32 configs, worked out once. */
const FRAME_MICROS = Int32Array.from({ length: 32 }, (_, config) => frameMicros(config));

export interface OpusShape {
  readonly stereo: boolean;
  /** Audio the packet carries, in microseconds. */
  readonly durationMicros: number;
}

/** The one object opusShape answers with, refilled by every call. */
const shape = { stereo: false, durationMicros: 0 };

/**
 * The packet's shape, or undefined when it breaks the framing rules (R1–R7 of RFC 6716 §3.4). Read on every uplink
 * packet, so it allocates nothing: the answer is one object, refilled by the next call (read it at once, never keep it).
 */
export function opusShape(p: Uint8Array): OpusShape | undefined {
  const n = p.length;
  if (n < 1) return undefined;
  const toc = p[0]!;
  const frame = FRAME_MICROS[toc >> 3]!;
  const stereo = (toc & 0x04) !== 0;
  const code = toc & 0x03;
  let frames: number;
  if (code === 0) frames = 1;
  else if (code === 1) {
    if ((n - 1) % 2 !== 0) return undefined; // R3: two frames of one size
    frames = 2;
  } else if (code === 2) {
    const len = frameLength(p, 1);
    if (len < 0 || len > n - 1 - lengthBytes(p, 1)) return undefined; // R4
    frames = 2;
  } else {
    if (n < 2) return undefined; // R6/R7: a frame-count byte
    const fc = p[1]!;
    frames = fc & 0x3f;
    if (frames < 1 || frames * frame > 120_000) return undefined; // R5
    let i = 2;
    let padding = 0;
    if (fc & 0x40) {
      for (;;) {
        if (i >= n) return undefined;
        const b = p[i++]!;
        padding += b === 255 ? 254 : b;
        if (b !== 255) break;
      }
    }
    let rest = n - i - padding;
    if (rest < 0) return undefined;
    if (fc & 0x80) {
      // VBR: M − 1 frame lengths, then the frames; the lengths must fit what is left.
      for (let k = 0; k < frames - 1; k++) {
        const len = frameLength(p, i);
        if (len < 0) return undefined;
        const next = i + lengthBytes(p, i);
        rest -= next - i + len;
        i = next;
        if (rest < 0) return undefined;
      }
    } else if (rest % frames !== 0) return undefined; // R6: CBR frames of one size
  }
  shape.stereo = stereo;
  shape.durationMicros = frames * frame;
  return shape;
}

/** A frame length (§3.2.1) at `i`, or -1 when the packet ends before it does. */
function frameLength(p: Uint8Array, i: number): number {
  if (i >= p.length) return -1;
  const b = p[i]!;
  if (b < 252) return b;
  if (i + 1 >= p.length) return -1;
  return b + 4 * p[i + 1]!;
}

/** The bytes a frame length at `i` takes (one below 252, else two); frameLength has found it whole. */
function lengthBytes(p: Uint8Array, i: number): number {
  return p[i]! < 252 ? 1 : 2;
}

/** What the device said it sends (its hello's audio_params); a field it did not give is not checked. */
export interface DeclaredAudio {
  channels?: number | undefined;
  frameDurationMs?: number | undefined;
}

/** Whether a decrypted payload is an Opus packet of the declared audio. */
export function fitsDeclaredAudio(p: Uint8Array, declared: DeclaredAudio): boolean {
  const s = opusShape(p);
  if (!s) return false;
  if (declared.channels !== undefined && s.stereo !== declared.channels > 1) return false;
  return declared.frameDurationMs === undefined || s.durationMicros === declared.frameDurationMs * 1000;
}
