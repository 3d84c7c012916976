import type { JsonLimits } from '@voxgate/protocol';
import type { SchemaLimits } from '../schemas/untrusted-schema.js';
import type { RateLimit } from '../throttle/token-bucket.js';
import type { CallTimeouts } from './call-queue.js';
import type { CatalogBudget } from './catalog-budget.js';
import type { SourceReadBudgets } from './source-read-budgets.js';

/** What every device session of this gateway runs with (config `session`, `calls`, `frames`, `schemas`, `vision`). */
export interface SessionSettings {
  requestTimeoutMs: number;
  maxToolPages: number;
  maxTools: number;
  /** Bytes of one device's catalog (its tools' JSON as listed): the walk stops there and the catalog is cut. */
  maxCatalogBytes: number;
  /** The gateway's one budget for the catalogs all its devices hold (`devices.catalogBudgetBytes`), shared like `calls`. */
  catalogs: CatalogBudget;
  /** config `calls`' timeouts: one object for every session (a copy per session was ~50 B per device). */
  calls: CallTimeouts;
  queueLimit: number;
  concurrency: number;
  clientInfo: { name: string; version: string };
  /** Depth and size bounds of every frame, checked before it is parsed. */
  frameLimits: JsonLimits;
  /** Unsolicited text frames per device (`frames.devicePerSecond`, `deviceBurst`): past them its link pauses (read-budget.ts). */
  unsolicitedFrames: RateLimit;
  /** The same frames per source address (`frames.addressPerSecond`, `addressBurst`), one set for every session. */
  sourceFrames: SourceReadBudgets;
  /** Bounds of each tool schema in the catalog; a tool over them is left out. */
  schemaLimits: SchemaLimits;
  /** Setup (initialize, each tools/list page) is retried while the link is up: first wait, doubling up to the max. */
  setupRetryMinMs: number;
  setupRetryMaxMs: number;
  /** Failures other than timeouts (a malformed reply, a device error) tolerated per setup step before giving up. */
  setupMaxErrors: number;
  /** Re-send initialize with a fresh vision token this often (before the token expires); unset: never. */
  visionRefreshMs?: number | undefined;
}

export type SessionState = 'awaiting_hello' | 'initializing' | 'ready' | 'failed' | 'closed';

/** What setup is doing while it retries a busy device (a long tool, a voice-session wait, a Wi-Fi blip). */
export interface SetupProgress {
  step: string;
  attempt: number;
  lastError: string;
  retryAt: number;
}
