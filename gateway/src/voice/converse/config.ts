import { z } from 'zod';
import { Bool, Tenant } from '../../config/fields.js';
import { AsrConfigSchema, TtsConfigSchema, type AsrConfig, type TtsConfig } from './providers/schema.js';

/**
 * The `voice` section's additions for mode "converse" (spread into the section's object in config.ts),
 * and their environment variables. The provider blocks follow the assistant's names (baseUrl, apiKeyEnv).
 */

export const VOICE_MODES = ['off', 'relay', 'converse'] as const;
export type VoiceMode = (typeof VOICE_MODES)[number];
export const VoiceModeSchema = z.enum(VOICE_MODES);

const Ms = (def: number, max = 600_000) => z.coerce.number().int().min(1).max(max).default(def);
const Name = z.string().min(1).max(256);
const MacRe = /^[0-9a-f]{2}(:[0-9a-f]{2}){5}$/;

/** Who a device talks to: per tenant (its devices listed here until devices carry a tenant themselves). */
export const VoiceTenantSchema = z.strictObject({
  mode: VoiceModeSchema.optional(),
  /** Device ids (MAC, lowercase with colons) of this tenant. */
  devices: z.array(z.string().toLowerCase().regex(MacRe)).max(100_000).default([]),
  /** Who the assistant is for these devices (added to the system prompt). */
  persona: z.string().max(4000).optional(),
  /** Recognition language and the language answers are given in (ISO 639-1, e.g. "en", "zh"). */
  language: z.string().min(2).max(16).optional(),
  /** The synthesiser's voice for these devices. */
  voice: Name.optional(),
});

export const converseConfigShape = {
  asr: AsrConfigSchema.prefault({}),
  tts: TtsConfigSchema.prefault({}),
  /** One of assistant.models; default: the assistant's default model. */
  model: z.string().min(1).max(128).optional(),
  /** The downlink Opus sample rate announced in the server hello (the firmware resamples to its codec). */
  sampleRate: z.coerce
    .number()
    .int()
    .refine((r) => [8000, 12_000, 16_000, 24_000, 48_000].includes(r), 'an Opus rate: 8000, 12000, 16000, 24000 or 48000')
    .default(24_000),
  persona: z.string().max(4000).optional(),
  language: z.string().min(2).max(16).optional(),
  tenants: z.record(Tenant, VoiceTenantSchema).default({}),
  converse: z
    .strictObject({
      /** An utterance longer than this ends there and is answered. */
      maxUtteranceMs: Ms(15_000, 60_000),
      /** Frames sent ahead of the device's playback (its queue holds 40). */
      leadFrames: z.coerce.number().int().min(1).max(30).default(5),
      /** What the lead grows to while audio flows (twice real time until there), to ride out a busy moment. */
      maxLeadFrames: z.coerce.number().int().min(1).max(30).default(15),
      /** Frames and markers queued for one device at most (synthesis waits beyond it). */
      maxQueuedFrames: z.coerce.number().int().min(8).max(2000).default(200),
      preRollMs: Ms(600, 5000),
      /** The downlink Opus encoder's complexity (0-10): lower costs less CPU per frame at some quality. */
      encoderComplexity: z.coerce.number().int().min(0).max(10).default(5),
      /**
       * Processes that encode the downlink (earliest deadline first across devices); 0: the main thread, in short slices.
       * Default: the cores available less one (at least 1, at most 4).
       */
      encoderProcesses: z.coerce.number().int().min(0).max(16).optional(),
      /** Lower the complexity while frames are encoded after the device needed them; restore it once they are not. */
      adaptiveComplexity: Bool.default(true),
      /** Quiet after speech that sends the utterance to the recogniser before the end of speech is confirmed (0: never). */
      speculateAfterMs: z.coerce.number().int().min(0).max(5000).default(200),
      /**
       * Uplink audio one device may send, in seconds of audio per second (its packets' own durations), with a
       * burst of `uplinkBurstMs`: past it packets are dropped before they are decoded (a flood cost every device's frames).
       */
      maxUplinkRate: z.coerce.number().min(1).max(100).default(2),
      uplinkBurstMs: Ms(10_000, 120_000),
      /** Utterances and wake words per device that reach the recogniser or the model, per minute (burst `turnBurst`). */
      turnsPerMinute: z.coerce.number().int().min(1).max(600).default(20),
      turnBurst: z.coerce.number().int().min(1).max(100).default(5),
      /**
       * Characters of one answer spoken at most (a model asked for one to three short sentences, or steered into talking
       * on): past it the rest is not spoken and the model's request is closed.
       */
      maxAnswerChars: z.coerce.number().int().min(200).max(100_000).default(1500),
      /** Conversations remembered per device (the assistant's store bounds each one's length). */
      maxRememberedDevices: z.coerce.number().int().min(1).max(1_000_000).default(10_000),
    })
    .prefault({}),
};

