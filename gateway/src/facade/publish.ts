import type { Logger } from 'pino';
import type { McpHub } from '../hub/hub.js';
import { unreadPlace, wsBounds } from '../hub/upstream/transports.js';
import { dialWebSocket, WebSocketTransport } from '../hub/upstream/ws-transport.js';

export interface PublishTarget {
  url: string;
  tenant?: string | undefined;
  allowed_tools?: string[] | undefined;
}

/** mcp_pipe.py's reconnect backoff: 1 s, doubling, at most 10 min. */
export const PUBLISH_BACKOFF = { firstMs: 1000, maxMs: 600_000 };

/**
 * The fleet published to a remote MCP endpoint (xiaozhi.me's, or another Voxgate's inbound endpoint): the
 * gateway dials out as the tool side does and serves, on that connection, the hub's namespace as the given
 * tenant sees it (the /mcp face's server builder), until it is closed. A lost or refused connection is
 * dialed again with the pipe's backoff; one that served resets it.
 */
export class FleetPublisher {
  private stopped = false;
  private timer: NodeJS.Timeout | undefined;
  private transport: WebSocketTransport | undefined;
  private offChanges: (() => void) | undefined;
  private delayMs: number;
  /** Connections that completed the MCP handshake (for status and tests). */
  served = 0;

  constructor(
    private readonly hub: McpHub,
    private readonly target: PublishTarget,
    private readonly o: { log: Logger; version: string; backoff?: { firstMs: number; maxMs: number } },
  ) {
    this.delayMs = this.backoff.firstMs;
  }

  private get backoff() {
    return this.o.backoff ?? PUBLISH_BACKOFF;
  }

  start(): void {
    void this.connect();
  }

  private async connect(): Promise<void> {
    if (this.stopped) return;
    const log = this.o.log;
    const s = this.hub.settings;
    let ws, facade;
    try {
      // The facade (and the MCP SDK's server side) loads on the first publish: a gateway that publishes nothing does without.
      facade = await import('./mcp-server.js');
    } catch (e) {
      log.error({ err: (e as Error).message, retryInMs: this.delayMs }, 'publishing to the MCP endpoint: the MCP server code cannot be loaded');
      return this.retry();
    }
    try {
      // The operator chose this address: no SSRF guard (a LAN peer is the common case).
      ws = await dialWebSocket(this.target.url, {
        headers: {},
        allowPrivateNetwork: true,
        maxPayloadBytes: wsBounds(s).limits.maxBytes,
        handshakeTimeoutMs: s.connectTimeoutMs,
      });
    } catch (e) {
      log.warn({ err: (e as Error).message, retryInMs: this.delayMs }, 'publishing to the MCP endpoint: cannot connect');
      return this.retry();
    }
    if (this.stopped) return void ws.close(1001, 'gateway shutting down');
    const transport = new WebSocketTransport(ws, {
      ...wsBounds(s, (reason, detail) => log.warn({ reason, detail }, 'publish: frame refused; closing')),
      // Dialed again with the backoff, so at most a line per attempt.
      onUnread: (unread) => log.warn({ unread }, 'publish: the MCP endpoint stopped reading what it is sent; connection cut'),
      // Its URL may carry a token: the host alone names it.
      unread: unreadPlace(s, 'publish', { publish: new URL(this.target.url).host }),
    });
    this.transport = transport;
    const caller = this.target.tenant === undefined ? {} : { tenant: this.target.tenant };
    const server = facade.buildFacadeServer(this.hub, caller, { log, version: this.o.version, allowedTools: this.target.allowed_tools });
    server.server.oninitialized = () => {
      this.served++;
      this.delayMs = this.backoff.firstMs;
      log.info({ client: server.server.getClientVersion() }, 'publishing the fleet to the MCP endpoint');
    };
    const offTools = this.hub.onToolsChanged(() => {
      Promise.resolve(server.server.sendToolListChanged()).catch(() => undefined);
    });
    // listChanged is declared for resources and prompts too (mcp-server.ts): what the /mcp sessions are told.
    const offLists = this.hub.onListsChanged(() => {
      Promise.resolve(server.server.sendResourceListChanged()).catch(() => undefined);
      Promise.resolve(server.server.sendPromptListChanged()).catch(() => undefined);
    });
    this.offChanges = () => {
      offTools();
      offLists();
    };
    await server.connect(transport);
    // The server's own onclose is chained by connect(): learn of the end through the socket.
    ws.once('close', (code: number) => {
      this.offChanges?.();
      if (this.transport === transport) this.transport = undefined;
      if (this.stopped) return;
      log.warn({ code, retryInMs: this.delayMs }, 'publishing to the MCP endpoint: connection closed');
      this.retry();
    });
  }

  private retry(): void {
    if (this.stopped) return;
    const delay = this.delayMs;
    this.delayMs = Math.min(this.delayMs * 2, this.backoff.maxMs);
    this.timer = setTimeout(() => void this.connect(), delay);
    this.timer.unref();
  }

  close(): void {
    this.stopped = true;
    clearTimeout(this.timer);
    this.offChanges?.();
    this.transport?.closeWith(1001, 'gateway shutting down');
  }
}
