import type { FastifyInstance, FastifySchema } from 'fastify';
import { z } from 'zod';
import { parseDeviceId, problems, publicBase } from '../api/route-helpers.js';
import { DeviceIdParam, jsonSchema } from '../api/schemas.js';
import type { HttpConfig } from '../api/config.js';
import type { FirmwareService } from './service.js';

const FirmwarePreview = z.object({
  deviceId: z.string(),
  reported: z
    .object({ version: z.string().nullable(), boards: z.array(z.string()).describe('Only the boards a rollout names') })
    .nullable()
    .describe("What the device sent in its last OTA check (null: none since the gateway started)"),
  source: z.enum(['rollout', 'baseline', 'none']).describe('rollout: an ota.rollout entry; baseline: ota.firmwareVersion/firmwareUrl; none: nothing to install'),
  offer: z.object({ version: z.string(), url: z.string(), force: z.number().int().optional(), size: z.number().int().optional(), sha256: z.string().optional() }).describe('The OTA answer\'s firmware section (url "" offers nothing)'),
  rollout: z.object({ version: z.string(), percent: z.number(), listed: z.boolean(), bucket: z.number().describe('The device\'s place in the fleet, 0–100: in the rollout when below percent') }).nullable(),
});

/**
 * `GET /v1/devices/{id}/firmware`: what the device's next OTA check would be offered, and why. Read-only:
 * nothing is counted or remembered, so the console (or a script) can ask as often as it likes.
 */
export async function firmwareOfferRoute(app: FastifyInstance, o: { firmware: FirmwareService; http: Pick<HttpConfig, 'publicUrl' | 'port'> }): Promise<void> {
  app.get<{ Params: z.infer<typeof DeviceIdParam> }>('/v1/devices/:deviceId/firmware', {
    schema: {
      tags: ['devices'],
      summary: "The firmware the device's next OTA check would be offered (rollout, baseline or none), and what it reported last",
      params: jsonSchema(DeviceIdParam),
      response: { 200: jsonSchema(FirmwarePreview, 'output'), ...problems(400, 401) },
    } as FastifySchema,
    handler: async (req) => {
      const deviceId = parseDeviceId(req.params.deviceId);
      return { deviceId, ...(await o.firmware.preview(deviceId, publicBase(req, o.http))) };
    },
  });
}
