import { z } from 'zod';

export const AudioParamsSchema = z
  .object({
    format: z.string().max(32).optional(),
    sample_rate: z.number().int().positive().max(192_000).optional(),
    channels: z.number().int().positive().max(8).optional(),
    frame_duration: z.number().int().positive().max(1000).optional(),
  })
  .loose();
export type AudioParams = z.infer<typeof AudioParamsSchema>;

/** The device hello: `transport:"websocket"` (version 1-3) or, over MQTT, `transport:"udp"` (version 3). */
export const DeviceHelloSchema = z
  .object({
    type: z.literal('hello'),
    version: z.number().int().min(0).max(255).optional(),
    transport: z.string().max(32).optional(),
    features: z.record(z.string(), z.unknown()).optional(),
    audio_params: AudioParamsSchema.optional(),
  })
  .loose();
export type DeviceHello = z.infer<typeof DeviceHelloSchema>;

/** What the gateway sends the device; downlink audio defaults match the reference server. */
export const DEFAULT_SERVER_AUDIO: Required<Pick<AudioParams, 'format' | 'sample_rate' | 'channels' | 'frame_duration'>> = {
  format: 'opus',
  sample_rate: 24000,
  channels: 1,
  frame_duration: 60,
};

export interface ServerHello {
  type: 'hello';
  /** Always present: the reference firmware dereferences it without checking. */
  transport: 'websocket' | 'udp';
  session_id: string;
  audio_params: AudioParams;
}

export function buildServerHello(sessionId: string, audio: AudioParams = DEFAULT_SERVER_AUDIO): ServerHello {
  return { type: 'hello', transport: 'websocket', session_id: sessionId, audio_params: audio };
}

/** A goodbye ends a (voice) session; over MQTT it answers a hello while voice is not enabled. */
export function buildGoodbye(sessionId: string): { type: 'goodbye'; session_id: string } {
  return { type: 'goodbye', session_id: sessionId };
}
