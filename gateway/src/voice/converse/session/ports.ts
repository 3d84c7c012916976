import type { Logger } from 'pino';
import type { OpusDecoder, OpusEncoder, ScheduledEncoder, SpeechDetector, SpeechRecognizer, SpeechSynthesizer } from '../contracts.js';
import type { ConverseMetrics, TurnOutcome } from '../metrics.js';

// The ports a conversation session is built from: the assistant's turns, the audio tools, where its messages go.

/** Uplink PCM rate: what the device sends (16 kHz Opus), the detector and the recogniser take. */
export const UPLINK_RATE = 16_000;

/** What the session sees of an assistant turn (adapter over assistant/assistant.ts, so tests can stand in). */
export interface TurnHandle {
  cancel(reason: string): void;
  confirm(callId: string, approve: boolean): boolean;
  /** The confirmation's question has been spoken: its window (assistant.confirmTimeoutMs) starts now. */
  asked(callId: string): boolean;
  /** Resolves with the answer; rejects with a GatewayError (model failures) or the turn's cancellation. */
  done: Promise<{ text: string; conversationId: string }>;
}

/** The assistant's turn events the session acts on (a subset of assistant/turn.ts TurnEvent). */
export type TurnSignal =
  | { type: 'text.delta'; text: string }
  | { type: 'confirmation.required'; callId: string; name: string; arguments: Record<string, unknown> }
  | { type: 'tool.call'; callId: string; name: string; arguments: Record<string, unknown> }
  | { type: 'tool.result'; callId: string; name: string; isError: boolean; durationMs: number }
  | { type: string };

export interface TurnRequest {
  text: string;
  deviceId: string;
  /** The device's conversation so far, when it has one. */
  conversationId?: string | undefined;
}

export interface TurnPort {
  start(req: TurnRequest, emit: (e: TurnSignal) => void): Promise<TurnHandle>;
}

export interface SessionAudio {
  decoder: OpusDecoder;
  encoder: OpusEncoder | ScheduledEncoder;
  detector: SpeechDetector;
  /** A complete utterance as a WAV file (16 kHz, 16-bit mono). */
  wav(pcm: Int16Array, sampleRate: number): Buffer;
  resample(pcm: Int16Array, from: number, to: number): Int16Array;
}

export interface SessionOut {
  json(message: object): void;
  frame(opus: Uint8Array, timestampMs: number): void;
}

export interface SessionLimits {
  frameMs: number;
  leadFrames: number;
  /** What the lead grows to once audio flows (default: leadFrames). */
  maxLeadFrames?: number;
  /** Items (frames and markers) queued for the device at most. */
  maxQueuedFrames: number;
  maxUtteranceMs: number;
  asrTimeoutMs: number;
  /** How much audio before speech is kept (the detector needs a moment to decide). */
  preRollMs: number;
  /** Quiet after speech that starts a speculative transcription; 0 or absent: never. */
  speculateAfterMs?: number;
  /** Characters of one answer spoken at most; absent: no bound. */
  maxAnswerChars?: number;
}

/** Milliseconds from the end of speech, per part (the bench and the console read them). */
export interface TurnTimings {
  /** The transcript was ready (0 or more: it is awaited from the end of speech). */
  asrMs?: number;
  /** The transcription was sent; negative when sent speculatively before the end of speech was confirmed. */
  asrStartMs?: number;
  llmFirstTokenMs?: number;
  firstSentenceMs?: number;
  firstAudioMs?: number;
  totalMs?: number;
}

export interface SessionEvents {
  transcript(text: string): void;
  tool(e: { phase: 'call' | 'result'; name: string; isError?: boolean; durationMs?: number }): void;
  reply(e: { text: string; outcome: TurnOutcome; timings: TurnTimings }): void;
}

export interface ConverseSessionDeps {
  sessionId: string;
  deviceId: string;
  out: SessionOut;
  audio: SessionAudio;
  asr: SpeechRecognizer;
  tts: SpeechSynthesizer;
  turns: TurnPort;
  language?: string | undefined;
  voice?: string | undefined;
  limits: SessionLimits;
  log: Logger;
  metrics: ConverseMetrics;
  events: SessionEvents;
  conversation: { get(): string | undefined; set(id: string): void };
  /** Whether an utterance or wake word may reach the recogniser or the model now (the device's rate); absent: always. */
  admit?: () => boolean;
  /** The downlink's clock (ms; default performance.now): when frames are due, and when the device has played them. */
  now?: () => number;
}
