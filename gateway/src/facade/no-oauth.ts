import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';

/** RFC 9728 protected-resource metadata's well-known path. */
export const METADATA_PATH = '/.well-known/oauth-protected-resource';

/**
 * What `POST /register` answers. An OAuth client given a wrong or missing key (mcp-remote, the Inspector) finds no
 * authorization server in the metadata, falls back to the server's origin as one (MCP 2025-03-26, "Fallbacks for
 * Servers without Metadata Discovery") and tries dynamic client registration at `/register`; it then shows its user
 * this answer's body ("Dynamic Client Registration rejected (HTTP 404): ..."), so the body says what to fix.
 */
const NO_OAUTH =
  'Voxgate has no OAuth (no authorization server, no client registration): /mcp takes a Voxgate API key as the header ' +
  '"Authorization: Bearer <api key>" (GATEWAY_API_KEYS, or the key printed at the first start). This client was refused ' +
  'at /mcp because the key it sent is missing or not valid: give it that header (mcp-remote and the MCP Inspector: --header) ' +
  'instead of signing in.';

/**
 * The routes OAuth-minded MCP clients probe around `/mcp`: the protected-resource metadata (naming no authorization
 * server, so they report a missing or wrong key) and `POST /register`, which says to send an API key instead.
 */
export function registerNoOAuthRoutes(app: FastifyInstance, originOf: (req: FastifyRequest) => string): void {
  // RFC 9728 protected-resource metadata, at the root and path-suffixed (`/mcp`) locations MCP clients try.
  const metadata = (req: FastifyRequest, reply: FastifyReply) => {
    const origin = originOf(req);
    return reply.header('cache-control', 'max-age=300').send({
      resource: `${origin}/mcp`,
      bearer_methods_supported: ['header'],
      resource_name: 'Voxgate MCP endpoint (a Voxgate API key as the bearer token; no OAuth)',
      resource_documentation: `${origin}/docs`,
    });
  };
  app.get(METADATA_PATH, { schema: { hide: true } }, metadata);
  app.get(`${METADATA_PATH}/mcp`, { schema: { hide: true } }, metadata);
  // The gateway's problem+json, written here: facade/ takes only auth from api/.
  app.post('/register', { schema: { hide: true } }, (_req, reply) =>
    reply
      .code(404)
      .type('application/problem+json')
      .send({ type: 'urn:voxgate:error:NOT_FOUND', title: 'Not found', status: 404, detail: NO_OAUTH, code: 'NOT_FOUND', instance: '/register' }),
  );
}
