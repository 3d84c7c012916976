import { normalizeDeviceId } from '@voxgate/protocol';
import type { FastifyInstance, FastifySchema } from 'fastify';
import type { z } from 'zod';
import { EVENT_TYPES, type EventBus, type EventType, type GatewayEvent } from '../events/bus.js';
import { GatewayError } from '../errors.js';
import type { Metrics } from '../metrics.js';
import { EventsQuery, jsonSchema } from './schemas.js';

const HEARTBEAT_MS = 15_000;
/** A client this far behind is dropped rather than buffered without bound. */
const MAX_BUFFERED_BYTES = 4 * 1024 * 1024;

/** Server-sent events: every bus event, filtered, resumable with `Last-Event-ID`. */
export async function eventRoutes(app: FastifyInstance, opts: { bus: EventBus; metrics: Metrics }): Promise<void> {
  app.get<{ Querystring: z.infer<typeof EventsQuery> }>('/v1/events', {
    schema: {
      tags: ['events'],
      summary: 'Device events as text/event-stream (supports Last-Event-ID)',
      querystring: jsonSchema(EventsQuery),
      response: { 200: { description: 'text/event-stream of {id, type, deviceId, at, data}', type: 'string' } },
    } as FastifySchema,
    handler: async (req, reply) => {
      const devices = parseList(req.query.device, (s) => {
        const id = normalizeDeviceId(s);
        if (!id) throw new GatewayError('INVALID_REQUEST', `device filter "${s.slice(0, 64)}" is not a device id`);
        return id;
      });
      const types = parseList(req.query.type, (s) => {
        if (!(EVENT_TYPES as readonly string[]).includes(s)) throw new GatewayError('INVALID_REQUEST', `unknown event type "${s.slice(0, 64)}"; known: ${EVENT_TYPES.join(', ')}`);
        return s as EventType;
      });
      const wanted = (e: GatewayEvent) => (!devices || devices.has(e.deviceId)) && (!types || types.has(e.type));
      const lastEventId = req.headers['last-event-id'];

      reply.hijack();
      const res = reply.raw;
      res.writeHead(200, {
        'content-type': 'text/event-stream; charset=utf-8',
        'cache-control': 'no-cache, no-transform',
        connection: 'keep-alive',
        'x-accel-buffering': 'no',
      });
      res.write(': voxgate events\nretry: 2000\n\n');
      const write = (e: GatewayEvent) => {
        if (!wanted(e)) return;
        if (res.writableLength > MAX_BUFFERED_BYTES) {
          req.log.warn('SSE client too slow; closing its stream');
          res.destroy();
          return;
        }
        res.write(`id: ${e.id}\nevent: ${e.type}\ndata: ${JSON.stringify(e)}\n\n`);
      };
      if (typeof lastEventId === 'string') for (const e of opts.bus.since(lastEventId)) write(e);
      const unsubscribe = opts.bus.subscribe(write);
      const heartbeat = setInterval(() => res.write(': ping\n\n'), HEARTBEAT_MS);
      opts.metrics.sseClients.inc();
      const done = () => {
        clearInterval(heartbeat);
        if (unsubscribe()) opts.metrics.sseClients.dec();
      };
      res.on('close', done);
      res.on('error', done);
    },
  });
}

function parseList<T>(raw: string | undefined, each: (s: string) => T): Set<T> | undefined {
  if (!raw) return undefined;
  const items = raw.split(',').map((s) => s.trim()).filter(Boolean);
  return items.length ? new Set(items.map(each)) : undefined;
}
