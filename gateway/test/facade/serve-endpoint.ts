import type { AddressInfo } from 'node:net';
import Fastify, { type FastifyInstance } from 'fastify';
import pino from 'pino';
import { registerMcpEndpoint, type McpEndpoint, type McpEndpointOptions } from '../../src/facade/mcp-endpoint.js';
import type { buildHub } from '../hub/support.js';

/**
 * `/mcp` alone on a Fastify app at 127.0.0.1 (port 0), in front of a test hub: the endpoint's tests' server, with
 * roomy bounds and a silent log unless `options` says otherwise.
 */
export async function serveEndpoint(
  built: ReturnType<typeof buildHub>,
  options: Partial<McpEndpointOptions>,
): Promise<{ app: FastifyInstance; endpoint: McpEndpoint; url: URL }> {
  const app = Fastify();
  let endpoint!: McpEndpoint;
  await app.register(async (scope) => {
    endpoint = await registerMcpEndpoint(scope, {
      hub: built.hub,
      metrics: built.metrics,
      apiKeys: () => [],
      tenantOf: () => undefined,
      log: pino({ level: 'silent' }),
      allowedOrigins: [],
      allowedHosts: new Set(['127.0.0.1']),
      maxSessions: 100,
      maxSessionsPerKey: 100,
      sessionIdleMs: 30 * 60_000,
      version: '0.0.0',
      bodyLimitBytes: 1024 * 1024,
      ...options,
    });
  });
  await app.listen({ host: '127.0.0.1', port: 0 });
  return { app, endpoint, url: new URL(`http://127.0.0.1:${(app.server.address() as AddressInfo).port}/mcp`) };
}
