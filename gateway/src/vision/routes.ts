import multipart from '@fastify/multipart';
import { verifyVisionToken, normalizeDeviceId } from '@voxgate/protocol';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Logger } from 'pino';
import { GatewayError } from '../errors.js';
import type { EventBus } from '../events/bus.js';
import type { Metrics } from '../metrics.js';
import { REFUSAL_LINES, ThrottledLog } from '../throttle/throttled-log.js';
import { KeyedTokenBucket } from '../throttle/token-bucket.js';
import type { VisionExplainer } from './explainer.js';
import { imageType } from './image-type.js';
import type { PhotoStore } from './photo-store.js';
import { UploadSlots } from './upload-slots.js';

export interface VisionService {
  /** Verifies the tokens handed out in `capabilities.vision`. */
  visionKey: string;
  store: PhotoStore;
  explainer: VisionExplainer;
  maxPhotoBytes: number;
  uploadsPerMinute: number;
  /** Uploads open at once in all (vision.maxConcurrentUploads); one device holds at most MAX_UPLOADS_PER_DEVICE. */
  maxConcurrentUploads: number;
  bus: EventBus;
  metrics: Metrics;
  log: Logger;
}

/** Where devices post photos: the path xiaozhi-server uses, so one URL shape serves both. */
export const VISION_EXPLAIN_PATH = '/mcp/vision/explain';

const MAX_QUESTION_CHARS = 2000;
/** The firmware waits for one photo's answer before it takes another: two leave room for a retry after a timeout. */
export const MAX_UPLOADS_PER_DEVICE = 2;
const APOLOGY = 'The photo was saved, but the vision explainer could not describe it right now.';

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
  // A refusal before the token checks out takes one request each: its lines are bounded (the metric counts every one).
  const refusals = new ThrottledLog(s.log, 'warn', REFUSAL_LINES);
  const uploads = new KeyedTokenBucket({ ratePerSecond: s.uploadsPerMinute / 60, burst: Math.min(5, s.uploadsPerMinute) }, { maxKeys: 10_000 });
  const slots = new UploadSlots({ total: s.maxConcurrentUploads, perDevice: MAX_UPLOADS_PER_DEVICE });
  await app.register(multipart, {
    limits: { fileSize: s.maxPhotoBytes, files: 1, fields: 4, fieldSize: 8 * 1024, parts: 6, headerPairs: 32 },
  });
  app.post(VISION_EXPLAIN_PATH, { schema: { hide: true } }, async (req: FastifyRequest, reply) => {
    const deviceId = normalizeDeviceId(String(req.headers['device-id'] ?? ''));
    const token = /^Bearer\s+(\S+)\s*$/i.exec(String(req.headers.authorization ?? ''))?.[1];
    if (!deviceId || !token || !verifyVisionToken(s.visionKey, token, deviceId, Date.now() / 1000)) {
      s.metrics.visionUploads.inc({ outcome: 'unauthorized' });
      refusals.write({ deviceId: deviceId ?? null }, 'vision upload refused: missing, expired or foreign token', 'unauthorized');
      return refuse(reply, 401, 'a valid vision token for this Device-Id is required (Authorization: Bearer <token>)');
    }
    if (!uploads.take(deviceId).ok) {
      s.metrics.visionUploads.inc({ outcome: 'rate_limited' });
      return refuse(reply.header('retry-after', String(Math.ceil(60 / s.uploadsPerMinute))), 429, `at most ${s.uploadsPerMinute} photos per minute per device`);
    }
    if (!req.isMultipart()) return refuse(reply, 415, 'send multipart/form-data with "question" and "file"');
    // Each open upload holds up to maxPhotoBytes until answered: without a bound on them, devices dripping bodies (or
    // waiting on a slow explainer) held as many photos in memory as their rate limits let them start.
    const slot = slots.take(deviceId);
    if (slot !== 'ok') {
      s.metrics.visionUploads.inc({ outcome: slot });
      refusals.write(
        { deviceId, open: slots.size },
        `vision upload refused: ${slot === 'full' ? 'too many uploads open' : 'this device has uploads open'}`,
        slot,
      );
      return slot === 'full'
        ? refuse(reply.header('retry-after', '5'), 503, `the gateway takes at most ${s.maxConcurrentUploads} photos at once; retry shortly`)
        : refuse(reply.header('retry-after', '5'), 429, `at most ${MAX_UPLOADS_PER_DEVICE} uploads open per device; wait for their answers`);
    }
    try {
      return await receive(s, req, reply, deviceId);
    } finally {
      slots.release(deviceId);
    }
  });
}

/** The upload's body read, the photo kept and announced, the explainer's answer (the device's slot held throughout). */
async function receive(s: VisionService, req: FastifyRequest, reply: FastifyReply, deviceId: string): Promise<unknown> {
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
  const mimeType = image ? imageType(image) : undefined;
  if (!image || !mimeType || question === undefined) {
    s.metrics.visionUploads.inc({ outcome: 'bad_request' });
    return refuse(reply, 400, image && !mimeType ? 'the file is not an image (JPEG, PNG, GIF, WEBP or BMP)' : 'both "question" and "file" are required');
  }
  const photo = s.store.save(deviceId, image, { mimeType, question });
  s.bus.publish('device.photo', deviceId, { photoId: photo.id, bytes: photo.bytes, mimeType, question: question.slice(0, 256) });
  // The device gone (it disconnected) before the answer: a request still waiting for a slot leaves the queue.
  const gone = new AbortController();
  reply.raw.on('close', () => {
    if (!reply.raw.writableFinished) gone.abort();
  });
  try {
    const answer = await s.explainer.explain({ deviceId, question, image, mimeType, signal: gone.signal });
    s.metrics.visionUploads.inc({ outcome: answer.success ? 'explained' : 'not_explained' });
    return answer;
  } catch (e) {
    if (e instanceof GatewayError && e.code === 'MODEL_BUSY') {
      // Refused by modelRequests.vision (counted and logged by the gate): the app's problem handler answers 503
      // problem+json with Retry-After. The photo is kept; the firmware reports any non-200 as a failed upload.
      s.metrics.visionUploads.inc({ outcome: 'busy' });
      throw e;
    }
    if (gone.signal.aborted) {
      s.metrics.visionUploads.inc({ outcome: 'cancelled' });
      return { success: false, action: 'RESPONSE', response: APOLOGY };
    }
    s.metrics.visionUploads.inc({ outcome: 'explainer_failed' });
    s.log.warn({ deviceId, err: e instanceof Error ? e.message : String(e) }, 'vision explainer failed');
    return { success: false, action: 'RESPONSE', response: APOLOGY };
  }
}
