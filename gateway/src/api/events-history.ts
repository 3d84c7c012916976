import { normalizeDeviceId } from '@voxgate/protocol';
import type { FastifyInstance, FastifyRequest, FastifySchema } from 'fastify';
import { z } from 'zod';
import { EVENT_TYPES, type EventType } from '../events/bus.js';
import { parseCursor, type EventLog } from '../events/history.js';
import { GatewayError } from '../errors.js';
import type { EventVisibility } from './device-scope.js';
import { problems } from './route-helpers.js';
import { jsonSchema } from './schemas.js';

export const HISTORY_PAGE_DEFAULT = 100;
const HISTORY_PAGE_MAX = 1000;
/** Devices one query may name (a longer list: several queries, or none and filter the page). */
const MAX_DEVICES = 100;

export const EventsHistoryQuery = z.object({
  device: z.string().max(2048).optional().describe(`Comma-separated device ids (at most ${MAX_DEVICES}): events of any of them`),
  type: z
    .string()
    .max(1024)
    .optional()
    .describe(`Comma-separated event types: ${EVENT_TYPES.join(', ')}`),
  since: z.string().max(64).optional().describe('ISO 8601 time: only events at or after it'),
  limit: z.number().int().min(1).max(HISTORY_PAGE_MAX).optional().describe(`Events per page (default ${HISTORY_PAGE_DEFAULT}, at most ${HISTORY_PAGE_MAX})`),
  cursor: z.string().max(32).optional().describe("The previous page's `next` (opaque)"),
  order: z
    .enum(['oldest', 'newest'])
    .optional()
    .describe('oldest (default): oldest first from `since`, `next` going forward; newest: the latest first, `next` going back (a timeline that starts now)'),
});

export const HistoryEvent = z.object({
  id: z.string().describe('`<boot>-<seq>`: what `Last-Event-ID` on GET /v1/events resumes from'),
  type: z.enum(EVENT_TYPES),
  deviceId: z.string(),
  at: z.string(),
  data: z.record(z.string(), z.unknown()),
});
export const EventsHistoryPage = z.object({
  events: z.array(HistoryEvent),
  next: z
    .string()
    .optional()
    .describe(
      'Pass as `cursor` for the following page; absent when there is nothing more (yet). A page may hold fewer than `limit` events and still have a `next`',
    ),
});

export interface EventHistoryRouteOptions {
  log: EventLog;
  /**
   * Which events the caller may see (device tenancy plugs in here; api/device-scope.ts eventVisibility): called once
   * per request. The log reads the caller's tenant's events only (filtered as read: a page is not emptied after it),
   * the ids of a `device` filter the caller may not see are taken from the query, and the page keeps what `sees`.
   * Undefined (or no hook): every event.
   */
  visibleTo?: ((req: FastifyRequest) => EventVisibility | undefined) | undefined;
}

/** `GET /v1/events/history`: the persisted event log, in pages, filtered by device, type and time. */
export async function eventHistoryRoutes(app: FastifyInstance, opts: EventHistoryRouteOptions): Promise<void> {
  app.get<{ Querystring: z.infer<typeof EventsHistoryQuery> }>('/v1/events/history', {
    schema: {
      tags: ['events'],
      summary: 'Past events kept in the store (bounded by events.history.maxEvents and maxAgeHours), in pages',
      querystring: jsonSchema(EventsHistoryQuery),
      response: { 200: jsonSchema(EventsHistoryPage, 'output'), ...problems(400, 401, 503) },
    } as FastifySchema,
    handler: async (req) => {
      const q = req.query;
      const devices = list(q.device, MAX_DEVICES, (s) => {
        const id = normalizeDeviceId(s);
        if (!id) throw new GatewayError('INVALID_REQUEST', `device filter "${s.slice(0, 64)}" is not a device id`);
        return id;
      });
      const types = list(q.type, EVENT_TYPES.length, (s) => {
        if (!(EVENT_TYPES as readonly string[]).includes(s))
          throw new GatewayError('INVALID_REQUEST', `unknown event type "${s.slice(0, 64)}"; known: ${EVENT_TYPES.join(', ')}`);
        return s as EventType;
      });
      const since = q.since === undefined ? undefined : Date.parse(q.since);
      if (since !== undefined && !Number.isFinite(since))
        throw new GatewayError('INVALID_REQUEST', 'since must be an ISO 8601 time, e.g. 2026-11-26T08:00:00Z');
      if (q.cursor !== undefined && parseCursor(q.cursor) === undefined) throw new GatewayError('INVALID_REQUEST', "cursor must be a previous page's `next`");
      const visible = opts.visibleTo?.(req);
      const asked = visible ? seenOnly(devices, visible) : devices;
      // Only ids the caller may not see: answered as ids with no events (the page read for them said whether they had more).
      if (asked?.size === 0) return { events: [] };
      const limit = q.limit ?? HISTORY_PAGE_DEFAULT;
      // A tenant's key: its tenant's events only, filtered by the log as it reads (its `next` passes over nobody else's).
      const page = await opts.log.read({ devices: asked, types, since, cursor: q.cursor, limit, order: q.order, tenant: visible?.tenant });
      const events = visible ? page.events.filter((e) => visible.sees(e)) : page.events;
      return page.next === undefined ? { events } : { events, next: page.next };
    },
  });
}

/**
 * The ids of a `device` filter the caller may see. A page read for another tenant's device came back empty, but its
 * `next` said whether that device had more events: following it counted them, `type` and `since` told their kinds and
 * times, and any id was told apart from a device's (red team 10).
 */
function seenOnly(devices: Set<string> | undefined, visible: EventVisibility): Set<string> | undefined {
  if (!devices) return undefined;
  return new Set([...devices].filter((deviceId) => visible.seesDevice(deviceId)));
}

function list<T>(raw: string | undefined, max: number, each: (s: string) => T): Set<T> | undefined {
  if (!raw) return undefined;
  const items = raw
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  if (items.length > max) throw new GatewayError('INVALID_REQUEST', `at most ${max} values in one filter`);
  return items.length ? new Set(items.map(each)) : undefined;
}
