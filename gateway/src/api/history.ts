import type { FastifyInstance, FastifySchema } from 'fastify';
import { z } from 'zod';
import type { MetricsHistory } from '../metrics-history.js';
import { Problem, jsonSchema } from './schemas.js';

const Sample = z.object({
  at: z.string(),
  devicesOnline: z.record(z.string(), z.number()).describe('Devices connected, by transport'),
  callsPerSecond: z.record(z.string(), z.number()).describe('Device calls per second over the interval, by outcome'),
  callLatencyMs: z.number().nullable().describe('Mean device-call latency over the interval (null: no call finished)'),
  eventsPerSecond: z.number(),
});
const History = z.object({ intervalMs: z.number().int(), capacity: z.number().int(), samples: z.array(Sample) });

/** The in-memory metric history (the console's health charts); the full series stay on /metrics. */
export async function historyRoutes(app: FastifyInstance, o: { history: MetricsHistory }): Promise<void> {
  app.get('/v1/metrics/history', {
    schema: {
      tags: ['ops'],
      summary: 'Recent metric samples kept in memory (default: one every 10 s for the last hour), oldest first',
      response: { 200: jsonSchema(History, 'output'), 401: { ...jsonSchema(Problem, 'output'), description: 'problem+json' } },
    } as FastifySchema,
    handler: async () => ({ intervalMs: o.history.intervalMs, capacity: o.history.capacity, samples: o.history.samples() }),
  });
}
