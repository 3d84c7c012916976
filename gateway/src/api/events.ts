import { createHash } from 'node:crypto';
import { normalizeDeviceId } from '@voxgate/protocol';
import type { FastifyInstance, FastifySchema } from 'fastify';
import type { z } from 'zod';
import { EVENT_TYPES, sseFrame, type EventBus, type EventType, type GatewayEvent } from '../events/bus.js';
import { GatewayError } from '../errors.js';
import type { Metrics } from '../metrics.js';
import type { DeviceTenancy } from '../devices/tenants.js';
import { eventVisibility, NO_TENANTS } from './device-scope.js';
import { EventsQuery, Problem, jsonSchema } from './schemas.js';
import { SseAnswers } from './sse-writer.js';
import { KeyCounts } from '../throttle/key-counts.js';
import { tenantsAmong, tenantShare } from '../throttle/tenant-share.js';
import { REFUSAL_LINES, ThrottledLog } from '../throttle/throttled-log.js';

export interface EventRouteOptions {
  bus: EventBus;
  metrics: Metrics;
  /** Open streams in total and per API key. */
  maxStreams: number;
  maxStreamsPerKey: number;
  /** A stream this far behind is dropped rather than buffered without bound. */
  maxBufferedBytes: number;
  /** A stream whose socket takes nothing of what waits for it this long is dropped (events.writeTimeoutMs). */
  writeTimeoutMs: number;
  /** Devices' tenants: a tenant's key gets only its devices' events; fleet-wide events (no device) go to operator keys only. */
  tenancy?: DeviceTenancy | undefined;
  /**
   * Streams one tenant's keys hold together (keys without a tenant count as one): `maxStreamsPerTenant`, else a share of
   * maxStreams (throttle/tenant-share.ts) once the keys belong to more than one tenant. Absent: no tenant bound.
   */
  streamTenants?: { apiKeys: () => readonly string[]; tenantOf: (key: string) => string | undefined; maxStreamsPerTenant: number | undefined } | undefined;
}

/** Server-sent events: every bus event the caller may see, filtered, resumable with `Last-Event-ID`. */
export async function eventRoutes(app: FastifyInstance, opts: EventRouteOptions): Promise<void> {
  const streams = new StreamCounter(opts.maxStreams, opts.maxStreamsPerKey, tenantCap(opts));
  // As many as requests past a cap: bounded per reason.
  const refusals = new ThrottledLog(app.log, 'warn', REFUSAL_LINES);
  const answers = new SseAnswers({ maxUnreadBytes: opts.maxBufferedBytes, writeTimeoutMs: opts.writeTimeoutMs, metrics: opts.metrics, log: app.log });
  app.get<{ Querystring: z.infer<typeof EventsQuery> }>('/v1/events', {
    schema: {
      tags: ['events'],
      summary: 'Device events as text/event-stream (supports Last-Event-ID; an unknown one gets `event: resync`)',
      querystring: jsonSchema(EventsQuery),
      response: {
        200: { description: 'text/event-stream of {id, type, deviceId, at, data}', type: 'string' },
        429: { ...jsonSchema(Problem, 'output'), description: 'problem+json: too many open streams (TOO_MANY_STREAMS)' },
      },
    } as FastifySchema,
    handler: async (req, reply) => {
      const devices = parseList(req.query.device, (s) => {
        const id = normalizeDeviceId(s);
        if (!id) throw new GatewayError('INVALID_REQUEST', `device filter "${s.slice(0, 64)}" is not a device id`);
        return id;
      });
      const types = parseList(req.query.type, (s) => {
        if (!(EVENT_TYPES as readonly string[]).includes(s))
          throw new GatewayError('INVALID_REQUEST', `unknown event type "${s.slice(0, 64)}"; known: ${EVENT_TYPES.join(', ')}`);
        return s as EventType;
      });
      // Asked per event (replayed ones too): a device moved to another tenant stops streaming to the old one at once, and
      // the new one gets only what was published under it (GatewayEvent.tenant), never the old one's replayed.
      const visible = eventVisibility(req, opts.tenancy ?? NO_TENANTS);
      const wanted = (e: GatewayEvent) => (!devices || devices.has(e.deviceId)) && (!types || types.has(e.type)) && (!visible || visible.sees(e));
      const lastEventId = req.headers['last-event-id'];

      const key = keyOf(req.headers.authorization);
      const tenant = req.caller?.tenant ?? OPERATORS;
      const refused = streams.open(key, tenant);
      if (refused) {
        opts.metrics.sseDropped.inc({ reason: refused });
        refusals.write({ reason: refused, open: streams.total }, 'SSE stream refused: too many open streams', refused);
        void reply.header('retry-after', '10');
        throw new GatewayError('TOO_MANY_STREAMS', REFUSED[refused](opts));
      }

      const res = reply.raw;
      const out = answers.open(reply, { reason: 'slow' });
      out.write(': voxgate events\nretry: 2000\n\n');
      const write = (e: GatewayEvent) => {
        // The frame is built once per event and shared by every stream.
        if (wanted(e)) out.write(sseFrame(e));
      };
      let unsubscribe: () => boolean;
      if (typeof lastEventId === 'string') {
        // Events published while the replay is looked up (it may ask NATS) wait, then follow it once each.
        const pending: GatewayEvent[] = [];
        unsubscribe = opts.bus.subscribe((e) => pending.push(e));
        const replay = await opts.bus.replay(lastEventId.trim());
        unsubscribe();
        const sent = new Set<string>();
        if ('resync' in replay) {
          // The id is from another start, or older than the buffer: the client's view is stale, and says so.
          out.write(`id: ${opts.bus.lastId}\nevent: resync\ndata: ${JSON.stringify({ reason: replay.resync, lastId: opts.bus.lastId })}\n\n`);
        } else
          for (const e of replay.events) {
            sent.add(e.id);
            write(e);
          }
        for (const e of pending) if (!sent.has(e.id)) write(e);
        if (res.destroyed) return void streams.close(key, tenant); // gone while the replay was looked up
      }
      unsubscribe = opts.bus.subscribe(write);
      opts.metrics.sseClients.inc();
      let closed = false;
      const done = () => {
        if (closed) return;
        closed = true;
        unsubscribe();
        streams.close(key, tenant);
        opts.metrics.sseClients.dec();
      };
      res.on('close', done);
      res.on('error', done);
    },
  });
}

