import { createHash } from 'node:crypto';
import { normalizeDeviceId } from '@voxgate/protocol';
import type { FastifyInstance, FastifySchema } from 'fastify';
import type { z } from 'zod';
import { EVENT_TYPES, sseFrame, type EventBus, type EventType, type GatewayEvent } from '../events/bus.js';
import { GatewayError } from '../errors.js';
import type { Metrics } from '../metrics.js';
import type { DeviceTenancy } from '../devices/tenants.js';
import { callerSees, NO_TENANTS } from './device-scope.js';
import { EventsQuery, Problem, jsonSchema } from './schemas.js';
import { SseAnswers } from './sse-writer.js';

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
}

/** Server-sent events: every bus event the caller may see, filtered, resumable with `Last-Event-ID`. */
export async function eventRoutes(app: FastifyInstance, opts: EventRouteOptions): Promise<void> {
  const streams = new StreamCounter(opts.maxStreams, opts.maxStreamsPerKey);
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
      const tenancy = opts.tenancy ?? NO_TENANTS;
      // Asked per event (replayed ones too): a device moved to another tenant stops streaming to the old one at once.
      const wanted = (e: GatewayEvent) => (!devices || devices.has(e.deviceId)) && (!types || types.has(e.type)) && callerSees(req, tenancy, e.deviceId);
      const lastEventId = req.headers['last-event-id'];

      const key = keyOf(req.headers.authorization);
      const refused = streams.open(key);
      if (refused) {
        opts.metrics.sseDropped.inc({ reason: refused });
        req.log.warn({ reason: refused, open: streams.total }, 'SSE stream refused: too many open streams');
        void reply.header('retry-after', '10');
        throw new GatewayError(
          'TOO_MANY_STREAMS',
          refused === 'key_cap'
            ? `this API key already has ${opts.maxStreamsPerKey} open event streams; close one first`
            : 'the gateway has too many open event streams; retry later',
        );
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
        if (res.destroyed) return void streams.close(key); // gone while the replay was looked up
      }
      unsubscribe = opts.bus.subscribe(write);
      opts.metrics.sseClients.inc();
      let closed = false;
      const done = () => {
        if (closed) return;
        closed = true;
        unsubscribe();
        streams.close(key);
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

/** Open streams in total and per key, so one key can never take every stream. */
class StreamCounter {
  private readonly perKey = new Map<string, number>();
  total = 0;

  constructor(
    private readonly max: number,
    private readonly maxPerKey: number,
  ) {}

  /** Count a new stream; the reason when it is refused. */
  open(key: string): 'total_cap' | 'key_cap' | undefined {
    const n = this.perKey.get(key) ?? 0;
    if (n >= this.maxPerKey) return 'key_cap';
    if (this.total >= this.max) return 'total_cap';
    this.perKey.set(key, n + 1);
    this.total++;
    return undefined;
  }

  close(key: string): void {
    const n = (this.perKey.get(key) ?? 1) - 1;
    if (n <= 0) this.perKey.delete(key);
    else this.perKey.set(key, n);
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
