import { join } from 'node:path';
import { mintVisionToken, type VisionCapability } from '@voxgate/protocol';
import type { Logger } from 'pino';
import type { EventBus } from '../events/bus.js';
import type { Metrics } from '../metrics.js';
import { shareOf } from '../principal.js';
import type { ModelGate } from '../throttle/model-gates.js';
import type { VisionConfig } from './config.js';
import { gatedExplainer, httpExplainer, noExplainer, type VisionExplainer } from './explainer.js';
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
  /** The gateway-wide bound on vision requests (modelRequests.vision); absent: none. */
  gate?: Pick<ModelGate, 'run'> | undefined;
  /** A device's tenant, for its tenant's share of the vision queue. */
  tenantOf?: ((deviceId: string) => string | undefined) | undefined;
}

/** The vision endpoint served here (`vision.serve`), or undefined when it is off. */
export function visionService(d: VisionServiceDeps, v: VisionConfig): VisionService | undefined {
  if (!v.serve) return undefined;
  return {
    visionKey: d.visionKey,
    store: new PhotoStore(join(d.dataDir, 'photos'), { perDevice: v.photosPerDevice, total: v.maxStoredPhotos, totalBytes: v.maxStoredPhotoBytes }, d.tenantOf),
    // An external explainer when configured, else the assistant's vision model, else a clear "none" answer.
    explainer: gated(d, v.explainerUrl ? httpExplainer(v.explainerUrl, { token: v.explainerToken, timeoutMs: v.explainerTimeoutMs }) : d.fallbackExplainer),
    maxPhotoBytes: v.maxPhotoBytes,
    maxConcurrentUploads: v.maxConcurrentUploads,
    uploadsPerMinute: v.uploadsPerMinute,
    bus: d.bus,
    metrics: d.metrics,
    log: d.log.child({ component: 'vision' }),
  };
}

/** The explainer behind modelRequests.vision; "none configured" answers at once (it asks no service). */
function gated(d: VisionServiceDeps, explainer: VisionExplainer | undefined): VisionExplainer {
  if (!explainer) return noExplainer;
  const { gate, tenantOf } = d;
  if (!gate) return explainer;
  // Devices without a tenant share one part of the queue (principal.ts shareOf).
  return gatedExplainer(explainer, gate, (deviceId) => {
    const tenant = tenantOf?.(deviceId);
    return shareOf({ tenant, untenantedOnly: tenant === undefined });
  });
}
