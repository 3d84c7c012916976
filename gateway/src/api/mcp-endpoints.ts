import type { FastifyInstance, FastifyRequest } from 'fastify';
import { z } from 'zod';
import { CreateEndpointBody, type McpEndpoints } from '../hub/endpoints.js';
import { Problem, jsonSchema } from './schemas.js';

const problems = (...codes: number[]) => Object.fromEntries(codes.map((c) => [c, { ...jsonSchema(Problem, 'output'), description: 'problem+json' }]));
const IdParam = z.object({ id: z.uuid() });
const EndpointOut = z.object({
  id: z.string(),
  name: z.string(),
  tenant: z.string().nullable(),
  allowedTools: z.array(z.string()).nullable(),
  createdAt: z.string(),
  state: z.enum(['connected', 'waiting']),
  lastError: z.string().nullable(),
  toolCount: z.number().int(),
  tools: z.array(z.string()),
});
const Created = z.object({
  id: z.string(),
  name: z.string(),
  token: z.string().describe('Shown once: only its sha256 is kept'),
  url: z.string().describe("The tool process's MCP_ENDPOINT: ws(s)://host/mcp_endpoint/mcp/?token=…"),
});

/** The MCP endpoint's URL as a tool process reaches it: http.publicUrl when set, else this request's host. */
function endpointUrl(req: FastifyRequest, publicUrl: string | undefined, path: string, token: string): string {
  const base = publicUrl ? new URL(publicUrl) : new URL(`${req.protocol}://${req.host}`);
  base.protocol = base.protocol === 'https:' ? 'wss:' : 'ws:';
  base.pathname = path;
  base.search = '';
  base.searchParams.set('token', token);
  return base.toString();
}

/** Tokens for tool processes that dial in (xiaozhi's MCP接入点): issue, list with their state, revoke. */
export async function mcpEndpointRoutes(app: FastifyInstance, o: { endpoints: McpEndpoints; path: string; publicUrl: string | undefined }): Promise<void> {
  const caller = (req: FastifyRequest) => req.caller ?? {};
  app.post<{ Body: z.infer<typeof CreateEndpointBody> }>('/v1/mcp/endpoints', {
    schema: {
      tags: ['mcp'],
      summary: 'Issue an MCP endpoint token: a tool process that dials in with it serves its tools as mcp__<name>__<tool>',
      body: jsonSchema(CreateEndpointBody),
      response: { 201: jsonSchema(Created, 'output'), ...problems(400, 401, 409) },
    },
    handler: async (req, reply) => {
      const { record, token } = await o.endpoints.create(CreateEndpointBody.parse(req.body), caller(req));
      return reply.code(201).send({ id: record.id, name: record.name, token, url: endpointUrl(req, o.publicUrl, o.path, token) });
    },
  });
  app.get('/v1/mcp/endpoints', {
    schema: {
      tags: ['mcp'],
      summary: "MCP endpoints (the caller's tenant only): connection state and tools",
      response: { 200: jsonSchema(z.object({ endpoints: z.array(EndpointOut) }), 'output'), ...problems(401) },
    },
    handler: async (req) => ({ endpoints: o.endpoints.list(caller(req)) }),
  });
  app.delete<{ Params: z.infer<typeof IdParam> }>('/v1/mcp/endpoints/:id', {
    schema: {
      tags: ['mcp'],
      summary: 'Revoke an MCP endpoint token; a connected tool process is cut (close code 4001)',
      params: jsonSchema(IdParam),
      response: { 204: { type: 'null', description: 'Revoked' }, ...problems(401, 404) },
    },
    handler: async (req, reply) => {
      await o.endpoints.remove(req.params.id, caller(req));
      return reply.code(204).send();
    },
  });
}
