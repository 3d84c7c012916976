import { createHash, randomUUID } from 'node:crypto';
import type { McpServer } from '@modelcontextprotocol/server';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Logger } from 'pino';
import { authenticate, type ApiCaller } from '../api/auth.js';
import type { McpHub } from '../hub/hub.js';
import type { Metrics } from '../metrics.js';
import { DeferredHeaders } from './deferred-headers.js';
import { BoundedEventStores, DEFAULT_EVENT_STORE_LIMITS, type EventStoreLimits, type SessionEventStore } from './event-store.js';
import type { NodeSessionTransport } from './node-transport.js';
import { loadFacadeSdk, loadNodeAdapter, type FacadeSdk, type NodeAdapter } from './sdk.js';
import { deeperThan, MAX_JSON_DEPTH } from './jsonrpc-message.js';
import { METADATA_PATH, registerNoOAuthRoutes } from './no-oauth.js';
import { requestOrigins } from './request-origins.js';
import { boundUnread, HeldStreams, MAX_UNREAD_BYTES } from './sse-stream.js';
import { countUnread, endpointUnreadTotal, unreadGroup } from './response-unread.js';
import { SessionTable } from './session-table.js';
import { SessionAdmission } from './session-admission.js';
import { ListenSlots, listensIn } from './listen-slots.js';
import { REFUSAL_LINES, ThrottledLog } from '../throttle/throttled-log.js';
import { tenantsAmong, tenantShare } from '../throttle/tenant-share.js';

/**
 * `/mcp`: the hub's tools, resources and prompts for any MCP client, over Streamable HTTP.
 *
 * - Every request needs `Authorization: Bearer <api key>`; the key's tenant picks what is visible.
 * - DNS-rebinding protection: the `Host` must be an allowed host name (`allowed-hosts.ts`); a browser `Origin`
 *   must be listed in `mcp.endpoint.allowedOrigins` or be on an allowed host (403 otherwise). Requests
 *   without `Origin` (non-browser clients) are accepted.
 * - `initialize`-era clients get a session (`Mcp-Session-Id`) with a GET stream, on which
 *   `notifications/tools/list_changed` arrives when a device or a server changes its tools. Sessions are
 *   bound to the key that opened them, capped in number and closed when idle.
 * - 2026-07-28 (stateless) clients, and 2025 requests without a session, are served by the SDK's
 *   `createMcpHandler`; change notifications reach them on `subscriptions/listen`.
 */
export interface McpEndpointOptions {
  hub: McpHub;
  apiKeys: () => readonly string[];
  tenantOf: (key: string) => string | undefined;
  log: Logger;
  metrics: Metrics;
  allowedOrigins: readonly string[];
  /** Host names (no port) the endpoint answers to: see `mcpAllowedHosts`. */
  allowedHosts: ReadonlySet<string>;
  /**
   * Total sessions, sessions per API key, and per tenant with all its keys (unset: `tenantShare` of maxSessions), so
   * that one key or one tenant can't lock the others out. The stateless listen streams are bounded the same.
   */
  maxSessions: number;
  maxSessionsPerKey: number;
  maxSessionsPerTenant?: number | undefined;
  sessionIdleMs: number;
  version: string;
  bodyLimitBytes: number;
  /** Resumability: what a session's SSE streams sent is kept within these bounds (defaults: event-store.ts). */
  eventStore?: Partial<EventStoreLimits>;
  /** What all /mcp responses together may leave unread (`mcp.endpoint.unreadBudgetBytes`; default: response-unread.ts). */
  unreadBudgetBytes?: number | undefined;
  /** `http.publicUrl`: the resource named in the protected-resource metadata; else the request's own origin. */
  publicUrl?: string | undefined;
}

/** Suggested in each SSE stream's priming event: how soon a client reconnects after a drop. */
const SSE_RETRY_MS = 1000;

interface Session {
  transport: NodeSessionTransport;
  server: McpServer;
  events: SessionEventStore;
  caller: ApiCaller;
  keyFingerprint: string;
  tenant: string | undefined;
  lastUsed: number;
}

export interface McpEndpoint {
  sessionCount(): number;
  /** What the endpoint holds for its sessions (all zero once every session has ended). */
  state(): { sessions: number; streaming: number; eventStores: number; eventBytes: number; keysHolding: number; reserved: number; listening: number };
  close(): Promise<void>;
}

