import type { IncomingMessage, Server } from 'node:http';
import type { Duplex } from 'node:stream';
import type { Logger } from 'pino';
import { WebSocketServer, type WebSocket } from 'ws';
import { BoundedLru } from '../throttle/bounded-lru.js';
import { sourceKey } from '../throttle/source-key.js';
import { byteBudget, KeyedTokenBucket, type ByteBudget } from '../throttle/token-bucket.js';
import { ThrottledLog } from '../throttle/throttled-log.js';
import { WebSocketTransport, WS_CLOSE, type EndpointRecord, type McpEndpoints, type UnreadTotal, type WsTransportOptions } from '../hub/endpoints.js';
import { REFUSAL_LOG } from './connection-limits.js';
import { bearerToken } from './device-auth.js';
import { guardFrame } from './frame-guard.js';
import type { Metrics } from '../metrics.js';
import { refuse } from './ws.js';
import { RequestTarget, trimSlashes } from './request-target.js';

export interface McpEndpointLinkOptions {
  /** Default `/mcp_endpoint/mcp/` (xiaozhi-esp32-server's path); a trailing slash or not, both match. */
  path: string;
  endpoints: McpEndpoints;
  /** Frame bounds (size at the socket, depth and rate per message). */
  bounds: WsTransportOptions;
  maxConnections: number;
  maxConnectionsPerToken: number;
  /** Unknown tokens per source address: a bucket of `burst`, refilled at `perSecond`; past it, 429. */
  unknownTokenRate: { perSecond: number; burst: number };
  /** Connections per known token: a bucket of `burst`, refilled at `perSecond`; past it, 429. */
  connectRate: { perSecond: number; burst: number };
  /** Bytes a second one tenant's tool processes may send together (a second's worth at once); past it, not read. */
  readBytesPerSecond: number;
  /** What every hosted server and tool process together may leave unread; a tenant's tool processes count as one group. */
  unreadTotal?: UnreadTotal | undefined;
  /** The address a tool process connected from (its socket's, or a trusted proxy's X-Forwarded-For: client-address.ts). */
  addressOf: (req: IncomingMessage) => string;
  log: Logger;
  metrics: Metrics;
}

/**
 * The inbound MCP endpoint on the HTTP port: a tool process (mcp_pipe.py) opens a WebSocket to
 * `<path>?token=…` (or with `Authorization: Bearer …`) and the gateway becomes its MCP client. Refusals
 * happen at the upgrade, as HTTP statuses the pipe logs and retries with its backoff: 401 (unknown token),
 * 429 (too many unknown tokens from this address), 503 (connection caps).
 */
