import multipart from '@fastify/multipart';
import { verifyVisionToken, normalizeDeviceId } from '@voxgate/protocol';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Logger } from 'pino';
import type { EventBus } from '../events/bus.js';
import { KeyedRateLimiter } from '../events/rate-limit.js';
import type { Metrics } from '../metrics.js';
import type { VisionExplainer } from './explainer.js';
import type { PhotoStore } from './photo-store.js';

export interface VisionService {
  /** Verifies the tokens handed out in `capabilities.vision`. */
  visionKey: string;
  store: PhotoStore;
  explainer: VisionExplainer;
  maxPhotoBytes: number;
  uploadsPerMinute: number;
  bus: EventBus;
  metrics: Metrics;
  log: Logger;
}

/** Where devices post photos: the path xiaozhi-server uses, so one URL shape serves both. */
export const VISION_EXPLAIN_PATH = '/mcp/vision/explain';

const MAX_QUESTION_CHARS = 2000;
const APOLOGY = 'The photo was saved, but the vision explainer could not describe it right now.';

/** Image types the xiaozhi vision server accepts, told by their first bytes (never by the client's word). */
export function imageTypeOf(b: Buffer): string | undefined {
  if (b.length >= 3 && b[0] === 0xff && b[1] === 0xd8 && b[2] === 0xff) return 'image/jpeg';
  if (b.length >= 8 && b.subarray(0, 8).equals(Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]))) return 'image/png';
  if (b.length >= 6 && (b.subarray(0, 6).toString('latin1') === 'GIF87a' || b.subarray(0, 6).toString('latin1') === 'GIF89a')) return 'image/gif';
  if (b.length >= 12 && b.subarray(0, 4).toString('latin1') === 'RIFF' && b.subarray(8, 12).toString('latin1') === 'WEBP') return 'image/webp';
  if (b.length >= 2 && b[0] === 0x42 && b[1] === 0x4d) return 'image/bmp';
  return undefined;
}

/** The xiaozhi answer shape for a refusal: the firmware treats any non-200 as "Failed to upload photo". */
function refuse(reply: FastifyReply, status: number, message: string): FastifyReply {
  return reply.code(status).send({ success: false, message });
}

/**
 * POST /mcp/vision/explain — what the firmware's `self.camera.take_photo` calls: multipart `question`
 * then `file`, `Authorization: Bearer <vision token>`, `Device-Id`. The token is checked before the
 * body is read; the upload is bounded; the photo is kept and announced (`device.photo`); the explainer
 * answers `{success, action, response}`, which the device returns as the tool's result.
 */
export async function visionExplainRoute(app: FastifyInstance, s: VisionService): Promise<void> {
  // Keyed by device, and only after the token checked out: the map holds devices this gateway minted for.
  const uploads = new KeyedRateLimiter({ ratePerSecond: s.uploadsPerMinute / 60, burst: Math.min(5, s.uploadsPerMinute) });
  await app.register(multipart, {
    limits: { fileSize: s.maxPhotoBytes, files: 1, fields: 4, fieldSize: 8 * 1024, parts: 6, headerPairs: 32 },
  });
  app.post(VISION_EXPLAIN_PATH, { schema: { hide: true } }, async (req: FastifyRequest, reply) => {
    const deviceId = normalizeDeviceId(String(req.headers['device-id'] ?? ''));
    const token = /^Bearer\s+(\S+)\s*$/i.exec(String(req.headers.authorization ?? ''))?.[1];
    if (!deviceId || !token || !verifyVisionToken(s.visionKey, token, deviceId, Date.now() / 1000)) {
      s.metrics.visionUploads.inc({ outcome: 'unauthorized' });
      s.log.warn({ deviceId: deviceId ?? null }, 'vision upload refused: missing, expired or foreign token');
      return refuse(reply, 401, 'a valid vision token for this Device-Id is required (Authorization: Bearer <token>)');
    }
    if (!uploads.take(deviceId).ok) {
      s.metrics.visionUploads.inc({ outcome: 'rate_limited' });
      return refuse(reply.header('retry-after', String(Math.ceil(60 / s.uploadsPerMinute))), 429, `at most ${s.uploadsPerMinute} photos per minute per device`);
    }
    if (!req.isMultipart()) return refuse(reply, 415, 'send multipart/form-data with "question" and "file"');
    let question: string | undefined;
    let image: Buffer | undefined;
    try {
      for await (const part of req.parts()) {
        if (part.type === 'file') image = await part.toBuffer();
        else if (question === undefined && typeof part.value === 'string') question = part.value.slice(0, MAX_QUESTION_CHARS);
      }
    } catch (e) {
      const tooLarge = (e as { code?: string }).code === 'FST_REQ_FILE_TOO_LARGE';
      s.metrics.visionUploads.inc({ outcome: tooLarge ? 'too_large' : 'bad_request' });
      return refuse(reply, tooLarge ? 413 : 400, tooLarge ? `the photo exceeds ${s.maxPhotoBytes} bytes (vision.maxPhotoBytes)` : 'malformed multipart body');
    }
    const mimeType = image ? imageTypeOf(image) : undefined;
    if (!image || !mimeType || question === undefined) {
      s.metrics.visionUploads.inc({ outcome: 'bad_request' });
      return refuse(reply, 400, image && !mimeType ? 'the file is not an image (JPEG, PNG, GIF, WEBP or BMP)' : 'both "question" and "file" are required');
    }
    const photo = s.store.save(deviceId, image, { mimeType, question });
    s.bus.publish('device.photo', deviceId, { photoId: photo.id, bytes: photo.bytes, mimeType, question: question.slice(0, 256) });
    try {
      const answer = await s.explainer.explain({ deviceId, question, image, mimeType });
      s.metrics.visionUploads.inc({ outcome: answer.success ? 'explained' : 'not_explained' });
      return answer;
    } catch (e) {
      s.metrics.visionUploads.inc({ outcome: 'explainer_failed' });
      s.log.warn({ deviceId, err: e instanceof Error ? e.message : String(e) }, 'vision explainer failed');
      return { success: false, action: 'RESPONSE', response: APOLOGY };
    }
  });
}
