import type { FastifyInstance, FastifyRequest } from 'fastify';
import { z } from 'zod';
import { GatewayError } from '../errors.js';
import { mergeTokens, parseTokens, parseTokensHeader, TokensSchema, type Tokens } from '../hub/credentials.js';
import type { McpHub } from '../hub/hub.js';
import { problems } from './route-helpers.js';
import { jsonSchema } from './schemas.js';

/** The namespaced tools of devices and upstream MCP servers, and the servers' resources and prompts, over HTTP. */
const Loose = z.record(z.string(), z.unknown());

const ToolNameParam = z.object({ name: z.string().min(1).max(64).describe('A namespaced tool name from GET /v1/tools') });
const TokensField = TokensSchema.optional().describe("Credentials for `${name}` placeholders in the server's headers_template; never stored or logged");
const ToolCallBody = z
  .object({
    arguments: Loose.optional(),
    timeoutMs: z.number().int().min(1).max(3_600_000).optional(),
    tokens: TokensField,
  })
  .strict();
const HubToolOut = z.object({
  name: z.string(),
  description: z.string(),
  inputSchema: Loose,
  title: z.string().optional(),
  outputSchema: Loose.optional(),
  annotations: Loose.optional(),
  source: Loose.describe('{kind: "server", server, tool} | {kind: "device", deviceId, tool} | {kind: "generic"}'),
  responseInstruction: z.string().optional(),
  autoContext: z.boolean().optional(),
});
const ToolCallResult = z.object({
  content: z.array(Loose),
  isError: z.boolean(),
  structuredContent: Loose.optional(),
  durationMs: z.number(),
});
const ServerOut = z
  .object({
    name: z.string(),
    type: z.string(),
    state: z.string().describe('starting | ready | failed | restarting | stopped | disabled'),
    lastError: z.string().nullable(),
    toolCount: z.number().int(),
    tools: z.array(z.string()),
    restarts: z.number().int(),
    pid: z.number().int().nullable(),
    since: z.string(),
    serverInfo: z.object({ name: z.string(), version: z.string() }).nullable(),
    capabilities: z.object({ tools: z.boolean(), resources: z.boolean(), prompts: z.boolean() }),
    tenants: z.array(z.string()).nullable(),
    systemInstruction: z.string().nullable(),
  })
  .loose();
const ReadQuery = z.object({ uri: z.string().min(1).max(4096), server: z.string().max(64).optional() });
const ReadBody = ReadQuery.extend({ tokens: TokensField }).strict();
const PromptParam = z.object({ name: z.string().min(1).max(64) });
const PromptBody = z.object({ arguments: z.record(z.string(), z.string().max(65_536)).optional(), tokens: TokensField }).strict();

function tokensOf(req: FastifyRequest, body?: { tokens?: Tokens | undefined }): Tokens | undefined {
  const fromHeader = parseTokensHeader(req.headers['x-voxgate-tokens']);
  const fromBody = body?.tokens === undefined ? undefined : parseTokens(body.tokens);
  return mergeTokens(fromHeader, fromBody);
}