const CORS_REQUEST_HEADERS = 'Authorization, Content-Type, Accept, Mcp-Session-Id, Mcp-Protocol-Version, Last-Event-ID, X-Voxgate-Tokens';
const CORS_EXPOSED_HEADERS = 'Mcp-Session-Id, Mcp-Protocol-Version, WWW-Authenticate';

/** The SDK's handler for stateless (2026-07-28) clients and 2025 requests without a session, and its Node adapter. */
interface Stateless {
  modern: ReturnType<FacadeSdk['createMcpHandler']>;
  modernNode: ReturnType<NodeAdapter['toNodeHandler']>;
}

/** An `initialize` request (one message, not a batch): the SDK's full check only for a message that names it. */
const isInitialize = (sdk: FacadeSdk, body: unknown): boolean =>
  typeof body === 'object' && body !== null && (body as { method?: unknown }).method === 'initialize' && sdk.isInitializeRequest(body);

const rpcError = (reply: FastifyReply, status: number, code: number, message: string) =>
  reply.code(status).type('application/json').send({ jsonrpc: '2.0', error: { code, message }, id: null });

// eslint-disable-next-line max-lines-per-function -- the /mcp route's session table, its limits and its three methods share one closure
export async function registerMcpEndpoint(app: FastifyInstance, o: McpEndpointOptions): Promise<McpEndpoint> {
  const log = o.log.child({ component: 'mcp-endpoint' });
  // Refusals before authentication (Host, Origin) take one request each on a kept-alive connection: bounded per kind.
  const refusals = new ThrottledLog(log, 'warn', REFUSAL_LINES);
  // Evictions: as many as initializes past a key's cap, so bounded the same way; streams cut, as many as listens.
  const evictions = new ThrottledLog(log, 'info', REFUSAL_LINES);
  const cuts = new ThrottledLog(log, 'warn', REFUSAL_LINES);
  const sessions = new SessionTable<Session>();
  const share = tenantShare(o.maxSessions, o.maxSessionsPerTenant);
  const limits = {
    maxSessions: o.maxSessions,
    maxSessionsPerKey: o.maxSessionsPerKey,
    // The default share keeps room for the other tenants: with every key in one (or none) there are none, and a
    // single-tenant gateway keeps all its sessions. A share that is set holds always.
    get maxSessionsPerTenant(): number {
      return o.maxSessionsPerTenant !== undefined || tenantsAmong(o.apiKeys(), o.tenantOf) > 1 ? share : o.maxSessions;
    },
  };
  const admission = new SessionAdmission({ sessions, limits, metrics: o.metrics, refusals, evictions, close: (id, why) => void closeSession(id, why) });
  const listening = new ListenSlots({ limits, metrics: o.metrics, refusals });
  const eventStores = new BoundedEventStores({ ...DEFAULT_EVENT_STORE_LIMITS, ...o.eventStore });
  // Each stream is cut at MAX_UNREAD_BYTES; all of them together within the budget, the tenant or key holding the most
  // giving way (response-unread.ts): 1000 sessions at their own bound held 1 GiB.
  const unread = endpointUnreadTotal(o.unreadBudgetBytes, log, o.metrics);
  const countWrites = (reply: FastifyReply, caller: ApiCaller, fp: string, stream: 'session' | 'stateless') =>
    countUnread(reply.raw, unread, { group: unreadGroup(caller.tenant, fp), who: { tenant: caller.tenant, stream } });
  // A POST's SSE answer leaves with its headers in one write: sessions' answers through held streams
  // (sse-stream.ts), the SDK's stateless answers through deferred headers (deferred-headers.ts).
  const held = new HeldStreams();
  const headers = new DeferredHeaders();
  const deferHeaders = (req: FastifyRequest, reply: FastifyReply) => {
    if (req.method === 'POST') headers.defer(reply.raw);
  };
  // The counters every session request and stateless request bumps, bound once (no label lookup per request).
  const counted = { session: o.metrics.mcpRequests.labels({ outcome: 'session' }), stateless: o.metrics.mcpRequests.labels({ outcome: 'stateless' }) };
  const authOf = (req: FastifyRequest) => (req.raw as { voxgateCaller?: ApiCaller }).voxgateCaller ?? {};

  /** The SDK's server side, loaded by the first authenticated request (see sdk.ts). */
  let loaded: FacadeSdk | undefined;
  const load = async (): Promise<FacadeSdk> => (loaded = await loadFacadeSdk());
  /** The stateless handler, made by the first stateless request (sessions never need its Node adapter). */
  let stateless: Stateless | undefined;
  const loadStateless = async (sdk: FacadeSdk): Promise<Stateless> => {
    const { toNodeHandler } = await loadNodeAdapter();
    if (stateless) return stateless;
    const modern = sdk.createMcpHandler(
      (ctx) => {
        const tenant = (ctx.authInfo?.extra as { tenant?: string } | undefined)?.tenant;
        return sdk.buildFacadeServer(o.hub, tenant === undefined ? {} : { tenant }, { log, version: o.version });
      },
      {
        legacy: 'stateless',
        onerror: (e) => log.debug({ err: e.message }, 'mcp handler error'),
        maxRequestBodySize: o.bodyLimitBytes,
        // Held streams, bounded as sessions are: in all here, per key and per tenant in `handle` (listen-slots.ts).
        maxSubscriptions: o.maxSessions,
      },
    );
    const modernNode = toNodeHandler(modern, { onerror: (e) => log.warn({ err: e.message }, 'mcp adapter error'), maxRequestBodySize: o.bodyLimitBytes });
    return (stateless = { modern, modernNode });
  };
  /** A stream cut for what its client left unread (sse-stream.ts): counted, and a line (throttled per kind). */
  const cutUnread = (caller: ApiCaller, stream: 'session' | 'stateless') => {
    o.metrics.mcpStreamsCut.inc({ stream });
    cuts.write({ tenant: caller.tenant, stream, limitBytes: MAX_UNREAD_BYTES }, 'mcp stream cut: its client left more than the bound unread', stream);
  };
  const unavailable = (reply: FastifyReply, e: unknown) => {
    o.metrics.mcpRequests.inc({ outcome: 'unavailable' });
    log.error({ err: (e as Error).message }, 'mcp request refused: the MCP server code cannot be loaded');
    return rpcError(reply, 503, -32603, 'The MCP endpoint is unavailable: its server code could not be loaded (see the gateway log)');
  };

  const offChanges = o.hub.onToolsChanged(() => {
    stateless?.modern.notify.toolsChanged();
    for (const s of sessions.values()) {
      try {
        s.server.sendToolListChanged();
      } catch (e) {
        log.debug({ err: (e as Error).message }, 'tools/list_changed not sent');
      }
    }
  });

  // What resources/list, resources/templates/list and prompts/list answer changed (a hosted server or a tool process
  // came or went): the sessions were told `listChanged` for both at initialize.
  const offLists = o.hub.onListsChanged(() => {
    stateless?.modern.notify.resourcesChanged();
    stateless?.modern.notify.promptsChanged();
    for (const s of sessions.values()) {
      try {
        s.server.sendResourceListChanged();
        s.server.sendPromptListChanged();
      } catch (e) {
        log.debug({ err: (e as Error).message }, 'resources/prompts list_changed not sent');
      }
    }
  });

  const sweeper = setInterval(
    () => {
      const now = Date.now();
      // A session whose client holds a stream is in use (a GET stream waiting for notifications sends no requests);
      // a client that vanished ends its stream at the latest when a keep-alive write fails.
      for (const id of sessions.ids()) {
        const s = sessions.get(id)!;
        if (!s.transport.hasOpenStream() && now - Math.max(s.lastUsed, s.transport.lastStreamClosed) > o.sessionIdleMs) void closeSession(id, 'idle');
      }
    },
    Math.min(60_000, o.sessionIdleMs),
  );
  sweeper.unref();

  async function closeSession(id: string, why: string): Promise<void> {
    // Synchronously, before any await: the slot is free for the initialize that evicted this session.
    const s = sessions.delete(id);
    if (!s) return;
    s.events.dispose();
    o.metrics.mcpSessions.set(sessions.size);
    log.debug({ why }, 'mcp session closed');
    await s.server.close().catch(() => undefined);
  }

  /**
   * Sessions are bound to the key that opened them, kept only as a hash: the caller's principal (hashed once
   * per key by `authenticate`, not once per request), else the header's own hash.
   */
  const fingerprint = (caller: ApiCaller, authorization: string | undefined) =>
    caller.principal ??
    createHash('sha256')
      .update(authorization ?? '')
      .digest('base64url');

  const { hostAllowed, originAllowed, corsOrigin, originOf } = requestOrigins(o);
  const preflight = (req: FastifyRequest, reply: FastifyReply) => {
    const origin = corsOrigin(req);
    if (!origin || !hostAllowed(req)) {
      o.metrics.mcpRequests.inc({ outcome: 'cors_refused' });
      return reply.code(403).send();
    }
    return reply
      .code(204)
      .header('access-control-allow-origin', origin)
      .header('vary', 'Origin')
      .header('access-control-allow-methods', 'GET, POST, DELETE')
      .header('access-control-allow-headers', CORS_REQUEST_HEADERS)
      .header('access-control-max-age', '600')
      .send();
  };

  // eslint-disable-next-line max-lines-per-function -- one request through the checks the transport spec orders (origin, auth, session, limits)
  const handle = async (req: FastifyRequest, reply: FastifyReply) => {
    const cors = corsOrigin(req);
    if (cors) {
      // On the raw response: the SDK writes hijacked replies itself, and Node merges these into its writeHead.
      reply.raw.setHeader('access-control-allow-origin', cors);
      reply.raw.setHeader('vary', 'Origin');
      reply.raw.setHeader('access-control-expose-headers', CORS_EXPOSED_HEADERS);
    }
    if (!hostAllowed(req)) {
      o.metrics.mcpRequests.inc({ outcome: 'forbidden_host' });
      refusals.write({ host: String(req.headers.host).slice(0, 200) }, 'mcp request for a host name not in mcp.endpoint.allowedHosts refused', 'host');
      return rpcError(reply, 403, -32000, 'Forbidden: this Host is not allowed (add it to mcp.endpoint.allowedHosts)');
    }
    if (!originAllowed(req)) {
      o.metrics.mcpRequests.inc({ outcome: 'forbidden_origin' });
      refusals.write({ origin: String(req.headers.origin).slice(0, 200) }, 'mcp request from a foreign origin refused', 'origin');
      return rpcError(reply, 403, -32000, 'Forbidden: this Origin is not allowed');
    }
    const caller = authenticate(req.headers.authorization, o.apiKeys(), o.tenantOf);
    if (!caller) {
      o.metrics.mcpRequests.inc({ outcome: 'unauthorized' });
      // RFC 6750 + RFC 9728: a bearer token is expected, and it is a Voxgate API key. The resource metadata
      // names no authorization server, so MCP clients (the Inspector) report a missing or wrong key, not OAuth.
      const present = /^Bearer\s+\S+\s*$/i.test(req.headers.authorization ?? '');
      const description = present ? 'the Voxgate API key is not valid' : 'a Voxgate API key is required: Authorization: Bearer <api key>';
      const metadata = `${originOf(req)}${METADATA_PATH}/mcp`;
      void reply.header(
        'www-authenticate',
        `Bearer realm="voxgate", resource_metadata="${metadata}"${present ? ', error="invalid_token"' : ''}, error_description="${description}"`,
      );
      return rpcError(reply, 401, -32001, `Unauthorized: ${description}`);
    }
    // Loaded: no await on the hot path; the first request waits for the load.
    let mcp: FacadeSdk;
    try {
      mcp = loaded ?? (await load());
    } catch (e) {
      return unavailable(reply, e);
    }
    (req.raw as { voxgateCaller?: ApiCaller }).voxgateCaller = caller;
    // The request's authInfo for the SDK: the tenant only, never the key itself (`req.auth` for its Node adapter).
    const authInfo = { token: '[REDACTED]', clientId: caller.tenant ?? '', scopes: [], extra: { tenant: caller.tenant } };
    (req.raw as { auth?: unknown }).auth = authInfo;

    const sid = req.headers['mcp-session-id'];
    if (typeof sid === 'string') {
      const s = sessions.get(sid);
      if (!s || s.keyFingerprint !== fingerprint(caller, req.headers.authorization)) {
        o.metrics.mcpRequests.inc({ outcome: 'unknown_session' });
        return rpcError(reply, 404, -32001, 'Session not found: initialize again');
      }
      s.lastUsed = Date.now();
      counted.session.inc();
      reply.hijack();
      countWrites(reply, caller, s.keyFingerprint, 'session');
      await s.transport.handleRequest(req.raw, reply.raw, req.body, authInfo);
      return reply;
    }
    // A session's transport bounds the depth itself (transport-refusals.ts); the SDK's initialize check and its stateless
    // handler do not: a body thousands of levels deep overflowed their stack (500, a warning, ~0.3 s of CPU each).
    if (req.method === 'POST' && req.body !== undefined && deeperThan(req.body, MAX_JSON_DEPTH)) {
      o.metrics.mcpRequests.inc({ outcome: 'too_deep' });
      return rpcError(reply, 400, -32700, `Parse error: the JSON body is nested deeper than ${MAX_JSON_DEPTH} levels`);
    }
    if (req.method === 'POST' && isInitialize(mcp, req.body)) {
      const keyFingerprint = fingerprint(caller, req.headers.authorization);
      const { tenant } = caller;
      // The slot is reserved now (before any await); the session takes it over once the SDK has assigned its id.
      const refused = admission.admit(keyFingerprint, caller);
      if (refused) return rpcError(reply, refused.status, -32000, refused.message);
      let registered = false;
      const events = eventStores.forSession();
      try {
        const server = mcp.buildFacadeServer(o.hub, authOf(req), { log, version: o.version });
        const transport: NodeSessionTransport = new mcp.NodeSessionTransport({
          held,
          onUnreadCut: () => cutUnread(caller, 'session'),
          sessionIdGenerator: () => randomUUID(),
          // SSE events carry ids (and a retry hint): a dropped stream resumes with Last-Event-ID.
          eventStore: events,
          retryInterval: SSE_RETRY_MS,
          onsessioninitialized: (id) => {
            registered = true;
            sessions.add(id, { transport, server, events, caller, keyFingerprint, tenant, lastUsed: Date.now() });
            o.metrics.mcpSessions.set(sessions.size);
          },
          onsessionclosed: (id) => void closeSession(id, 'deleted'),
        });
        transport.onclose = () => {
          if (transport.sessionId) void closeSession(transport.sessionId, 'transport closed');
        };
        await server.connect(transport);
        transport.useRequestEntry(server.server);
        transport.useFastEntry(mcp.fastEntryOf(server));
        o.metrics.mcpRequests.inc({ outcome: 'initialize' });
        reply.hijack();
        countWrites(reply, caller, keyFingerprint, 'session');
        await transport.handleRequest(req.raw, reply.raw, req.body, authInfo);
      } finally {
        if (!registered) {
          events.dispose();
          sessions.release(keyFingerprint, tenant);
        }
      }
      return reply;
    }
    let handler: Stateless;
    try {
      handler = stateless ?? (await loadStateless(mcp));
    } catch (e) {
      return unavailable(reply, e);
    }
    const listens = req.method === 'POST' ? listensIn(req.body) : 0;
    if (listens > 0) {
      const refused = listening.take(fingerprint(caller, req.headers.authorization), caller, listens, reply.raw);
      if (refused) return rpcError(reply, 429, -32000, refused);
    }
    counted.stateless.inc();
    reply.hijack();
    countWrites(reply, caller, fingerprint(caller, req.headers.authorization), 'stateless');
    deferHeaders(req, reply);
    // A client that stops reading its listen stream is cut, not queued for (sse-stream.ts): its slot is free again.
    boundUnread(reply.raw, () => cutUnread(caller, 'stateless'));
    await handler.modernNode(req.raw, reply.raw, req.body);
    return reply;
  };

  // An empty body with `Content-Type: application/json` is no body (the Python SDK's DELETE sends exactly
  // that); anything else goes through fastify's own JSON parser (prototype-poisoning checks included).
  const json = app.getDefaultJsonParser('error', 'error');
  app.removeContentTypeParser('application/json');
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (req, body, done) => {
    const text = typeof body === 'string' ? body : body.toString('utf8');
    if (text.trim() === '') return done(null, undefined);
    json(req, text, done);
  });

  app.route({
    method: ['GET', 'POST', 'DELETE'],
    url: '/mcp',
    schema: { hide: true },
    handler: handle,
  });
  app.route({ method: 'OPTIONS', url: '/mcp', schema: { hide: true }, handler: preflight });
  registerNoOAuthRoutes(app, originOf);

  const endpoint: McpEndpoint = {
    sessionCount: () => sessions.size,
    state: () => ({
      sessions: sessions.size,
      streaming: sessions.streaming(),
      eventStores: eventStores.sessionCount(),
      eventBytes: eventStores.bytes(),
      keysHolding: sessions.keysHolding(),
      reserved: sessions.reserved,
      listening: listening.size,
    }),
    async close() {
      clearInterval(sweeper);
      headers.close();
      held.close();
      offChanges();
      offLists();
      await Promise.allSettled(sessions.ids().map((id) => closeSession(id, 'shutdown')));
      await stateless?.modern.close();
    },
  };
  // Open SSE streams end before the server closes its connections (fastify runs preClose first).
  app.addHook('preClose', () => endpoint.close());
  return endpoint;
}
