import { z } from 'zod';
import { Bool, documented, env, Int, Ms } from '../config/fields.js';

/**
 * Bytes of the event history's data, in all or per tenant: at least 1 MiB (about a hundred events of the 8 KiB a device
 * may send), at most 64 GiB: within the range of the cluster's `events.maxBytes`, which defaults to it.
 */
const HistoryBytes = z.coerce
  .number()
  .int()
  .min(1024 * 1024)
  .max(64 * 1024 ** 3);

/** The event bus, its replay buffer and the SSE streams that read it. */
export const EventsSlice = z.strictObject({
  bufferSize: documented(
    z.coerce.number().int().min(0).max(1_000_000).default(1000),
    'events kept for `Last-Event-ID` replay (device-sent data over 8 KiB is replaced by `{truncated, bytes}`)',
  ),
  /** device.message + device.notification events per device: sustained rate and burst; beyond, dropped and counted. */
  devicePerSecond: env(
    'GATEWAY_EVENTS_DEVICE_RATE',
    z.coerce.number().min(0.01).max(100_000).default(20),
    '`device.message`, `device.notification`, `device.photo` and `device.tools_changed` events per device per second; beyond, dropped and counted',
  ),
  deviceBurst: env('GATEWAY_EVENTS_DEVICE_BURST', z.coerce.number().int().min(1).max(1_000_000).default(50), '… and their burst'),
  /** Open SSE streams in total and per API key; beyond, 429 TOO_MANY_STREAMS. */
  maxStreams: env('GATEWAY_SSE_MAX_STREAMS', z.coerce.number().int().min(1).max(100_000).default(1000), 'open `GET /v1/events` streams in total'),
  maxStreamsPerKey: env('GATEWAY_SSE_MAX_STREAMS_PER_KEY', z.coerce.number().int().min(1).max(100_000).default(100), '… and per API key'),
  /** Optional (not defaulted): unset, a share of maxStreams (throttle/tenant-share.ts) once the keys belong to more than one tenant. */
  maxStreamsPerTenant: env(
    'GATEWAY_SSE_MAX_STREAMS_PER_TENANT',
    z.coerce.number().int().min(1).max(100_000).optional(),
    '… per tenant, all its API keys together (keys without a tenant count as one)',
    '3/4 of maxStreams, rounded up, once the API keys belong to more than one tenant (until then: maxStreams)',
  ),
  /** A stream whose unsent bytes pass this is closed (a reader too slow for the event rate, or a turn's caller that stopped reading). */
  maxBufferedBytes: documented(
    Int(64 * 1024, 256 * 1024 * 1024, 1024 * 1024),
    'an SSE stream this far behind is closed (`/v1/events`; a streamed assistant turn or chat completion, whose turn is cancelled)',
  ),
  /**
   * A stream whose socket takes none of the bytes waiting for it this long is closed: below `maxBufferedBytes`, and
   * after a turn's answer ended, nothing else would free them (or the socket) until the caller read.
   */
  writeTimeoutMs: documented(
    Ms(30_000),
    'an SSE stream whose caller reads none of the bytes waiting for it this long is closed (also once a streamed turn has ended)',
  ),
  /**
   * The persisted event log (`GET /v1/events/history`, `Last-Event-ID` after a restart): a table in the
   * SQLite store, or with the cluster on the JetStream event stream. Oldest dropped first past any bound.
   */
  history: z
    .strictObject({
      enabled: env('GATEWAY_EVENTS_HISTORY', Bool.default(true), 'keep events in the store for `GET /v1/events/history` and `Last-Event-ID` after a restart'),
      maxEvents: env(
        'GATEWAY_EVENTS_HISTORY_MAX_EVENTS',
        z.coerce.number().int().min(1).max(100_000_000).default(100_000),
        'events kept in the history at most; past it, the tenant holding the most events loses its oldest first',
      ),
      maxEventsPerTenant: env(
        'GATEWAY_EVENTS_HISTORY_MAX_EVENTS_PER_TENANT',
        z.coerce.number().int().min(1).max(100_000_000).optional(),
        "events of one tenant's devices kept at most (devices without a tenant and fleet-wide events are one more tenant); past it, that tenant's oldest go",
        'no share below `maxEvents`',
      ),
      /**
       * Events' data in bytes, as written: the JSON text of each event's `data` (UTF-8). Device-driven events carry up
       * to 8 KiB each, so the count bound alone let the history reach ~800 MB, and a tenant of large events take far
       * more of the disk than its count share.
       */
      maxBytes: env(
        'GATEWAY_EVENTS_HISTORY_MAX_BYTES',
        HistoryBytes.default(256 * 1024 * 1024),
        "bytes of event data kept in the history at most (each event's `data` as its stored JSON text); past it, the tenant holding the most bytes loses its oldest first. With the cluster on, the event stream's `max_bytes` (whole messages)",
      ),
      maxBytesPerTenant: env(
        'GATEWAY_EVENTS_HISTORY_MAX_BYTES_PER_TENANT',
        HistoryBytes.optional(),
        "… and those of one tenant's devices (embedded store); past it, that tenant's oldest go",
        'no share below `maxBytes`',
      ),
      maxAgeHours: env(
        'GATEWAY_EVENTS_HISTORY_MAX_AGE_HOURS',
        z.coerce
          .number()
          .min(0.01)
          .max(24 * 366)
          .default(168),
        '… and for at most this many hours',
      ),
      /** Events are written in batches: every `flushMs`, or sooner once `batchSize` wait. */
      flushMs: documented(
        z.coerce.number().int().min(10).max(10_000).default(250),
        'events wait at most this long before they are written (a SIGKILL loses at most that batch)',
      ),
      batchSize: documented(z.coerce.number().int().min(1).max(10_000).default(500), '… or until this many wait'),
    })
    // A share above the whole never applies: the operator meant something else (a unit, a digit), and is told so.
    .refine((h) => !(typeof h.maxEventsPerTenant === 'number' && typeof h.maxEvents === 'number' && h.maxEventsPerTenant > h.maxEvents), {
      path: ['maxEventsPerTenant'],
      message: 'must be at most events.history.maxEvents: a share above the whole history would never apply',
    })
    .refine((h) => !(typeof h.maxBytesPerTenant === 'number' && typeof h.maxBytes === 'number' && h.maxBytesPerTenant > h.maxBytes), {
      path: ['maxBytesPerTenant'],
      message: 'must be at most events.history.maxBytes: a share above the whole history would never apply',
    })
    .prefault({}),
});
export type EventsConfig = z.infer<typeof EventsSlice>;