export const CONVERSE_ENV: Record<string, string[]> = {
  GATEWAY_VOICE_MODEL: ['voice', 'model'],
  GATEWAY_VOICE_SAMPLE_RATE: ['voice', 'sampleRate'],
  GATEWAY_VOICE_LANGUAGE: ['voice', 'language'],
  GATEWAY_VOICE_PERSONA: ['voice', 'persona'],
  GATEWAY_VOICE_ASR_PROVIDER: ['voice', 'asr', 'provider'],
  GATEWAY_VOICE_ASR_BASE_URL: ['voice', 'asr', 'baseUrl'],
  GATEWAY_VOICE_ASR_API_KEY_ENV: ['voice', 'asr', 'apiKeyEnv'],
  GATEWAY_VOICE_ASR_MODEL: ['voice', 'asr', 'model'],
  GATEWAY_VOICE_ASR_LANGUAGE: ['voice', 'asr', 'language'],
  GATEWAY_VOICE_ASR_COMMAND: ['voice', 'asr', 'command'],
  GATEWAY_VOICE_TTS_PROVIDER: ['voice', 'tts', 'provider'],
  GATEWAY_VOICE_TTS_BASE_URL: ['voice', 'tts', 'baseUrl'],
  GATEWAY_VOICE_TTS_API_KEY_ENV: ['voice', 'tts', 'apiKeyEnv'],
  GATEWAY_VOICE_TTS_MODEL: ['voice', 'tts', 'model'],
  GATEWAY_VOICE_TTS_VOICE: ['voice', 'tts', 'voice'],
  GATEWAY_VOICE_TTS_FORMAT: ['voice', 'tts', 'format'],
  GATEWAY_VOICE_TTS_COMMAND: ['voice', 'tts', 'command'],
};

/** The converse fields as parsed (what the session side reads). */
export interface ConverseConfig {
  asr: AsrConfig;
  tts: TtsConfig;
  model?: string | undefined;
  sampleRate: number;
  persona?: string | undefined;
  language?: string | undefined;
  tenants: Record<string, z.infer<typeof VoiceTenantSchema>>;
  converse: {
    maxUtteranceMs: number;
    leadFrames: number;
    maxLeadFrames: number;
    maxQueuedFrames: number;
    preRollMs: number;
    encoderComplexity: number;
    encoderProcesses?: number | undefined;
    adaptiveComplexity: boolean;
    speculateAfterMs: number;
    maxUplinkRate: number;
    uplinkBurstMs: number;
    turnsPerMinute: number;
    turnBurst: number;
    maxAnswerChars: number;
    maxRememberedDevices: number;
  };
  mode: VoiceMode;
  hubTenant?: string | undefined;
}

/** Whether any configured mode needs the voice machinery (a per-device mode may still turn it on later). */
export function voiceConfigured(c: Pick<ConverseConfig, 'mode' | 'tenants'>): boolean {
  return c.mode !== 'off' || Object.values(c.tenants).some((t) => t.mode !== undefined && t.mode !== 'off');
}
