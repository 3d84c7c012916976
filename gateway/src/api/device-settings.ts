import type { FastifyInstance, FastifyRequest, FastifySchema } from 'fastify';
import { z } from 'zod';
import { Tenant, TENANT_PATTERN } from '../config/fields.js';
import type { DeviceTenants } from '../devices/tenants.js';
import { GatewayError } from '../errors.js';
import { VOICE_MODES, VoiceModeSchema, type VoiceMode } from '../voice/converse/config.js';
import type { DeviceVoiceModes } from '../voice/modes.js';
import { NO_TENANTS, visibleDeviceId } from './device-scope.js';
import { problems } from './route-helpers.js';
import { DeviceIdParam, jsonSchema } from './schemas.js';

/**
 * What a person sets on a device. Each field is optional and independent (a PATCH changes only what it
 * names; null clears), so more settings (name, room, tags) join this body without changing these.
 */
export const DeviceSettingsPatch = z
  .object({
    voiceMode: VoiceModeSchema.nullable().optional().describe('This device\'s voice mode ("off", "relay", "converse"); null: its tenant\'s or voice.mode'),
    tenant: Tenant.nullable().optional().describe('The tenant the device belongs to (operator keys only); null: none'),
  })
  .strict();

export const DeviceSettings = z.object({
  id: z.string(),
  voiceMode: VoiceModeSchema.nullable().describe('Set on this device (null: not set)'),
  effectiveVoiceMode: VoiceModeSchema.describe('What its next voice session uses'),
  tenant: z.string().nullable().describe('The tenant the device belongs to (null: none; only operator keys see it)'),
});

export interface DeviceSettingsDeps {
  voiceModes: DeviceVoiceModes;
  effectiveVoiceMode(deviceId: string): VoiceMode;
  /** Devices' tenants (devices/tenants.ts); absent: no device has one and `tenant` cannot be set. */
  tenants?: Pick<DeviceTenants, 'tenantOf' | 'set'> | undefined;
}

/**
 * `tenant`: only an operator key (no tenant) moves a device between tenants. A tenant's key may not, even
 * to its own tenant: it could otherwise claim an unassigned device (which it cannot see) by naming it.
 */
async function setTenant(req: FastifyRequest, d: DeviceSettingsDeps, id: string, tenant: string | null | undefined): Promise<void> {
  if (tenant === undefined) return;
  if (req.caller?.tenant !== undefined) throw new GatewayError('FORBIDDEN', 'only an operator key (an API key without a tenant) sets a device\'s tenant');
  if (!d.tenants) throw new GatewayError('INVALID_REQUEST', 'device tenants are not available on this gateway');
  await d.tenants.set(id, tenant);
}

export async function deviceSettingsRoutes(app: FastifyInstance, d: DeviceSettingsDeps): Promise<void> {
  app.patch<{ Params: z.infer<typeof DeviceIdParam>; Body: z.infer<typeof DeviceSettingsPatch> }>('/v1/devices/:deviceId', {
    schema: {
      tags: ['devices'],
      summary: "Change a device's settings (its voice mode, its tenant); fields left out stay as they are",
      params: jsonSchema(DeviceIdParam),
      // Written out: null (clear) must pass the validator, which an OpenAPI 3.0 `nullable` enum does not say.
      body: {
        type: 'object',
        properties: {
          voiceMode: { enum: [...VOICE_MODES, null], description: 'off, relay or converse; null: the tenant\'s or voice.mode' },
          tenant: { type: 'string', nullable: true, pattern: TENANT_PATTERN.source, description: 'The tenant the device belongs to (operator keys only; 403 otherwise); null: none' },
        },
        additionalProperties: false,
      },
      response: { 200: jsonSchema(DeviceSettings, 'output'), ...problems(400, 401, 403, 404) },
    } as FastifySchema,
    handler: async (req) => {
      const tenants = d.tenants ?? NO_TENANTS;
      const id = visibleDeviceId(req, tenants, req.params.deviceId);
      const body = DeviceSettingsPatch.parse(req.body ?? {});
      await setTenant(req, d, id, body.tenant);
      if (body.voiceMode !== undefined) await d.voiceModes.set(id, body.voiceMode);
      return { id, voiceMode: d.voiceModes.get(id) ?? null, effectiveVoiceMode: d.effectiveVoiceMode(id), tenant: tenants.tenantOf(id) ?? null };
    },
  });
}
