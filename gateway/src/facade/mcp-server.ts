import { McpServer, ProtocolError, ProtocolErrorCode, type CallToolResult, type ProgressToken } from '@modelcontextprotocol/server';
import type { Logger } from 'pino';
import { GatewayError } from '../errors.js';
import { parseTokensHeader, type Tokens } from '../hub/credentials.js';
import type { Caller, HubTool, McpHub } from '../hub/hub.js';
import { shownServerName } from '../hub/names.js';
import { toToolResult } from '../hub/tool-result.js';
import { speedUpToolsCall, wireCodecOf } from '../hub/tools-call-check.js';
import type { Peer, PeerMethod, Progress } from '../hub/upstream/base.js';
import { toProtocolError } from './protocol-error.js';

/** The client capability each request from a hosted server needs. */
const PEER_CAPABILITY: Record<PeerMethod, 'sampling' | 'elicitation'> = {
  'sampling/createMessage': 'sampling',
  'elicitation/create': 'elicitation',
};
const MAX_SUBSCRIPTIONS = 256;

/** A tool as tools/list shows it: every field its server defined, our name, and Voxgate's hints in `_meta`. */
function wireTool(t: HubTool) {
  const meta = {
    ...((t.fields?.['_meta'] as Record<string, unknown> | undefined) ?? {}),
    ...(t.responseInstruction ? { 'voxgate/responseInstruction': t.responseInstruction } : {}),
    ...(t.autoContext ? { 'voxgate/autoContext': true } : {}),
  };
  return {
    ...t.fields,
    name: t.name,
    description: t.description,
    inputSchema: { type: 'object' as const, ...t.inputSchema },
    ...(t.title !== undefined ? { title: t.title } : {}),
    ...(t.outputSchema ? { outputSchema: { type: 'object' as const, ...t.outputSchema } } : {}),
    ...(t.annotations ? { annotations: t.annotations } : {}),
    ...(Object.keys(meta).length > 0 ? { _meta: meta } : {}),
  };
}

/**
 * One MCP server instance speaking for the hub to one caller (one legacy session, or one modern request).
 * The tool list is dynamic (devices come and go) and the schemas are upstream JSON Schemas, so the
 * list/call handlers are set on the low-level `server` of an `McpServer` instead of registering each
 * tool with a Standard Schema.
 */
export function buildFacadeServer(hub: McpHub, caller: Caller, o: { log: Logger; version: string; allowedTools?: readonly string[] | undefined }): McpServer {
  // A published namespace may be narrowed to some tools (mcp.publish[].allowed_tools); calls to others are unknown.
  const allowed = o.allowedTools ? new Set(o.allowedTools) : undefined;
  const system = hub
    .instructions(caller)
    .system.map((s) => `[${s.server}] ${s.instruction}`)
    .join('\n\n');
  const mcp = new McpServer(
    { name: 'voxgate', version: o.version },
    {
      capabilities: {
        tools: { listChanged: true },
        resources: { subscribe: true, listChanged: true },
        prompts: { listChanged: true },
        logging: {},
        completions: {},
      },
      instructions:
        'Tools of ESP32 voice devices (device__<id>__<tool>, or devices_list + device_call) and of hosted MCP servers (mcp__<server>__<tool>).' +
        (system ? `\n\n${system}` : ''),
    },
  );
  const s = mcp.server;
  // tools/call requests and results checked by hand where the SDK's zod schemas would accept them (tools-call-check.ts).
  speedUpToolsCall(wireCodecOf(s));
  const tokensOf = (req: Request | undefined): Tokens | undefined => tokensFrom(req?.headers.get('x-voxgate-tokens'));

  const face: Face = { mcp, s, hub, caller, tokensOf, allowed };
  serveTools(face);
  serveListings(face);
  serveSubscriptions(face);
  return mcp;
}

/** `X-Voxgate-Tokens`, parsed; a malformed header is the request's invalid params. */
function tokensFrom(h: string | null | undefined): Tokens | undefined {
  if (!h) return undefined;
  try {
    return parseTokensHeader(h);
  } catch (e) {
    throw new ProtocolError(ProtocolErrorCode.InvalidParams, (e as Error).message);
  }
}

/** What each group of handlers needs: the server, the hub, this caller, and its tokens per request. */
interface Face {
  mcp: McpServer;
  s: McpServer['server'];
  hub: McpHub;
  caller: Caller;
  tokensOf: (req: Request | undefined) => Tokens | undefined;
  /** Only these tools, when set (a published namespace). */
  allowed: ReadonlySet<string> | undefined;
}

