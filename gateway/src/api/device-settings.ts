import { describeIssues } from '@voxgate/protocol';
import type { FastifyInstance, FastifyRequest, FastifySchema } from 'fastify';
import { z } from 'zod';
import { Tenant, TENANT_PATTERN } from '../config/fields.js';
import type { DeviceRecords } from '../devices/records.js';
import type { DeviceMeta } from '../devices/record-shapes.js';
import { MAX_NAME, MAX_ROOM, MAX_TAG, MAX_TAGS, TAG_PATTERN } from '../devices/record-shapes.js';
import type { DeviceTenants } from '../devices/tenants.js';
import { GatewayError } from '../errors.js';
import { VOICE_MODES, VoiceModeSchema, type VoiceMode } from '../voice/converse/config.js';
import type { DeviceVoiceModes } from '../voice/modes.js';
import { NO_TENANTS, visibleDeviceId } from './device-scope.js';
import { problems } from './route-helpers.js';
import { DeviceIdParam, jsonSchema } from './schemas.js';
import { hasUnshowable } from '../schemas/showable.js';

/**
 * A name or room as people write it: trimmed, at least one character once trimmed, nothing a screen would obey. Both go
 * as written into every device tool's description (`[device <id> "<name>" in <room>]`), which `/v1/tools`, `/mcp`, the
 * assistant and `voxgate chat`'s `/tools` (an operator's terminal) show: a tenant's key named its device with terminal
 * escapes or a right-to-left override, and every operator listing tools got them (red team 10).
 */
const Label = (max: number) =>
  z
    .string()
    .trim()
    .min(1)
    .max(max)
    .refine((s) => !hasUnshowable(s), 'must not hold control characters, line breaks or bidirectional formatting characters');
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
    tenant: Tenant.nullable().optional().describe('The tenant the device belongs to (operator keys only); null: none'),
  })
  .strict();
type Patch = z.infer<typeof DeviceSettingsPatch>;

export const DeviceSettings = z.object({
  id: z.string(),
  voiceMode: VoiceModeSchema.nullable().describe('Set on this device (null: not set)'),
  effectiveVoiceMode: VoiceModeSchema.describe('What its next voice session uses'),
  name: z.string().nullable().describe('What people call it (null: not named, or not a device that has connected)'),
  room: z.string().nullable(),
  tags: z.array(z.string()),
  tenant: z.string().nullable().describe('The tenant the device belongs to (null: none; only operator keys see it)'),
});

export interface DeviceSettingsDeps {
  voiceModes: DeviceVoiceModes;
  effectiveVoiceMode(deviceId: string): VoiceMode;
  /** The lasting records (name, room, tags); absent: only the voice mode can be set. */
  records?: DeviceRecords;
  /** Forget the device (record, voice mode, credentials, live connection); false when it is not known. */
  forget?(deviceId: string): Promise<boolean>;
  /** Devices' tenants (devices/tenants.ts); absent: no device has one and `tenant` cannot be set. */
  tenants?: Pick<DeviceTenants, 'tenantOf' | 'set'> | undefined;
}

/**
 * `tenant`: only an operator key (no tenant) moves a device between tenants. A tenant's key may not, even
 * to its own tenant: it could otherwise claim an unassigned device (which it cannot see) by naming it.
 */
async function setTenant(req: FastifyRequest, d: DeviceSettingsDeps, id: string, tenant: string | null | undefined): Promise<void> {
  if (tenant === undefined) return;
  if (req.caller?.tenant !== undefined) throw new GatewayError('FORBIDDEN', "only an operator key (an API key without a tenant) sets a device's tenant");
  if (!d.tenants) throw new GatewayError('INVALID_REQUEST', 'device tenants are not available on this gateway');
  await d.tenants.set(id, tenant);
}

/**
 * An operator may set the voice mode before the device ever connects (it applies when it does); a tenant's key only for a
 * device that has (red team 9: through ids a rule gives its tenant at an OTA check, it could store a mode per made-up id).
 */
