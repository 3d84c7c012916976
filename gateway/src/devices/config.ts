import { z } from 'zod';
import { always, documented, env, Int, Ms } from '../config/fields.js';

/** The call queue per device, the setup of a device's session, and the devices remembered. */

export const CallsSlice = z
  .strictObject({
    defaultTimeoutMs: env('GATEWAY_CALL_TIMEOUT_MS', Ms(30_000), 'per-call timeout when the caller gives none'),
    maxTimeoutMs: env('GATEWAY_CALL_MAX_TIMEOUT_MS', Ms(300_000), "cap on a caller's `timeoutMs`"),
    /** Calls waiting per device beyond the one running; more is `DEVICE_BUSY`. */
    queueLimit: env('GATEWAY_CALL_QUEUE_LIMIT', z.coerce.number().int().min(0).max(10_000).default(16), 'calls waiting per device before `DEVICE_BUSY`'),
    /** Calls in flight per device; the reference firmware runs one tool at a time. */
    concurrency: documented(z.coerce.number().int().min(1).max(64).default(1), 'calls in flight per device (the reference firmware runs one tool at a time)'),
  })
  .refine((c) => !(typeof c?.defaultTimeoutMs === 'number' && typeof c.maxTimeoutMs === 'number' && c.defaultTimeoutMs > c.maxTimeoutMs), {
    path: ['defaultTimeoutMs'],
    message: 'must not exceed calls.maxTimeoutMs',
    when: always,
  });
export type CallsConfig = z.infer<typeof CallsSlice>;

/** A device's setup: initialize and the tools/list walk (the call queue is `calls`). */
export const SessionSlice = z.strictObject({
  /** initialize and each tools/list page must answer within this. */
  requestTimeoutMs: documented(Ms(10_000), "`initialize` and each `tools/list` page; also the wait for a WebSocket device's hello"),
  maxToolPages: documented(z.coerce.number().int().min(1).max(1000).default(64), "pages of a device's catalog walk"),
  maxTools: documented(z.coerce.number().int().min(1).max(10_000).default(1024), 'tools of one device'),
  /**
   * Bytes of one device's catalog (its tools' JSON as listed). A real xiaozhi device lists ~5-30 tools in 8000-byte
   * pages, tens of KB at most: 256 KiB is room for several times the largest, while the page and tool caps alone let
   * one device hold 64 pages of up to 256 KB (MQTT frames), ~16 MB.
   */
  maxCatalogBytes: documented(
    Int(1024, 64 * 1024 * 1024, 256 * 1024),
    "bytes of one device's catalog (its tools' JSON); past it the catalog is cut",
    '`262144` (256 KiB)',
  ),
  /** A setup step that fails is retried while the link is up: first wait, doubling up to the max. */
  setupRetryMinMs: documented(Ms(1_000), 'a failed setup step is retried while the link is up: first wait, doubling …'),
  setupRetryMaxMs: documented(Ms(30_000), '… up to this'),
  /** Failures other than timeouts (malformed reply, device error) per setup step before the device is `failed`. */
  setupMaxErrors: documented(z.coerce.number().int().min(1).max(100).default(5), 'failures other than timeouts per setup step before the device is `failed`'),
});
export type SessionConfig = z.infer<typeof SessionSlice>;

export const DevicesSlice = z.strictObject({
  /** Devices remembered (listed with lastSeenAt); past it offline ones are forgotten, never-ready ones first. */
  maxKnown: env(
    'GATEWAY_DEVICES_MAX_KNOWN',
    z.coerce.number().int().min(1).max(10_000_000).default(50_000),
    'devices remembered (in memory and in the store); past it offline ones are forgotten, never-ready ones first, then the least recently seen (named ones never)',
  ),
  /**
   * Bytes of every device catalog held at once, each distinct catalog counted once (a fleet of one firmware shares
   * one). 256 MiB holds a thousand catalogs at session.maxCatalogBytes, or thousands of firmwares' real ones (tens
   * of KB): far beyond a real fleet, yet it bounds what devices with made-up catalogs can make the gateway hold
   * (memory runs ~1.5x the JSON: 5.7 MiB per device for 3.8 MB catalogs, as measured).
   */
  catalogBudgetBytes: env(
    'GATEWAY_DEVICES_CATALOG_BUDGET_BYTES',
    Int(1024, 16 * 1024 * 1024 * 1024, 256 * 1024 * 1024),
    "bytes of every device catalog held at once (identical catalogs count once); past it a new device's catalog is refused: it is ready with no tools",
    '`268435456` (256 MiB)',
  ),
  /** A device's last seen moves with any traffic; the store is written at most this often per device (and at disconnect). */
  lastSeenWriteMs: documented(
    z.coerce.number().int().min(1_000).max(3_600_000).default(60_000),
    "how often at most a device's last seen is written to the store (and once at disconnect)",
  ),
});
export type DevicesConfig = z.infer<typeof DevicesSlice>;