function serveTools(face: Face): void {
  const { mcp, s, hub, caller, allowed } = face;
  // One page always: no cursor is ever handed out, so any cursor a client sends is not one of ours.
  s.setRequestHandler('tools/list', async (req) => {
    if (req.params?.cursor !== undefined) throw new ProtocolError(ProtocolErrorCode.InvalidParams, 'invalid cursor: tools/list has a single page here');
    return {
      tools: hub
        .tools(caller)
        .filter((t) => !allowed || allowed.has(t.name))
        .map(wireTool),
    };
  });

  const call = toolsCall(face);
  cores.set(mcp, call);
  s.setRequestHandler('tools/call', (req, ctx) =>
    call(req.params, {
      progressToken: ctx.mcpReq._meta?.progressToken ?? req.params._meta?.progressToken,
      notify: (n) => ctx.mcpReq.notify(n),
      send: (method, params, signal) => ctx.mcpReq.send({ method, params }, { signal }) as Promise<Record<string, unknown>>,
      signal: ctx.mcpReq.signal,
      tokensHeader: ctx.http?.req?.headers.get('x-voxgate-tokens') ?? undefined,
    }),
  );
}

/** What a tools/call needs from the protocol layer that carries it: the SDK's request context, or fast-call.ts. */
export interface ToolsCallVia {
  progressToken: ProgressToken | undefined;
  /** A notification related to this request (progress). */
  notify: (n: { method: 'notifications/progress'; params: Record<string, unknown> }) => Promise<void>;
  /** A request to the client related to this request (what a hosted server asks while serving it). */
  send: (method: PeerMethod, params: Record<string, unknown>, signal: AbortSignal) => Promise<Record<string, unknown>>;
  signal: AbortSignal;
  /** The caller's `X-Voxgate-Tokens` header, as sent. */
  tokensHeader: string | undefined;
}
export type ToolsCall = (params: { name: string; arguments?: Record<string, unknown> | undefined }, via: ToolsCallVia) => Promise<CallToolResult>;

/** The tools/call handler of each facade server, for a protocol layer of Voxgate's own (fast-call.ts). */
const cores = new WeakMap<McpServer, ToolsCall>();
export const toolsCallOf = (mcp: McpServer): ToolsCall | undefined => cores.get(mcp);

/** One tools/call on the hub: what the SDK's handler runs, and what fast-call.ts runs without the SDK. */
function toolsCall({ mcp, s, hub, caller, allowed }: Face): ToolsCall {
  const supports = (method: PeerMethod) => Boolean(s.getClientCapabilities()?.[PEER_CAPABILITY[method]]);
  return async (params, via) => {
    const name = params.name;
    const args = (params.arguments ?? {}) as Record<string, unknown>;
    if (allowed && !allowed.has(name)) throw new ProtocolError(ProtocolErrorCode.InvalidParams, `unknown tool "${name.slice(0, 64)}"`);
    try {
      const progressToken = via.progressToken;
      // Progress from the upstream goes back under the caller's own token, to this request only.
      // Each notification is sent before the result (awaited below), so none arrives after its call ended.
      // No promise (and no await) for a call without progress, the usual case.
      let sent: Promise<unknown> | undefined;
      const onProgress =
        progressToken === undefined
          ? undefined
          : (p: Progress) =>
              (sent = (sent ?? Promise.resolve())
                .then(() => via.notify({ method: 'notifications/progress', params: { progressToken, ...p } }))
                .catch(() => undefined));
      // What the hosted server asks while serving this call (sampling, elicitation) goes to this client.
      const peer: Peer = { key: mcp, supports, request: via.send };
      // The caller's fields last: an object spread followed by keys of its own gets a map of its own in Node 20's V8
      // (~1 µs per key, and every later read of it misses its inline caches: issue 21, `mcpc1c`); spread last, the
      // object's map is shared by every call. (Caller has none of the four keys, so nothing is overridden.)
      const { result } = await hub.callTimed(name, args, { tokens: tokensFrom(via.tokensHeader), signal: via.signal, onProgress, peer, ...caller });
      if (sent) await sent;
      return result;
    } catch (e) {
      if (e instanceof GatewayError && e.code === 'TOOL_NOT_FOUND') throw toProtocolError(e);
      // Bad arguments and missing tokens are for the model (or its user) to fix: a tool error, not a protocol error.
      if (e instanceof GatewayError) return toToolResult(e);
      throw e;
    }
  };
}

