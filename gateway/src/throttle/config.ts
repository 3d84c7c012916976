import { z } from 'zod';
import { env, Int, Ms } from '../config/fields.js';
import type { ModelKind } from './model-gates.js';

/**
 * One kind's bound (a fresh schema per kind: a field's documentation is keyed by its schema object), each field set by
 * `GATEWAY_MODEL_REQUESTS_<KIND>_<FIELD>` too, so an operator who configures by environment alone (Docker, systemd)
 * can tune every gate.
 */
const gateSlice = (kind: ModelKind, what: string, concurrent = 64) => {
  const v = (field: string) => `GATEWAY_MODEL_REQUESTS_${kind.toUpperCase()}_${field}`;
  return z
    .strictObject({
      maxConcurrent: env(v('MAX_CONCURRENT'), Int(1, 100_000, concurrent), `${what} requests in flight at once, gateway-wide`),
      maxConcurrentPerTenant: env(
        v('MAX_CONCURRENT_PER_TENANT'),
        z.coerce.number().int().min(1).max(100_000).optional(),
        '… of them one tenant may hold (devices without a tenant count as one; unset: three quarters of maxConcurrent, rounded up), so the rest stay for the others',
      ),
      maxWaiting: env(
        v('MAX_WAITING'),
        Int(0, 1_000_000, 256),
        '… requests waiting for a slot; beyond, refused (HTTP 503 with Retry-After; a device hears it is busy)',
      ),
      maxWaitingPerTenant: env(
        v('MAX_WAITING_PER_TENANT'),
        Int(1, 1_000_000, 64),
        '… of them one tenant may have waiting (devices without a tenant share one count)',
      ),
      maxWaitMs: env(v('MAX_WAIT_MS'), Ms(10_000, 600_000), '… how long a request waits for a slot before it is refused'),
    })
    .prefault({});
};

/**
 * `modelRequests`: gateway-wide bounds on requests to the paid or slow model services (throttle/model-gates.ts). The
 * per-device and per-tenant rates (voice.converse.turnsPerMinute, assistant.maxConcurrentTurnsPerTenant) bound each
 * party; these bound the sum, so a fleet waking at once queues here instead of opening thousands of requests (and
 * drawing a storm of 429s) at the provider.
 */
export const ModelRequestsSlice = z.strictObject({
  asr: gateSlice('asr', 'Speech-to-text (voice.asr)'),
  // A conversing device holds up to two speech requests (the sentence playing, read at the pace of playback, and the
  // next one fetched ahead): twice assistant.maxConcurrentTurns, so the turns that bound admits can all be spoken.
  tts: gateSlice('tts', 'Text-to-speech (voice.tts)', 128),
  llm: gateSlice('llm', 'Assistant model (assistant.models)'),
  vision: gateSlice('vision', 'Vision explainer (vision.explainerUrl or the assistant vision model)'),
});
export type ModelRequestsConfig = z.infer<typeof ModelRequestsSlice>;