/**
 * Who a stream counts against: a digest of the bearer key (already authenticated), never the key itself;
 * the key alone, so `bearer` vs `Bearer` or extra spaces never make a second count.
 */
function keyOf(authorization: string | undefined): string {
  const key = /^Bearer\s+(\S+)\s*$/i.exec(authorization ?? '')?.[1] ?? '';
  return createHash('sha256').update(key).digest('base64url');
}

/** Who the streams of keys without a tenant count against, together. */
const OPERATORS = '\u0000operators';

type StreamRefusal = 'total_cap' | 'key_cap' | 'tenant_cap';
const REFUSED: Record<StreamRefusal, (o: EventRouteOptions) => string> = {
  key_cap: (o) => `this API key already has ${o.maxStreamsPerKey} open event streams; close one first`,
  tenant_cap: () => "this API key's tenant already holds its share of the open event streams; close one first",
  total_cap: () => 'the gateway has too many open event streams; retry later',
};

/**
 * What one tenant's keys may hold together: the set bound, else the share once the keys belong to more than one tenant
 * (with every key in one, or none, there is nobody to keep room for). Read per stream opened: the key list may be reloaded.
 */
function tenantCap(o: EventRouteOptions): () => number {
  const t = o.streamTenants;
  if (!t) return () => o.maxStreams;
  const share = tenantShare(o.maxStreams, t.maxStreamsPerTenant);
  return () => (t.maxStreamsPerTenant !== undefined || tenantsAmong(t.apiKeys(), t.tenantOf) > 1 ? share : o.maxStreams);
}

/**
 * Open streams in total, per key and per tenant (all its keys), so neither one key nor one tenant's keys can take every
 * stream: before the tenant's bound (red team 10), a tenant with several keys, each under its own cap, held them all.
 */
class StreamCounter {
  private readonly perKey = new KeyCounts<string>();
  private readonly perTenant = new KeyCounts<string>();
  total = 0;

  constructor(
    private readonly max: number,
    private readonly maxPerKey: number,
    private readonly maxPerTenant: () => number,
  ) {}

  /** Count a new stream; the reason when it is refused. */
  open(key: string, tenant: string): StreamRefusal | undefined {
    if (this.perKey.get(key) >= this.maxPerKey) return 'key_cap';
    const perTenant = this.maxPerTenant();
    // (A share as large as the whole is no bound of its own: the gateway's cap answers.)
    if (perTenant < this.max && this.perTenant.get(tenant) >= perTenant) return 'tenant_cap';
    if (this.total >= this.max) return 'total_cap';
    this.perKey.add(key, 1);
    this.perTenant.add(tenant, 1);
    this.total++;
    return undefined;
  }

  close(key: string, tenant: string): void {
    this.perKey.add(key, -1);
    this.perTenant.add(tenant, -1);
    this.total--;
  }
}

function parseList<T>(raw: string | undefined, each: (s: string) => T): Set<T> | undefined {
  if (!raw) return undefined;
  const items = raw
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  return items.length ? new Set(items.map(each)) : undefined;
}
