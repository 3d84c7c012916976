import { describeIssues } from '@voxgate/protocol';
import type { FastifyInstance, FastifySchema } from 'fastify';
import { z } from 'zod';
import type { DeviceMeta, DeviceRecords } from '../devices/records.js';
import { MAX_NAME, MAX_ROOM, MAX_TAG, MAX_TAGS, TAG_PATTERN } from '../devices/records.js';
import { GatewayError } from '../errors.js';
import { VOICE_MODES, VoiceModeSchema, type VoiceMode } from '../voice/converse/config.js';
import type { DeviceVoiceModes } from '../voice/modes.js';
import { parseDeviceId, problems } from './route-helpers.js';
import { DeviceIdParam, jsonSchema } from './schemas.js';

/** A name or room as people write it: trimmed, at least one character once trimmed. */
const Label = (max: number) => z.string().trim().min(1).max(max);
const Tag = z.string().min(1).max(MAX_TAG).regex(TAG_PATTERN);

/**
 * What a person sets on a device. Each field is optional and independent (a PATCH changes only what it
 * names; null clears), so more settings join this body without changing these.
 */
export const DeviceSettingsPatch = z
  .object({
    voiceMode: VoiceModeSchema.nullable().optional().describe('This device\'s voice mode ("off", "relay", "converse"); null: its tenant\'s or voice.mode'),
    name: Label(MAX_NAME).nullable().optional().describe(`What people call the device (at most ${MAX_NAME} characters); null clears`),
    room: Label(MAX_ROOM).nullable().optional().describe(`Where it is (at most ${MAX_ROOM} characters); null clears`),
    tags: z
      .array(Tag)
      .max(MAX_TAGS)
      .nullable()
      .optional()
      .describe(`At most ${MAX_TAGS} tags of at most ${MAX_TAG} characters [A-Za-z0-9_.:-]; replaces the tags; null or [] clears`),
  })
  .strict();
type Patch = z.infer<typeof DeviceSettingsPatch>;

export const DeviceSettings = z.object({
  id: z.string(),
  voiceMode: VoiceModeSchema.nullable().describe('Set on this device (null: not set)'),
  effectiveVoiceMode: VoiceModeSchema.describe('What its next voice session uses'),
  name: z.string().nullable().optional().describe('name, room, tags and tenant: present when the PATCH set name, room or tags'),
  room: z.string().nullable().optional(),
  tags: z.array(z.string()).optional(),
  tenant: z.string().nullable().optional(),
});

export interface DeviceSettingsDeps {
  voiceModes: DeviceVoiceModes;
  effectiveVoiceMode(deviceId: string): VoiceMode;
  /** The lasting records (name, room, tags); absent: only the voice mode can be set. */
  records?: DeviceRecords;
  /** Forget the device (record, voice mode, credentials, live connection); false when it is not known. */
  forget?(deviceId: string): Promise<boolean>;
}

/** The voice mode may be set before the device ever connects (it applies when it does). */
async function applyVoiceMode(d: DeviceSettingsDeps, id: string, body: Patch): Promise<void> {
  if (body.voiceMode !== undefined) await d.voiceModes.set(id, body.voiceMode);
}

function nameChange(body: Patch): Partial<DeviceMeta> {
  return body.name === undefined ? {} : { name: body.name };
}

function roomChange(body: Patch): Partial<DeviceMeta> {
  return body.room === undefined ? {} : { room: body.room };
}

function tagsChange(body: Patch): Partial<DeviceMeta> {
  return body.tags === undefined ? {} : { tags: body.tags ?? [] };
}

function touchesMeta(body: Patch): boolean {
  return body.name !== undefined || body.room !== undefined || body.tags !== undefined;
}