// eslint-disable-next-line max-lines-per-function -- a connection's handlers share its closure (limits, state, close)
export function attachMcpEndpointLink(server: Server, o: McpEndpointLinkOptions) {
  const wss = new WebSocketServer({ noServer: true, maxPayload: o.bounds.limits.maxBytes, perMessageDeflate: false });
  const base = trimSlashes(o.path);
  const perToken = new Map<string, number>();
  // Monotonic: on Date.now a wall clock stepped back (NTP) refilled a bucket by a negative time, refusing a token's
  // reconnects (429) for as long as the step (and held the refusal lines back as long).
  const now = () => performance.now();
  const limiter = new KeyedTokenBucket({ ratePerSecond: o.unknownTokenRate.perSecond, burst: o.unknownTokenRate.burst }, { maxKeys: 10_000, now });
  // A tool process reconnecting in a loop made a session, log lines and a namespace rebuild per connection, unbounded.
  const connects = new KeyedTokenBucket({ ratePerSecond: o.connectRate.perSecond, burst: o.connectRate.burst }, { maxKeys: 100_000, now });
  const log = o.log.child({ component: 'mcp-endpoint' });
  const fullLog = new ThrottledLog(log, 'warn', REFUSAL_LOG, now);
  const refusedLog = new ThrottledLog(log, 'warn', { linesPerWindow: 1, windowMs: 60_000, maxKeys: 10_000 }, now);
  // A line per endpoint per minute: a tool process may send 500 such frames a second.
  const skippedLog = new ThrottledLog(log, 'warn', { linesPerWindow: 1, windowMs: 60_000, maxKeys: 10_000 }, now);
  const warnFull = (fields: Record<string, unknown>, msg: string) => void fullLog.write(fields, msg);
  // One byte budget per tenant (operators' endpoints: one), shared by all its tool processes: what they send is
  // parsed on the event loop every device and caller shares (ws-transport.ts readBudget).
  const readBudgets = new BoundedLru<string, ByteBudget>(10_000);
  const readBudgetOf = (tenant: string | undefined): ByteBudget => {
    const key = tenant ?? '\u0000operators';
    return {
      take: (bytes) => {
        let b = readBudgets.get(key);
        if (!b) readBudgets.set(key, (b = byteBudget(o.readBytesPerSecond, now)));
        return b.take(bytes);
      },
    };
  };
  const pausedLog = new ThrottledLog(log, 'warn', { linesPerWindow: 1, windowMs: 60_000, maxKeys: 10_000 }, now);

  const onUpgrade = (req: IncomingMessage, socket: Duplex, head: Buffer) => {
    const target = new RequestTarget(req.url);
    if (trimSlashes(target.path) !== base) return;
    guardFrame(() => upgrade(req, socket, head, target), {
      transport: 'websocket',
      log,
      who: () => ({ remote: req.socket.remoteAddress }),
      metrics: o.metrics,
      close: () => socket.destroy(),
    });
  };

  const upgrade = (req: IncomingMessage, socket: Duplex, head: Buffer, target: RequestTarget) => {
    const remote = o.addressOf(req);
    const header = req.headers.authorization;
    const token = bearerToken(header ?? undefined) ?? target.query('token') ?? '';
    const record = token ? o.endpoints.byToken(token) : undefined;
    if (!record) {
      // Per source (an IPv4 address, an IPv6 /64), as the connection limits count: one IPv6 host has a whole /64 to rotate through.
      const source = sourceKey(remote);
      const take = limiter.take(source);
      o.metrics.authRefused.inc({ transport: 'mcp_endpoint', reason: take.ok ? 'bad_token' : 'rate_limited' });
      o.metrics.inboundEndpointRefused.inc({ reason: take.ok ? 'unknown_token' : 'rate_limited' });
      if (!take.ok) {
        refusedLog.write({ remote }, 'MCP endpoint: too many unknown tokens from this address; refusing for a while', source);
        return refuse(socket, 429, 'Too Many Requests', `too many unknown tokens; retry in ${take.retryAfterSeconds} s`);
      }
      refusedLog.write({ remote }, 'MCP endpoint refused: unknown token', source);
      return refuse(socket, 401, 'Unauthorized', 'unknown or revoked MCP endpoint token');
    }
    const take = connects.take(record.id);
    if (!take.ok) {
      o.metrics.inboundEndpointRefused.inc({ reason: 'token_rate' });
      refusedLog.write({ remote, endpoint: record.name }, 'MCP endpoint refused: one token reconnecting too often', record.id);
      return refuse(socket, 429, 'Too Many Requests', `this token connects too often; retry in ${take.retryAfterSeconds} s`);
    }
    if (wss.clients.size >= o.maxConnections) {
      o.metrics.inboundEndpointRefused.inc({ reason: 'total_full' });
      warnFull({ remote, maxConnections: o.maxConnections }, 'MCP endpoint refused: mcp.endpoints.maxConnections reached');
      return refuse(socket, 503, 'Service Unavailable', 'the gateway holds as many MCP endpoint connections as it may');
    }
    if ((perToken.get(record.id) ?? 0) >= o.maxConnectionsPerToken) {
      o.metrics.inboundEndpointRefused.inc({ reason: 'token_full' });
      warnFull({ remote, endpoint: record.name }, 'MCP endpoint refused: too many connections with one token');
      return refuse(socket, 503, 'Service Unavailable', 'too many connections with this token at once');
    }
    wss.handleUpgrade(req, socket, head, (ws) => onConnection(ws, record, remote));
  };

  const onConnection = (ws: WebSocket, record: EndpointRecord, remote: string) => {
    perToken.set(record.id, (perToken.get(record.id) ?? 0) + 1);
    o.metrics.inboundEndpointConnections.inc();
    ws.once('close', (code: number) => {
      o.metrics.inboundEndpointConnections.dec();
      const n = (perToken.get(record.id) ?? 1) - 1;
      if (n > 0) perToken.set(record.id, n);
      else perToken.delete(record.id);
      log.info({ endpoint: record.name, code, remote }, 'MCP endpoint connection closed');
    });
    ws.on('error', (err: Error & { code?: string }) => {
      const reason = err.code === 'WS_ERR_UNSUPPORTED_MESSAGE_LENGTH' ? 'too_large' : 'ws_protocol';
      o.metrics.framesRejected.inc({ reason });
      log.warn({ endpoint: record.name, reason, err: err.message }, 'MCP endpoint WebSocket error; dropping the connection');
    });
    const t = new WebSocketTransport(ws, {
      ...o.bounds,
      onRefused: (reason, detail) => {
        o.metrics.framesRejected.inc({ reason });
        log.warn({ endpoint: record.name, reason, detail }, 'MCP endpoint frame refused; closing the connection');
      },
      onUnread: (unread) => {
        o.metrics.hubUnread.inc({ transport: 'endpoint' });
        const fields = { endpoint: record.name, remote, unread, maxUnreadBytes: o.bounds.maxUnreadBytes };
        fullLog.write(fields, 'MCP endpoint: the tool process stopped reading what it is sent; connection cut', 'unread');
      },
      readBudget: readBudgetOf(record.tenant),
      // A tenant's tool processes hold their part together (operators' endpoints: one part), as they share readBudget.
      unread: o.unreadTotal && { total: o.unreadTotal, group: `tenant:${record.tenant ?? ''}`, who: { endpoint: record.name, tenant: record.tenant, remote } },
      onReadPaused: () => {
        o.metrics.readsPaused.inc({ transport: 'mcp_endpoint', budget: 'tenant' });
        const fields = { endpoint: record.name, tenant: record.tenant, readBytesPerSecond: o.readBytesPerSecond };
        pausedLog.write(fields, "MCP endpoint: a tenant's tool processes send more than mcp.endpoints.readBytesPerSecond; reading paused", record.tenant ?? '');
      },
      onSkipped: (head) => {
        o.metrics.framesRejected.inc({ reason: 'not_json' });
        skippedLog.write({ endpoint: record.name, head }, 'MCP endpoint frame skipped: not one JSON-RPC message', record.id);
      },
    });
    log.info({ endpoint: record.name, remote }, 'MCP endpoint: a tool process connected');
    void o.endpoints
      .accept(record, t)
      .catch((err: unknown) => log.warn({ endpoint: record.name, err: (err as Error).message }, 'MCP endpoint connection failed'));
  };

  server.on('upgrade', onUpgrade);
  return {
    /** Whether a path is this endpoint's (the device link leaves it alone). */
    owns: (pathname: string) => trimSlashes(pathname) === base,
    connections: () => wss.clients.size,
    close(): void {
      server.off('upgrade', onUpgrade);
      for (const ws of wss.clients) {
        ws.close(WS_CLOSE.goingAway, 'gateway shutting down');
        setTimeout(() => ws.terminate(), 1000).unref();
      }
      wss.close();
    },
  };
}