// eslint-disable-next-line max-lines-per-function -- a route table: each route's schema is declarative data, its handler a few lines
export async function toolRoutes(app: FastifyInstance, o: { hub: McpHub; hubEnabled: boolean }): Promise<void> {
  const { hub } = o;
  const caller = (req: FastifyRequest) => req.caller ?? {};

  app.get('/v1/tools', {
    schema: {
      tags: ['tools'],
      summary: 'Every tool an LLM may call: upstream MCP servers (mcp__server__tool), devices (device__id__tool), devices_list/device_call',
      response: { 200: jsonSchema(z.object({ tools: z.array(HubToolOut) }), 'output'), ...problems(401) },
    },
    handler: async (req) => ({ tools: hub.tools(caller(req)) }),
  });

  app.post<{ Params: z.infer<typeof ToolNameParam>; Body: z.infer<typeof ToolCallBody> }>('/v1/tools/:name/call', {
    schema: {
      tags: ['tools'],
      summary: 'Call a namespaced tool. Failures past the call (server down, timeout, auth refused, device offline) are results with isError: true',
      params: jsonSchema(ToolNameParam),
      body: jsonSchema(ToolCallBody),
      response: { 200: jsonSchema(ToolCallResult, 'output'), ...problems(400, 401, 404, 422) },
    },
    handler: async (req) => {
      const body = req.body ?? {};
      const out = await hub.call(req.params.name, body.arguments ?? {}, { ...caller(req), tokens: tokensOf(req, body), timeoutMs: body.timeoutMs });
      return { ...out, isError: out.isError ?? false };
    },
  });

  app.get('/v1/mcp/servers', {
    schema: {
      tags: ['mcp'],
      summary: "Upstream MCP servers: state, last error, tools (the caller's tenant only)",
      response: { 200: jsonSchema(z.object({ enabled: z.boolean(), servers: z.array(ServerOut) }), 'output'), ...problems(401) },
    },
    handler: async (req) => ({ enabled: o.hubEnabled, servers: hub.servers(caller(req)) }),
  });

  app.get('/v1/mcp/instructions', {
    schema: {
      tags: ['mcp'],
      summary: "Servers' system_instruction, each tool's response_instruction, and the auto_context_tool list (namespaced)",
      response: {
        200: jsonSchema(
          z.object({
            system: z.array(z.object({ server: z.string(), instruction: z.string() })),
            responseInstructions: z.record(z.string(), z.string()),
            autoContextTools: z.array(z.string()),
          }),
          'output',
        ),
        ...problems(401),
      },
    },
    handler: async (req) => hub.instructions(caller(req)),
  });

  app.get('/v1/mcp/resources', {
    schema: {
      tags: ['mcp'],
      summary: 'Resources of every upstream server that has them',
      response: { 200: jsonSchema(z.object({ resources: z.array(Loose) }), 'output'), ...problems(400, 401) },
    },
    handler: async (req) => ({ resources: await hub.resources({ ...caller(req), tokens: tokensOf(req) }) }),
  });

  const read = async (req: FastifyRequest, q: z.infer<typeof ReadBody>) => hub.readResource(q.uri, q.server, { ...caller(req), tokens: tokensOf(req, q) });
  app.get<{ Querystring: z.infer<typeof ReadQuery> }>('/v1/mcp/resources/read', {
    schema: {
      tags: ['mcp'],
      summary: 'Read one resource (server optional: found by listing)',
      querystring: jsonSchema(ReadQuery),
      response: { 200: jsonSchema(Loose, 'output'), ...problems(400, 401, 404, 502, 503) },
    },
    handler: async (req) => read(req, req.query),
  });
  app.post<{ Body: z.infer<typeof ReadBody> }>('/v1/mcp/resources/read', {
    schema: {
      tags: ['mcp'],
      summary: 'Read one resource, with tokens in the body',
      body: jsonSchema(ReadBody),
      response: { 200: jsonSchema(Loose, 'output'), ...problems(400, 401, 404, 502, 503) },
    },
    handler: async (req) => read(req, req.body),
  });

  app.get('/v1/mcp/prompts', {
    schema: {
      tags: ['mcp'],
      summary: 'Prompts of every upstream server that has them (namespaced names)',
      response: { 200: jsonSchema(z.object({ prompts: z.array(Loose) }), 'output'), ...problems(401) },
    },
    handler: async (req) => ({ prompts: await hub.prompts({ ...caller(req), tokens: tokensOf(req) }) }),
  });
  app.post<{ Params: z.infer<typeof PromptParam>; Body: z.infer<typeof PromptBody> }>('/v1/mcp/prompts/:name/get', {
    schema: {
      tags: ['mcp'],
      summary: 'Get one prompt with its arguments',
      params: jsonSchema(PromptParam),
      body: jsonSchema(PromptBody),
      response: { 200: jsonSchema(Loose, 'output'), ...problems(400, 401, 404, 502, 503) },
    },
    handler: async (req) => {
      const body = req.body ?? {};
      return hub.getPrompt(req.params.name, body.arguments ?? {}, { ...caller(req), tokens: tokensOf(req, body) });
    },
  });
}

export { GatewayError };
