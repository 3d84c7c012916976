import { AsyncLocalStorage } from 'node:async_hooks';
import type { Transport } from '@modelcontextprotocol/client';
import { DEFAULT_JSON_LIMITS } from '@voxgate/protocol';
import type { ServerConfig } from '../config.js';
import { fillHeaders } from '../credentials.js';
import { clientSdk } from '../client-sdk.js';
import { guardedFetch } from '../ssrf.js';
import { ChildStdioTransport } from '../stdio-transport.js';
import type { HubSettings, UpstreamDeps } from './base.js';
import { boundedMessages } from './bounded-messages.js';
import { messageBound } from './result-cap.js';
import type { UnreadPlace } from '../unread-total.js';
import { byteBudget } from '../../throttle/token-bucket.js';
import { dialWebSocket, WebSocketTransport, type WsTransportOptions } from './ws-transport.js';

/**
 * What a hosted server or a tool process may leave unread of what the gateway writes to it, before the next write: two
 * messages of the largest size it may send (its requests' ids come back in the answers), and the device links' margin
 * (links/unread-bound.ts) for the calls the gateway writes it. ~8 MiB at the default mcp.maxResultBytes.
 */
export function unreadBound(s: Pick<HubSettings, 'maxResultBytes'>): number {
  return 2 * messageBound(s.maxResultBytes) + 4 * 1024 * 1024;
}

/**
 * Where a peer counts in the gateway's unread total, when there is one: `group` is whose holdings are compared (a
 * tenant's tool processes together, each hosted server on its own), `who` names it in the log lines.
 */
export function unreadPlace(s: Pick<HubSettings, 'unreadTotal'>, group: string, who: Record<string, unknown>): UnreadPlace | undefined {
  return s.unreadTotal ? { total: s.unreadTotal, group, who } : undefined;
}

/** Bounds on what a WebSocket peer (a dialed server, a tool process that dialed in) sends, and leaves unread. */
export function wsBounds(s: HubSettings, onRefused?: WsTransportOptions['onRefused']): WsTransportOptions {
  const maxBytes = messageBound(s.maxResultBytes);
  return {
    limits: { maxDepth: DEFAULT_JSON_LIMITS.maxDepth, maxBytes },
    maxMessagesPerSecond: 500,
    maxUnreadBytes: unreadBound(s),
    ...(onRefused ? { onRefused } : {}),
  };
}

/** Headers for the HTTP request being made right now on behalf of one call (its caller's tokens). */
const callHeaders = new AsyncLocalStorage<Record<string, string>>();

/** Run `fn` so that every HTTP request it makes to a hosted server carries `headers`. */
export function withHeaders<T>(headers: Record<string, string>, fn: () => Promise<T>): Promise<T> {
  return callHeaders.run(headers, fn);
}

export interface TransportHooks {
  onOversized: (info: { bytes: number; id: string | number | undefined }) => void;
  onStderr: (line: string) => void;
  /** The server left more than unreadBound unread: a stdio write refused, a WebSocket cut. */
  onUnread?: (info: { transport: 'stdio' | 'websocket'; unread: number }) => void;
  /** A stdio server past its read budget: its output waits in its pipe for a while. */
  onReadPaused?: () => void;
}

/** What a server's transport tells its upstream: counted (`d`'s hooks), logged, its stderr's last 20 lines kept in `stderrTail`. */
export function upstreamHooks(d: Pick<UpstreamDeps, 'log' | 'settings' | 'onOversized' | 'onUnread' | 'onReadPaused'>, stderrTail: string[]): TransportHooks {
  return {
    onReadPaused: () => d.onReadPaused?.(),
    onOversized: ({ bytes, id }) => {
      d.onOversized?.();
      d.log.warn(
        { bytes, limit: d.settings.maxResultBytes, answersRequest: id !== undefined },
        'upstream message over the size limit skipped; the server stays connected',
      );
    },
    onUnread: ({ transport, unread }) => {
      d.onUnread?.(transport);
      d.log.debug({ unread }, 'upstream server is not reading what the gateway writes it');
    },
    onStderr: (line) => {
      stderrTail.push(line);
      if (stderrTail.length > 20) stderrTail.shift();
      d.log.debug({ stderr: line }, 'upstream stderr');
    },
  };
}

/** The SDK transport for a server: our own stdio transport (process groups), or Streamable HTTP / SSE / WebSocket through the SSRF guard. */
export function makeTransport(c: ServerConfig, s: HubSettings, hooks: TransportHooks): Transport {
  if (c.type === 'stdio') {
    const readRate = c.readBytesPerSecond ?? s.stdioReadBytesPerSecond;
    return new ChildStdioTransport({
      command: c.command!,
      args: c.args,
      env: c.env,
      ...(c.cwd ? { cwd: c.cwd } : {}),
      killGraceMs: s.killGraceMs,
      maxMessageBytes: messageBound(s.maxResultBytes),
      maxResultBytes: s.maxResultBytes,
      onOversized: hooks.onOversized,
      onStderr: hooks.onStderr,
      maxUnreadBytes: unreadBound(s),
      onUnread: (unread) => hooks.onUnread?.({ transport: 'stdio', unread }),
      unread: unreadPlace(s, `server:${c.name}`, { server: c.name }),
      // Its own, from each start: a restart is bounded (mcp.maxRestarts, with backoff).
      readBudget: readRate === undefined ? undefined : byteBudget(readRate),
      onReadPaused: hooks.onReadPaused,
    });
  }
  const allowPrivate = c.allowPrivateNetwork ?? s.allowPrivateNetwork;
  if (c.type === 'websocket') {
    // One socket serves every caller: headers go once, at connect (config refuses per-call placeholders).
    const headers = fillHeaders(c.headersTemplate, undefined, c.name, true);
    const dial = () =>
      dialWebSocket(c.url!, {
        headers,
        allowPrivateNetwork: allowPrivate,
        maxPayloadBytes: messageBound(s.maxResultBytes),
        handshakeTimeoutMs: s.connectTimeoutMs,
        subprotocol: 'mcp',
      });
    return new WebSocketTransport(dial, {
      ...wsBounds(s, (reason, detail) => hooks.onStderr(`frame refused (${reason}): ${detail}`)),
      onUnread: (unread) => hooks.onUnread?.({ transport: 'websocket', unread }),
      unread: unreadPlace(s, `server:${c.name}`, { server: c.name }),
    });
  }
  // Headers: the template filled with the current call's tokens, or (no call: connect, listing) the
  // headers whose placeholders need no token.
  const guarded = guardedFetch(allowPrivate, () => callHeaders.getStore() ?? fillHeaders(c.headersTemplate, undefined, c.name, true));
  // Each answer (a JSON body, an SSE event) within the message bound a stdio server's lines have (bounded-messages.ts).
  const fetchFn = boundedMessages(guarded, messageBound(s.maxResultBytes), s.maxResultBytes, hooks.onOversized);
  const url = new URL(c.url!);
  // Made by an McpUpstream, whose module brought the SDK's client side (hub/upstream/mcp-kinds.ts).
  const { SSEClientTransport, StreamableHTTPClientTransport } = clientSdk();
  return c.type === 'sse' ? new SSEClientTransport(url, { fetch: fetchFn }) : new StreamableHTTPClientTransport(url, { fetch: fetchFn });
}
