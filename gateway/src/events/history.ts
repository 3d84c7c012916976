import type { EventType, GatewayEvent, ReplaySource } from './bus.js';
import type { EventsConfig } from './config.js';

/**
 * The persisted event log behind `GET /v1/events/history` and `Last-Event-ID` after a restart: a port with
 * two implementations, a table beside the store's documents (`history-sqlite.ts`, embedded) and the
 * JetStream event stream the cluster already writes (`history-stream.ts`). Bounded by count and age,
 * oldest dropped first.
 */
export interface EventLog extends ReplaySource {
  /** Keep `e` (the embedded log writes in batches; the cluster's stream already holds every event: a no-op there). */
  append(e: GatewayEvent): void;
  /** One page of events matching `q`, oldest first (newest first with `order: 'newest'`). */
  read(q: HistoryQuery): Promise<HistoryPage>;
  /** Write what waits, then stop taking events (idempotent). */
  close(): void | Promise<void>;
}

export interface HistoryQuery {
  /** Only these devices (any of them). */
  devices?: ReadonlySet<string> | undefined;
  /** Only these types (any of them). */
  types?: ReadonlySet<EventType> | undefined;
  /**
   * Only events published under this tenant (GatewayEvent.tenant): a tenant's key reads these (api/device-scope.ts
   * eventVisibility). Undefined: every event, whoever's.
   */
  tenant?: string | undefined;
  /** Only events at or after this time (epoch ms). */
  since?: number | undefined;
  /** Where the previous page stopped (its `next`); the page goes on from there. */
  cursor?: string | undefined;
  limit: number;
  /** Oldest first (default), or newest first, each `next` going further back. */
  order?: 'oldest' | 'newest' | undefined;
}

export interface HistoryPage {
  events: GatewayEvent[];
  /** The cursor for the following page; absent when there is nothing more (now). */
  next?: string;
}

/**
 * A cursor is the position of the last event a page held (a row of the table, a sequence of the stream),
 * as a decimal string; callers treat it as opaque. Undefined when malformed.
 */
export function parseCursor(cursor: string): number | undefined {
  return /^\d{1,15}$/.test(cursor) ? Number(cursor) : undefined;
}

export const formatCursor = (position: number): string => String(position);

/** Whether `e` passes the query's device, type and tenant filters. */
export function matches(q: Pick<HistoryQuery, 'devices' | 'types' | 'tenant'>, e: Pick<GatewayEvent, 'deviceId' | 'type' | 'tenant'>): boolean {
  return (!q.devices || q.devices.has(e.deviceId)) && (!q.types || q.types.has(e.type)) && (q.tenant === undefined || e.tenant === q.tenant);
}

/** events.history.maxAgeHours in milliseconds. */
export const historyMaxAgeMs = (h: EventsConfig['history']): number => Math.round(h.maxAgeHours * 3_600_000);
