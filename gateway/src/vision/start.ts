import { join } from 'node:path';
import { mintVisionToken, type VisionCapability } from '@voxgate/protocol';
import type { Logger } from 'pino';
import type { EventBus } from '../events/bus.js';
import type { Metrics } from '../metrics.js';
import type { VisionConfig } from './config.js';
import { httpExplainer, noExplainer, type VisionExplainer } from './explainer.js';
import { PhotoStore } from './photo-store.js';
import { VISION_EXPLAIN_PATH, type VisionService } from './routes.js';

/** What devices are told about vision: the URL they post photos to, a fresh token each, and how often it is renewed. */
export interface VisionOffer {
  capability: (deviceId: string) => VisionCapability | undefined;
  /** A connected device gets a fresh token this often (unset: no URL, nothing to renew). */
  refreshMs: number | undefined;
}

export function visionOffer(v: VisionConfig, publicUrl: string | undefined, visionKey: string): VisionOffer {
  // The URL devices post photos to: configured, or this gateway's own endpoint when its public URL is known.
  const url = v.url ?? (v.serve && publicUrl ? new URL(VISION_EXPLAIN_PATH, publicUrl).toString() : undefined);
  return {
    capability: (deviceId) => (url ? { url, token: mintVisionToken(visionKey, deviceId, Date.now() / 1000 + v.tokenTtlSeconds) } : undefined),
    refreshMs: url ? (v.refreshMs ?? Math.floor(v.tokenTtlSeconds * 800)) : undefined,
  };
}

export interface VisionServiceDeps {
  visionKey: string;
  /** Photos are kept under `<dataDir>/photos`. */
  dataDir: string;
  /** Answers when no external explainer is configured (the assistant's vision model, if it has one). */
  fallbackExplainer: VisionExplainer | undefined;
  bus: EventBus;
  metrics: Metrics;
  log: Logger;
}

/** The vision endpoint served here (`vision.serve`), or undefined when it is off. */
export function visionService(d: VisionServiceDeps, v: VisionConfig): VisionService | undefined {
  if (!v.serve) return undefined;
  return {
    visionKey: d.visionKey,
    store: new PhotoStore(join(d.dataDir, 'photos'), { perDevice: v.photosPerDevice, total: v.maxStoredPhotos }),
    // An external explainer when configured, else the assistant's vision model, else a clear "none" answer.
    explainer: v.explainerUrl
      ? httpExplainer(v.explainerUrl, { token: v.explainerToken, timeoutMs: v.explainerTimeoutMs })
      : (d.fallbackExplainer ?? noExplainer),
    maxPhotoBytes: v.maxPhotoBytes,
    uploadsPerMinute: v.uploadsPerMinute,
    bus: d.bus,
    metrics: d.metrics,
    log: d.log.child({ component: 'vision' }),
  };
}
