/**
 * The HTTP side in parts, for tests that build one route plugin directly (no gateway, no devices): a bare
 * fastify app with the API's problem handlers and, for `/v1` routes, its API-key hook.
 */
import Fastify, { type FastifyInstance, type FastifyServerOptions } from 'fastify';
import { requireApiKey } from '../../gateway/src/api/auth.js';
import { registerProblemHandlers } from '../../gateway/src/api/problem.js';

export const PART_API_KEY = 'part-api-key-0123456789';

export interface ApiPartOptions {
  /** The API keys `/v1` routes accept (default: PART_API_KEY); null: no key hook at all. */
  keys?: readonly string[] | null;
  /** The tenant each key carries. */
  tenantOf?: (key: string) => string | undefined;
  /** Routes outside the API-key scope (what devices call with credentials of their own). */
  open?: (app: FastifyInstance) => PromiseLike<unknown>;
  /** Options for the fastify instance (a body limit, say). */
  fastify?: Pick<FastifyServerOptions, 'bodyLimit' | 'trustProxy' | 'routerOptions' | 'loggerInstance'>;
}

/** A bare app: problem+json errors, and `routes` registered behind the API-key hook as buildApi does. */
export async function apiPart(routes: (scope: FastifyInstance) => PromiseLike<unknown>, o: ApiPartOptions = {}): Promise<FastifyInstance> {
  // Open event streams must not hold close() up.
  const app = Fastify({ forceCloseConnections: true, ...o.fastify });
  registerProblemHandlers(app);
  const keys = o.keys === undefined ? [PART_API_KEY] : o.keys;
  if (o.open) await o.open(app);
  await app.register(async (scope) => {
    if (keys !== null) requireApiKey(scope, () => keys, o.tenantOf);
    await routes(scope);
  });
  await app.ready();
  return app;
}

/** `Authorization: Bearer <key>` (default: PART_API_KEY). */
export const bearer = (key: string = PART_API_KEY): { authorization: string } => ({ authorization: `Bearer ${key}` });

/** Listen on 127.0.0.1, port 0 (for what inject cannot do: streams), and the base URL. */
export async function listenLocal(app: FastifyInstance): Promise<string> {
  await app.listen({ host: '127.0.0.1', port: 0 });
  const address = app.server.address();
  if (!address || typeof address === 'string') throw new Error('no TCP address');
  return `http://127.0.0.1:${address.port}`;
}
