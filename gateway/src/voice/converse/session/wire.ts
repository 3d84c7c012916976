import { z } from 'zod';

/**
 * The JSON a device's voice session speaks (firmware main/protocols/protocol.cc and application.cc
 * OnIncomingJson). In: `listen` (start with a mode, stop, detect with the wake word), `abort`, `goodbye`.
 * Out: `stt`, `llm` (an emotion the display knows), `tts` (start, sentence_start with text, stop), `alert`.
 */

export type ListenMode = 'manual' | 'auto' | 'realtime';

const Bounded = z.string().max(512);

export const ListenFrameSchema = z.discriminatedUnion('state', [
  z.object({ type: z.literal('listen'), state: z.literal('start'), mode: z.enum(['manual', 'auto', 'realtime']).catch('auto').default('auto') }),
  z.object({ type: z.literal('listen'), state: z.literal('stop') }),
  // The firmware recommends wake words of at most 10 characters; a longer text is cut, not refused.
  z.object({
    type: z.literal('listen'),
    state: z.literal('detect'),
    text: z
      .string()
      .transform((s) => s.slice(0, 256))
      .default(''),
  }),
]);

export const AbortFrameSchema = z.object({ type: z.literal('abort'), reason: Bounded.optional() });

export type VoiceInput =
  | { kind: 'listen_start'; mode: ListenMode }
  | { kind: 'listen_stop' }
  | { kind: 'detect'; text: string }
  | { kind: 'abort'; reason?: string | undefined }
  | { kind: 'goodbye' }
  | { kind: 'other' };

/** A device frame (already an object with a `type`) → what the voice session does with it. Never throws. */
export function readVoiceInput(frame: { type: string } & Record<string, unknown>): VoiceInput {
  if (frame.type === 'goodbye') return { kind: 'goodbye' };
  if (frame.type === 'abort') {
    const a = AbortFrameSchema.safeParse(frame);
    return { kind: 'abort', reason: a.success ? a.data.reason : undefined };
  }
  if (frame.type !== 'listen') return { kind: 'other' };
  const l = ListenFrameSchema.safeParse(frame);
  if (!l.success) return { kind: 'other' };
  if (l.data.state === 'start') return { kind: 'listen_start', mode: l.data.mode };
  if (l.data.state === 'stop') return { kind: 'listen_stop' };
  return { kind: 'detect', text: l.data.text };
}

/** The emotions every xiaozhi display knows (its emoji set; esp-hi's EmojiWidget maps the same names). */
export const EMOTIONS = [
  'neutral',
  'happy',
  'laughing',
  'funny',
  'sad',
  'angry',
  'crying',
  'loving',
  'embarrassed',
  'surprised',
  'shocked',
  'thinking',
  'winking',
  'cool',
  'relaxed',
  'delicious',
  'kissy',
  'confident',
  'sleepy',
  'silly',
  'confused',
] as const;
export type Emotion = (typeof EMOTIONS)[number];

const EMOJI_EMOTION: ReadonlyArray<[string, Emotion]> = [
  ['😂', 'laughing'],
  ['😆', 'laughing'],
  ['😄', 'happy'],
  ['😊', 'happy'],
  ['🙂', 'happy'],
  ['😀', 'happy'],
  ['😁', 'happy'],
  ['😢', 'sad'],
  ['😞', 'sad'],
  ['😭', 'crying'],
  ['😠', 'angry'],
  ['😡', 'angry'],
  ['😍', 'loving'],
  ['❤', 'loving'],
  ['😳', 'embarrassed'],
  ['😮', 'surprised'],
  ['😲', 'shocked'],
  ['🤔', 'thinking'],
  ['😉', 'winking'],
  ['😎', 'cool'],
  ['😌', 'relaxed'],
  ['😋', 'delicious'],
  ['😘', 'kissy'],
  ['😏', 'confident'],
  ['😴', 'sleepy'],
  ['🤪', 'silly'],
  ['😕', 'confused'],
];

/** The emotion of a reply: its first known emoji, else neutral. */
export function emotionOf(text: string): Emotion {
  let best: { at: number; e: Emotion } | undefined;
  for (const [emoji, e] of EMOJI_EMOTION) {
    const at = text.indexOf(emoji);
    if (at >= 0 && (!best || at < best.at)) best = { at, e };
  }
  return best?.e ?? 'neutral';
}

/** Text for speech and the display: emoji and markdown emphasis out (a synthesiser reads them aloud). */
export function speakable(text: string): string {
  return text
    .replace(/\p{Extended_Pictographic}\uFE0F?/gu, '')
    .replace(/[*_`#]+/g, '')
    .replace(/\s+/g, ' ')
    .trim();
}

export const toDevice = {
  stt: (sessionId: string, text: string) => ({ session_id: sessionId, type: 'stt', text }),
  llm: (sessionId: string, emotion: Emotion, text = '') => ({ session_id: sessionId, type: 'llm', text, emotion }),
  ttsStart: (sessionId: string) => ({ session_id: sessionId, type: 'tts', state: 'start' }),
  sentence: (sessionId: string, text: string) => ({ session_id: sessionId, type: 'tts', state: 'sentence_start', text }),
  ttsStop: (sessionId: string) => ({ session_id: sessionId, type: 'tts', state: 'stop' }),
  /** The firmware shows an alert only with all three strings (and ignores `type:"error"`). */
  alert: (sessionId: string, message: string, emotion: Emotion = 'sad') => ({ session_id: sessionId, type: 'alert', status: 'error', message, emotion }),
};
