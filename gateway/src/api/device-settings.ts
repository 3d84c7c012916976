import type { FastifyInstance, FastifySchema } from 'fastify';
import { z } from 'zod';
import { VOICE_MODES, VoiceModeSchema, type VoiceMode } from '../voice/converse/config.js';
import type { DeviceVoiceModes } from '../voice/modes.js';
import { parseDeviceId } from './devices.js';
import { DeviceIdParam, Problem, jsonSchema } from './schemas.js';

/**
 * What a person sets on a device. Each field is optional and independent (a PATCH changes only what it
 * names; null clears), so more settings (name, room, tags) join this body without changing these.
 */
export const DeviceSettingsPatch = z
  .object({
    voiceMode: VoiceModeSchema.nullable().optional().describe('This device\'s voice mode ("off", "relay", "converse"); null: its tenant\'s or voice.mode'),
  })
  .strict();

export const DeviceSettings = z.object({
  id: z.string(),
  voiceMode: VoiceModeSchema.nullable().describe('Set on this device (null: not set)'),
  effectiveVoiceMode: VoiceModeSchema.describe('What its next voice session uses'),
});

export interface DeviceSettingsDeps {
  voiceModes: DeviceVoiceModes;
  effectiveVoiceMode(deviceId: string): VoiceMode;
}

export async function deviceSettingsRoutes(app: FastifyInstance, d: DeviceSettingsDeps): Promise<void> {
  const problems = Object.fromEntries([400, 401].map((c) => [c, { ...jsonSchema(Problem, 'output'), description: 'problem+json' }]));
  app.patch<{ Params: z.infer<typeof DeviceIdParam>; Body: z.infer<typeof DeviceSettingsPatch> }>('/v1/devices/:deviceId', {
    schema: {
      tags: ['devices'],
      summary: "Change a device's settings (its voice mode); fields left out stay as they are",
      params: jsonSchema(DeviceIdParam),
      // Written out: null (clear) must pass the validator, which an OpenAPI 3.0 `nullable` enum does not say.
      body: {
        type: 'object',
        properties: { voiceMode: { enum: [...VOICE_MODES, null], description: 'off, relay or converse; null: the tenant\'s or voice.mode' } },
        additionalProperties: false,
      },
      response: { 200: jsonSchema(DeviceSettings, 'output'), ...problems },
    } as FastifySchema,
    handler: async (req) => {
      const id = parseDeviceId(req.params.deviceId);
      const body = DeviceSettingsPatch.parse(req.body ?? {});
      if (body.voiceMode !== undefined) await d.voiceModes.set(id, body.voiceMode);
      return { id, voiceMode: d.voiceModes.get(id) ?? null, effectiveVoiceMode: d.effectiveVoiceMode(id) };
    },
  });
}