/** Resources, templates, prompts and completions of the hosted servers this caller may see. */
function serveListings({ s, hub, caller, tokensOf }: Face): void {
  s.setRequestHandler('resources/list', async (_req, ctx) => ({
    resources: (await hub.resources({ ...caller, tokens: tokensOf(ctx.http?.req) })).map(({ server, ...r }) => ({
      ...r,
      _meta: { ...(r._meta ?? {}), 'voxgate/server': server },
    })),
  }));
  s.setRequestHandler('resources/read', async (req, ctx) => {
    try {
      const { server: _s, ...r } = await hub.readResource(req.params.uri, undefined, { ...caller, tokens: tokensOf(ctx.http?.req) });
      return r;
    } catch (e) {
      throw toProtocolError(e);
    }
  });
  s.setRequestHandler('resources/templates/list', async (_req, ctx) => ({
    resourceTemplates: (await hub.resourceTemplates({ ...caller, tokens: tokensOf(ctx.http?.req) })).map(({ server, ...t }) => ({
      ...t,
      _meta: { ...(t._meta ?? {}), 'voxgate/server': server },
    })),
  }));
  s.setRequestHandler('completion/complete', async (req, ctx) => {
    try {
      return await hub.complete(req.params, { ...caller, tokens: tokensOf(ctx.http?.req) });
    } catch (e) {
      throw toProtocolError(e);
    }
  });

  s.setRequestHandler('prompts/list', async (_req, ctx) => ({
    prompts: (await hub.prompts({ ...caller, tokens: tokensOf(ctx.http?.req) })).map(({ server, prompt: _p, ...p }) => ({
      ...p,
      _meta: { ...(p._meta ?? {}), 'voxgate/server': server },
    })),
  }));
  s.setRequestHandler('prompts/get', async (req, ctx) => {
    try {
      const { server: _s, ...r } = await hub.getPrompt(req.params.name, (req.params.arguments ?? {}) as Record<string, string>, {
        ...caller,
        tokens: tokensOf(ctx.http?.req),
      });
      return r;
    } catch (e) {
      throw toProtocolError(e);
    }
  });
}

/** Resource subscriptions, and what hosted servers log, for an initialized session; released when it closes. */
function serveSubscriptions({ s, hub, caller, tokensOf }: Face): void {
  // Resource subscriptions of this session: uri -> server. Released when the session closes.
  const subscriptions = new Map<string, string>();
  let closed = false;
  s.setRequestHandler('resources/subscribe', async (req, ctx) => {
    const uri = req.params.uri;
    if (subscriptions.has(uri)) return {};
    if (subscriptions.size >= MAX_SUBSCRIPTIONS)
      throw new ProtocolError(ProtocolErrorCode.InvalidRequest, `at most ${MAX_SUBSCRIPTIONS} resource subscriptions per session`);
    let server: string;
    try {
      server = await hub.subscribe(uri, { ...caller, tokens: tokensOf(ctx.http?.req) });
    } catch (e) {
      throw toProtocolError(e);
    }
    // A twin request won the race, or the session ended meanwhile: give this count back.
    if (closed || subscriptions.has(uri)) void hub.unsubscribe(server, uri).catch(() => undefined);
    else subscriptions.set(uri, server);
    return {};
  });
  s.setRequestHandler('resources/unsubscribe', async (req) => {
    const server = subscriptions.get(req.params.uri);
    if (server !== undefined) {
      subscriptions.delete(req.params.uri);
      await hub.unsubscribe(server, req.params.uri);
    }
    return {};
  });

  // Log messages and resource updates of hosted servers reach initialized sessions that may see the server.
  let offHub: Array<() => void> = [];
  s.oninitialized = () => {
    // Once per session: the SDK calls this for every notifications/initialized, which a client may send again (a
    // hostile one without end), and each time would add two hub listeners that only the session's close removes.
    if (offHub.length > 0) return;
    offHub.push(
      hub.onLog((server, params) => {
        const sid = s.transport?.sessionId;
        if (!hub.serverVisible(server, caller)) return;
        // A tenant's server by its own name, not its key in the hub (hub/names.ts serverKey).
        const logger = `mcp__${shownServerName(server)}${typeof params.logger === 'string' ? `/${params.logger.slice(0, 100)}` : ''}`;
        void s.sendLoggingMessage({ level: params.level, logger, data: params.data }, sid).catch(() => undefined);
      }),
      hub.onResourceUpdated((server, uri) => {
        if (subscriptions.get(uri) === server) void s.sendResourceUpdated({ uri }).catch(() => undefined);
      }),
    );
  };
  s.onclose = () => {
    closed = true;
    for (const off of offHub) off();
    offHub = [];
    for (const [uri, server] of subscriptions) void hub.unsubscribe(server, uri).catch(() => undefined);
    subscriptions.clear();
  };
}