/** Name, room and tags belong to a recorded device: an id never seen is a 404, not a record made up. */
async function applyMeta(d: DeviceSettingsDeps, id: string, body: Patch): Promise<void> {
  const patch = { ...nameChange(body), ...roomChange(body), ...tagsChange(body) };
  if (Object.keys(patch).length === 0) return;
  if (!d.records?.has(id)) throw new GatewayError('DEVICE_NOT_FOUND', `no device ${id} has ever connected (or it was forgotten): name, room and tags need a known device`);
  await d.records.setMeta(id, patch);
}

const nullable = (schema: Record<string, unknown>) => ({ ...schema, nullable: true });

export async function deviceSettingsRoutes(app: FastifyInstance, d: DeviceSettingsDeps): Promise<void> {
  app.patch<{ Params: z.infer<typeof DeviceIdParam>; Body: Patch }>('/v1/devices/:deviceId', {
    schema: {
      tags: ['devices'],
      summary:
        "Change a device's settings (voice mode, name, room, tags); fields left out stay as they are, null clears. " +
        'Name, room and tags need a device that has connected: 404 for an id never seen; a voice mode may be set in advance',
      params: jsonSchema(DeviceIdParam),
      // Written out: null (clear) must pass the validator, which an OpenAPI 3.0 `nullable` enum does not say.
      body: {
        type: 'object',
        properties: {
          voiceMode: { enum: [...VOICE_MODES, null], description: 'off, relay or converse; null: the tenant\'s or voice.mode' },
          name: nullable({ type: 'string', maxLength: MAX_NAME, description: `What people call the device (at most ${MAX_NAME} characters); null clears` }),
          room: nullable({ type: 'string', maxLength: MAX_ROOM, description: `Where it is (at most ${MAX_ROOM} characters); null clears` }),
          tags: nullable({
            type: 'array',
            maxItems: MAX_TAGS,
            items: { type: 'string', minLength: 1, maxLength: MAX_TAG, pattern: TAG_PATTERN.source },
            description: `Replaces the tags: at most ${MAX_TAGS} of at most ${MAX_TAG} characters [A-Za-z0-9_.:-]; null or [] clears`,
          }),
        },
        additionalProperties: false,
      },
      response: { 200: jsonSchema(DeviceSettings, 'output'), ...problems(400, 401, 404) },
    } as FastifySchema,
    handler: async (req) => {
      const id = parseDeviceId(req.params.deviceId);
      const parsed = DeviceSettingsPatch.safeParse(req.body ?? {});
      if (!parsed.success) throw new GatewayError('INVALID_REQUEST', `device settings: ${describeIssues(parsed.error.issues)}`);
      const body = parsed.data;
      await applyMeta(d, id, body);
      await applyVoiceMode(d, id, body);
      const base = { id, voiceMode: d.voiceModes.get(id) ?? null, effectiveVoiceMode: d.effectiveVoiceMode(id) };
      // A voice-mode-only PATCH answers as it always has; one that touched the metadata gets all of it back.
      if (!touchesMeta(body) || !d.records?.has(id)) return base;
      const { name, room, tags, tenant } = d.records.getMeta(id);
      return { ...base, name, room, tags: [...tags], tenant };
    },
  });

  const forget = d.forget;
  if (!forget) return;
  app.delete<{ Params: z.infer<typeof DeviceIdParam> }>('/v1/devices/:deviceId', {
    schema: {
      tags: ['devices'],
      summary:
        'Forget a device: its record (name, room, tags), its voice mode, its credentials (enrolled devices must enroll again), ' +
        'and its live connection (closed with 4006; a device that dials again is recorded as new). 404 for a device not known',
      params: jsonSchema(DeviceIdParam),
      response: { 204: { type: 'null', description: 'Forgotten' }, ...problems(400, 401, 404) },
    } as FastifySchema,
    handler: async (req, reply) => {
      const id = parseDeviceId(req.params.deviceId);
      if (!(await forget(id))) throw new GatewayError('DEVICE_NOT_FOUND', `no device ${id} is known (never connected, or already forgotten)`);
      return reply.code(204).send();
    },
  });
}
