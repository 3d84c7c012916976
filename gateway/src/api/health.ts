import Fastify, { LogController, type FastifyBaseLogger, type FastifyInstance } from 'fastify';
import type { Logger } from 'pino';
import type { Metrics } from '../metrics.js';
import { authenticate } from './auth.js';
import { GatewayError } from '../errors.js';
import { registerProblemHandlers } from './problem.js';

/** Liveness and readiness: open, so orchestrators can probe without a key. */
export async function healthRoutes(app: FastifyInstance, o: { ready: () => boolean }): Promise<void> {
  app.get('/healthz', { schema: { tags: ['ops'], summary: 'The process is alive' } }, async () => ({ status: 'ok' }));
  app.get('/readyz', { schema: { tags: ['ops'], summary: 'Every listener is up and not shutting down' } }, async (_req, reply) => {
    if (o.ready()) return { status: 'ready' };
    return reply.code(503).send({ status: 'not ready' });
  });
}

export interface MetricsRouteOptions {
  metrics: Metrics;
  /** Bearer keys that may scrape; undefined serves without a key (a separate listener with no metrics key). */
  keys: (() => readonly string[]) | undefined;
}

/**
 * Prometheus metrics. They tell an attacker the fleet's size, call outcomes and refusals, so by default
 * they need a key: an API key or the metrics key (`GATEWAY_METRICS_KEY`).
 */
export async function metricsRoute(app: FastifyInstance, o: MetricsRouteOptions): Promise<void> {
  const keys = o.keys;
  app.get(
    '/metrics',
    {
      schema: {
        tags: ['ops'],
        summary: 'Prometheus metrics (Authorization: Bearer <API key or metrics key>)',
        ...(keys ? { security: [{ apiKey: [] }] } : {}),
      },
      onRequest: async (req, reply) => {
        if (!keys || authenticate(req.headers.authorization, keys())) return;
        void reply.header('www-authenticate', 'Bearer realm="voxgate-metrics"');
        throw new GatewayError('UNAUTHORIZED', 'send a key: Authorization: Bearer <API key or metrics key>');
      },
    },
    async (_req, reply) => reply.type(o.metrics.registry.contentType).send(await o.metrics.registry.metrics()),
  );
}

/** `/metrics` on a listener of its own (`metrics.port`), so it can be bound to an internal address. */
export async function startMetricsListener(
  o: MetricsRouteOptions & { host: string; port: number; log: Logger },
): Promise<{ port: number; close(): Promise<void> }> {
  const app = Fastify({
    loggerInstance: o.log as FastifyBaseLogger,
    logController: new LogController({ disableRequestLogging: true }),
    forceCloseConnections: true,
  });
  registerProblemHandlers(app);
  await app.register(metricsRoute, { metrics: o.metrics, keys: o.keys });
  await app.listen({ host: o.host, port: o.port });
  const address = app.server.address();
  return { port: typeof address === 'object' && address ? address.port : o.port, close: () => app.close() };
}
