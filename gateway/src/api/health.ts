import type { FastifyInstance } from 'fastify';
import type { Metrics } from '../metrics.js';

/** Liveness, readiness (every listener up), and Prometheus metrics. */
export async function healthRoutes(app: FastifyInstance, o: { metrics: Metrics; ready: () => boolean }): Promise<void> {
  app.get('/healthz', { schema: { tags: ['ops'], summary: 'The process is alive' } }, async () => ({ status: 'ok' }));
  app.get('/readyz', { schema: { tags: ['ops'], summary: 'Every listener is up and not shutting down' } }, async (_req, reply) => {
    if (o.ready()) return { status: 'ready' };
    return reply.code(503).send({ status: 'not ready' });
  });
  app.get('/metrics', { schema: { tags: ['ops'], summary: 'Prometheus metrics' } }, async (_req, reply) => {
    return reply.type(o.metrics.registry.contentType).send(await o.metrics.registry.metrics());
  });
}