async function applyVoiceMode(req: FastifyRequest, d: DeviceSettingsDeps, id: string, body: Patch): Promise<void> {
  if (body.voiceMode === undefined) return;
  if (req.caller?.tenant !== undefined && d.records && !d.records.has(id))
    throw new GatewayError('DEVICE_NOT_FOUND', `no device ${id} has connected yet: a tenant's key sets the voice mode of a known device`);
  await d.voiceModes.set(id, body.voiceMode);
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

/** Name, room and tags belong to a recorded device: an id never seen is a 404, not a record made up. */
async function applyMeta(d: DeviceSettingsDeps, id: string, body: Patch): Promise<void> {
  const patch = { ...nameChange(body), ...roomChange(body), ...tagsChange(body) };
  if (Object.keys(patch).length === 0) return;
  if (!d.records?.has(id))
    throw new GatewayError('DEVICE_NOT_FOUND', `no device ${id} has ever connected (or it was forgotten): name, room and tags need a known device`);
  await d.records.setMeta(id, patch);
}

const nullable = (schema: Record<string, unknown>) => ({ ...schema, nullable: true });

export async function deviceSettingsRoutes(app: FastifyInstance, d: DeviceSettingsDeps): Promise<void> {
  app.patch<{ Params: z.infer<typeof DeviceIdParam>; Body: Patch }>('/v1/devices/:deviceId', {
    schema: {
      tags: ['devices'],
      summary:
        "Change a device's settings (voice mode, name, room, tags, tenant); fields left out stay as they are, null clears. " +
        'Name, room and tags need a device that has connected: 404 for an id never seen; a voice mode may be set in advance',
      params: jsonSchema(DeviceIdParam),
      // Written out: null (clear) must pass the validator, which an OpenAPI 3.0 `nullable` enum does not say.
      body: {
        type: 'object',
        properties: {
          voiceMode: { enum: [...VOICE_MODES, null], description: "off, relay or converse; null: the tenant's or voice.mode" },
          name: nullable({
            type: 'string',
            maxLength: MAX_NAME,
            description: `What people call the device (at most ${MAX_NAME} characters, no control or bidirectional formatting characters); null clears`,
          }),
          room: nullable({
            type: 'string',
            maxLength: MAX_ROOM,
            description: `Where it is (at most ${MAX_ROOM} characters, no control or bidirectional formatting characters); null clears`,
          }),
          tags: nullable({
            type: 'array',
            maxItems: MAX_TAGS,
            items: { type: 'string', minLength: 1, maxLength: MAX_TAG, pattern: TAG_PATTERN.source },
            description: `Replaces the tags: at most ${MAX_TAGS} of at most ${MAX_TAG} characters [A-Za-z0-9_.:-]; null or [] clears`,
          }),
          tenant: {
            type: 'string',
            nullable: true,
            pattern: TENANT_PATTERN.source,
            description: 'The tenant the device belongs to (operator keys only; 403 otherwise); null: none',
          },
        },
        additionalProperties: false,
      },
      response: { 200: jsonSchema(DeviceSettings, 'output'), ...problems(400, 401, 403, 404) },
    } as FastifySchema,
    handler: async (req) => {
      const tenants = d.tenants ?? NO_TENANTS;
      const id = visibleDeviceId(req, tenants, req.params.deviceId);
      const parsed = DeviceSettingsPatch.safeParse(req.body ?? {});
      if (!parsed.success) throw new GatewayError('INVALID_REQUEST', `device settings: ${describeIssues(parsed.error.issues)}`);
      const body = parsed.data;
      await setTenant(req, d, id, body.tenant);
      await applyMeta(d, id, body);
      await applyVoiceMode(req, d, id, body);
      const meta = d.records?.has(id) ? d.records.getMeta(id) : undefined;
      return {
        id,
        voiceMode: d.voiceModes.get(id) ?? null,
        effectiveVoiceMode: d.effectiveVoiceMode(id),
        name: meta?.name ?? null,
        room: meta?.room ?? null,
        tags: [...(meta?.tags ?? [])],
        tenant: tenants.tenantOf(id) ?? null,
      };
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
      const id = visibleDeviceId(req, d.tenants ?? NO_TENANTS, req.params.deviceId);
      if (!(await forget(id))) throw new GatewayError('DEVICE_NOT_FOUND', `no device ${id} is known (never connected, or already forgotten)`);
      return reply.code(204).send();
    },
  });
}
