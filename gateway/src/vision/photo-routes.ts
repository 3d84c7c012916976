import type { FastifyInstance, FastifyRequest, FastifySchema } from 'fastify';
import { z } from 'zod';
import { parseDeviceId } from '../api/route-helpers.js';
import { DeviceIdParam, jsonSchema } from '../api/schemas.js';
import { GatewayError } from '../errors.js';
import type { PhotoRecord, PhotoStore } from './photo-store.js';

const Photo = z.object({
  id: z.string(),
  deviceId: z.string(),
  at: z.string().describe('When it was received (ISO 8601)'),
  bytes: z.number().int(),
  mimeType: z.string(),
  question: z.string().describe('What the device was asked to look for'),
});
const PhotoParams = DeviceIdParam.extend({ photoId: z.string().regex(/^[0-9a-z]{1,40}$/) });

/**
 * The photos devices uploaded for vision (bounded store): list them, fetch one. An operator key sees every photo of the
 * device; a tenant's key (the device is its tenant's: the scope hook answered 404 otherwise) only those taken while the
 * device was its tenant's: a device moved from another tenant brings none of that tenant's photos along.
 */
export async function photoRoutes(app: FastifyInstance, opts: { store: PhotoStore }): Promise<void> {
  const tags = ['devices'];
  const callersOwn = (req: FastifyRequest, r: PhotoRecord) => req.caller?.tenant === undefined || r.tenant === req.caller.tenant;
  app.get<{ Params: z.infer<typeof DeviceIdParam> }>('/v1/devices/:deviceId/photos', {
    schema: {
      tags,
      summary: "The device's most recent vision photos, newest first",
      params: jsonSchema(DeviceIdParam),
      response: { 200: jsonSchema(z.object({ photos: z.array(Photo) }), 'output') },
    } as FastifySchema,
    handler: async (req) => ({ photos: opts.store.list(parseDeviceId(req.params.deviceId)).filter((r) => callersOwn(req, r)) }),
  });
  app.get<{ Params: z.infer<typeof PhotoParams> }>('/v1/devices/:deviceId/photos/:photoId', {
    schema: { tags, summary: 'One photo (the image bytes)', params: jsonSchema(PhotoParams) } as FastifySchema,
    handler: async (req, reply) => {
      const found = opts.store.read(parseDeviceId(req.params.deviceId), req.params.photoId);
      if (!found || !callersOwn(req, found.record)) throw new GatewayError('NOT_FOUND', `no photo ${req.params.photoId} for this device`);
      return reply.type(found.record.mimeType).header('x-content-type-options', 'nosniff').send(found.data);
    },
  });
}
