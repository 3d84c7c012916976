import { z } from 'zod';
import { Bool, documented, env, HttpUrl, Int, Ms } from '../config/fields.js';

/** Photos from device cameras: the capability sent to devices, the endpoint served here and its store. */
export const VisionSlice = z
  .strictObject({
    url: env('GATEWAY_VISION_URL', HttpUrl.optional(), 'sent to devices as `capabilities.vision.url`, with a per-device token'),
    tokenTtlSeconds: documented(z.coerce.number().int().min(60).default(3600), 'lifetime of vision tokens'),
    /** How often a connected device gets a fresh token (a repeated initialize); default: 80% of tokenTtlSeconds. */
    refreshMs: env(
      'GATEWAY_VISION_REFRESH_MS',
      z.coerce.number().int().min(100).optional(),
      'a connected device gets a fresh token this often: `initialize` is sent again (through the call queue, so never during a call)',
      '80% of the token lifetime',
    ),
    /** Serve the vision endpoint (POST /mcp/vision/explain) here; `url` defaults to it when `http.publicUrl` is set. */
    serve: env(
      'GATEWAY_VISION_SERVE',
      Bool.default(true),
      'serve `POST /mcp/vision/explain` and `GET /v1/devices/{id}/photos`; with `http.publicUrl` set and no `vision.url`, devices are sent there. See [docs/vision.md](docs/vision.md)',
    ),
    /** Largest photo accepted (xiaozhi-server: 5 MB). */
    maxPhotoBytes: documented(Int(1024, 64 * 1024 * 1024, 5 * 1024 * 1024), 'largest photo accepted'),
    /** Photos kept per device, and in all (oldest go first), under `<dataDir>/photos`. */
    photosPerDevice: documented(z.coerce.number().int().min(1).max(10_000).default(20), 'photos kept per device in `<dataDir>/photos`'),
    maxStoredPhotos: documented(z.coerce.number().int().min(1).max(1_000_000).default(1000), '… and in all (oldest go first)'),
    /** Image bytes kept in all: the count alone allowed 1000 × 5 MiB on disk. At least one photo's worth (below). */
    maxStoredPhotoBytes: env(
      'GATEWAY_VISION_MAX_STORED_PHOTO_BYTES',
      Int(1024, 2 ** 50, 512 * 1024 * 1024),
      '… and image bytes in all; past either, the tenant holding the most gives up its oldest (see docs/vision.md)',
    ),
    /** Uploads per device per minute (bursts of up to 5); beyond, 429. */
    uploadsPerMinute: documented(z.coerce.number().int().min(1).max(10_000).default(6), 'uploads per device per minute; beyond, 429'),
    /** Uploads open at once, each holding its photo in memory until answered (at most this × maxPhotoBytes); beyond, 503. */
    maxConcurrentUploads: documented(
      z.coerce.number().int().min(1).max(10_000).default(32),
      'uploads open at once in all (each holds its photo in memory until answered); beyond, 503. One device holds at most 2',
    ),
    /** An external xiaozhi-compatible explainer (POST multipart question + file); unset: none yet. */
    explainerUrl: env(
      'GATEWAY_VISION_EXPLAINER_URL',
      HttpUrl.optional(),
      "an external xiaozhi-compatible explainer; without one, the assistant's vision model answers, or devices hear that none is configured",
    ),
    explainerToken: env('GATEWAY_VISION_EXPLAINER_TOKEN', z.string().optional(), '… and its bearer token'),
    explainerTimeoutMs: Ms(30_000),
  })
  .refine((v) => !(typeof v.maxStoredPhotoBytes === 'number' && typeof v.maxPhotoBytes === 'number' && v.maxStoredPhotoBytes < v.maxPhotoBytes), {
    path: ['maxStoredPhotoBytes'],
    message: 'must be at least vision.maxPhotoBytes: a photo that fits no store would be dropped as soon as it is kept',
  })
  .refine((v) => !(typeof v.refreshMs === 'number' && typeof v.tokenTtlSeconds === 'number' && v.refreshMs >= v.tokenTtlSeconds * 1000), {
    path: ['refreshMs'],
    message: 'must be shorter than vision.tokenTtlSeconds: the fresh token has to arrive before the old one expires',
  });
export type VisionConfig = z.infer<typeof VisionSlice>;
