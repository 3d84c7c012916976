import type { Speaker } from './speaker.js';
import type { TurnHandle, TurnTimings } from './ports.js';

/** When the transcription was sent (negative: speculatively, before the end of speech) and when it was ready. */
export interface AsrMarks {
  startMs: number;
  readyMs: number;
}

/** What a conversation holds of the turn it is answering (conversation.ts): one at a time per device. */
export interface ActiveTurn {
  ac: AbortController;
  handle?: TurnHandle;
  speaker: Speaker;
  /** The confirmation the next utterance answers (its question spoken, its window open). */
  confirming?: string | undefined;
  /** Questions asked one at a time (questions.ts): the last one asked, settled once it was answered or its window closed (or will never be). */
  questions?: Promise<void>;
  /** Called when the utterance answering `confirming` was heard, or its window closed: the next question may be asked. */
  answered?: (() => void) | undefined;
  spokenText: string[];
  marks: { speechEnd: number; llmFirst?: number; firstSentence?: number; firstAudio?: number; asr?: AsrMarks };
}

/** The turn's timings for its reply event, each from the end of speech (`now`: when it ended). */
export function timingsOf(m: ActiveTurn['marks'], now: number): TurnTimings {
  const since = (t: number | undefined) => (t === undefined ? undefined : Math.round(t - m.speechEnd));
  const timings: TurnTimings = {};
  if (m.asr) {
    timings.asrMs = Math.round(m.asr.readyMs);
    timings.asrStartMs = Math.round(m.asr.startMs);
  }
  const parts: Array<[keyof TurnTimings, number | undefined]> = [
    ['llmFirstTokenMs', since(m.llmFirst)],
    ['firstSentenceMs', since(m.firstSentence)],
    ['firstAudioMs', since(m.firstAudio)],
    ['totalMs', since(now)],
  ];
  for (const [k, v] of parts) if (v !== undefined) timings[k] = v;
  return timings;
}

/** The utterance's PCM chunks as one buffer of `samples` samples. */
export function concat(chunks: Int16Array[], samples: number): Int16Array {
  const out = new Int16Array(samples);
  let at = 0;
  for (const c of chunks) {
    out.set(c, at);
    at += c.length;
  }
  return out;
}
