import Fastify, { type FastifyInstance, type FastifyReply, type FastifyRequest, type HTTPMethods, type RouteOptions } from 'fastify';

/** What a route contributes to the document: its method, full URL, schema (already with its `security`) and config. */
type DocumentedRoute = Pick<RouteOptions, 'method' | 'url' | 'schema' | 'config'>;

/** Request headers the docs UI's answers depend on (caching, ranges); the rest stay out. */
const FORWARDED = ['accept', 'if-none-match', 'if-modified-since', 'range'] as const;
/** Answer headers fastify sets itself for the outer reply. */
const NOT_COPIED = new Set(['content-length', 'transfer-encoding', 'connection', 'keep-alive', 'date']);

/**
 * GET /openapi.json and the docs UI at /docs, built on their first request (issue 21, docs/performance.md "mcprss"):
 * @fastify/swagger, its YAML and schema-resolver dependencies, @fastify/swagger-ui and its static files cost ~2 MiB of
 * heap that a gateway nobody reads the docs of keeps for its whole life. At start only the routes are noted (one
 * `onRoute` hook, as @fastify/swagger's own); the first request builds a small fastify app that holds the two plugins
 * and those routes replayed (no handlers run, no validator compiled), answers /openapi.json from it and forwards
 * /docs/* to it. Register before every route, on the root instance, so the hook sees them all.
 */
export function registerOpenApiDocs(app: FastifyInstance, version: string): void {
  const routes: DocumentedRoute[] = [];
  // The same object fastify passes to every hook: a scope's later hook (v1's `security`) is seen, as swagger saw it.
  // HEAD twins and hidden routes (these two, the console's) are left out, as swagger leaves them out of the document.
  app.addHook('onRoute', (route) => {
    if (route.method !== 'HEAD' && route.schema?.hide !== true) routes.push(route);
  });
  let docs: Promise<FastifyInstance> | undefined;
  const load = (): Promise<FastifyInstance> =>
    (docs ??= docsApp(routes, version).catch((e: unknown) => {
      docs = undefined; // the next request tries again
      throw e;
    }));
  app.get('/openapi.json', { schema: { hide: true } }, async () => (await load()).swagger());
  const forward = async (req: FastifyRequest, reply: FastifyReply) => {
    const headers: Record<string, string> = {};
    for (const h of FORWARDED) {
      const v = req.headers[h];
      if (typeof v === 'string') headers[h] = v;
    }
    const res = await (await load()).inject({ method: req.method as HTTPMethods, url: req.url, headers });
    for (const [k, v] of Object.entries(res.headers)) if (v !== undefined && !NOT_COPIED.has(k)) void reply.header(k, v);
    void reply.header('x-content-type-options', 'nosniff');
    return reply.code(res.statusCode).send(res.rawPayload);
  };
  app.get('/docs', { schema: { hide: true } }, forward);
  app.get('/docs/*', { schema: { hide: true } }, forward);
}

async function docsApp(routes: readonly DocumentedRoute[], version: string): Promise<FastifyInstance> {
  const [{ default: swagger }, { default: swaggerUi }] = await Promise.all([import('@fastify/swagger'), import('@fastify/swagger-ui')]);
  // Only the document is wanted from these routes: no validators or serializers compiled. HEAD twins are made as the
  // gateway's own app makes them (HEAD /docs/… answers as before); swagger leaves them out of the document.
  const docs = Fastify();
  docs.setValidatorCompiler(() => () => true);
  docs.setSerializerCompiler(() => (data) => JSON.stringify(data));
  await docs.register(swagger, {
    openapi: {
      openapi: '3.0.3',
      info: {
        title: 'Voxgate API',
        version,
        description: 'Drive ESP32 voice devices: list them, read their tools, call them, follow their events.',
      },
      components: { securitySchemes: { apiKey: { type: 'http', scheme: 'bearer', description: 'An API key (GATEWAY_API_KEYS)' } } },
    },
  });
  await docs.register(swaggerUi, {
    routePrefix: '/docs',
    // The UI's own CSP (hashes of its inline parts), framed by nobody; without upgrade-insecure-requests, which would
    // send a plain-HTTP gateway's page to fetch its scripts over HTTPS (a LAN gateway usually has none).
    staticCSP: true,
    transformStaticCSP: (header) => header.replace("frame-ancestors 'self'", "frame-ancestors 'none'").replace(/\s*upgrade-insecure-requests;/, ''),
  });
  const none = async () => undefined;
  for (const r of routes)
    docs.route({ method: r.method, url: r.url, ...(r.schema ? { schema: r.schema } : {}), ...(r.config ? { config: r.config } : {}), handler: none });
  await docs.ready();
  return docs;
}
