import type { CallToolResult, Transport } from '@modelcontextprotocol/client';
import type { CallContext } from './base.js';
import { McpUpstream } from './mcp.js';
import { WS_CLOSE, type WebSocketTransport } from './ws-transport.js';

const WAITING = 'no tool process connected; waiting for one to dial in';
/** While calls are in flight, a ping this often (see `probe`). */
const PROBE_MS = 2000;
/** Probes unanswered at once, at most (a server that handles one message at a time answers them after its call). */
const MAX_PROBES_OUT = 8;

/**
 * An MCP endpoint (xiaozhi's "MCP接入点"): a tool process (78/mcp-calculator's mcp_pipe.py and its ports)
 * dialed in over WebSocket, and the gateway is the MCP client on that connection. Everything else is an
 * MCP upstream's: initialize within connectTimeoutMs, paginated tools/list, list_changed, call timeouts,
 * calls in flight failed the moment the socket drops.
 *
 * Several connections with one token: the newest replaces the older (closed with 4000). A pipe that
 * reconnects after a network change is then served at once, and a stale half-open socket never shadows it.
 */
export class EndpointUpstream extends McpUpstream {
  private pending: WebSocketTransport | undefined;
  private live: WebSocketTransport | undefined;
  private pinger: NodeJS.Timeout | undefined;
  private prober: NodeJS.Timeout | undefined;
  private callsInFlight = 0;
  private probesOut = 0;
  pingIntervalMs = 30_000;

  override start(): Promise<void> {
    if (!this.pending) {
      this.setState('failed', WAITING);
      return Promise.resolve();
    }
    return super.start();
  }

  protected override createTransport(): Transport {
    const t = this.pending;
    if (!t) throw new Error(WAITING);
    this.pending = undefined;
    this.live = t;
    return t;
  }

  /** A tool process dialed in with this endpoint's token. Resolves when it is ready or has failed. */
  async attach(t: WebSocketTransport): Promise<void> {
    if (this.state === 'stopped') return t.closeWith(WS_CLOSE.revoked, 'endpoint removed');
    const old = this.live;
    this.pending = t;
    t.closeReason = { code: WS_CLOSE.unresponsive, reason: 'no answer to initialize in time' };
    this.restarts += old ? 1 : 0;
    // A new connect first (the old session's close is then not a "lost connection"), then the old socket goes.
    const started = this.start();
    old?.closeWith(WS_CLOSE.replaced, 'replaced by a newer connection with the same token');
    try {
      await started;
    } catch {
      return; // told by start(): state failed, lastError says why; the socket went with closeReason
    }
    t.closeReason = { code: WS_CLOSE.goingAway, reason: 'the gateway closed the endpoint' };
    this.keepAlive();
  }

  /** MCP ping on a timer: a tool process that stopped answering is cut (4002), and its calls fail at once. */
  private keepAlive(): void {
    clearInterval(this.pinger);
    const t = this.live;
    this.pinger = setInterval(() => {
      const client = this.client;
      if (this.live !== t || !client || this.state !== 'ready') return clearInterval(this.pinger);
      client.ping({ timeout: this.pingIntervalMs }).catch(() => {
        if (this.live === t) t?.closeWith(WS_CLOSE.unresponsive, 'no answer to ping');
      });
    }, this.pingIntervalMs);
    this.pinger.unref();
  }

  override async call(tool: string, args: Record<string, unknown>, ctx: CallContext): Promise<CallToolResult> {
    if (this.callsInFlight++ === 0) {
      this.prober = setInterval(() => this.probe(), PROBE_MS);
      this.prober.unref();
    }
    try {
      return await super.call(tool, args, ctx);
    } finally {
      if (--this.callsInFlight === 0) clearInterval(this.prober);
    }
  }

  /**
   * A ping while calls are in flight, its answer not awaited. 78/mcp-calculator's mcp_pipe.py keeps its WebSocket
   * open when its server process dies (it gathers both directions) and closes it only when a message to the dead
   * process fails to write: without a message, a call in flight waited for the keepalive ping (up to
   * pingIntervalMs) or its own timeout. The probe is that message; an unanswered one cuts nothing (a server busy
   * with one message at a time answers it after its call), the keepalive ping does that.
   */
  private probe(): void {
    const client = this.client;
    if (!client || this.state !== 'ready' || this.probesOut >= MAX_PROBES_OUT) return;
    this.probesOut++;
    client
      .ping({ timeout: this.pingIntervalMs })
      .catch(() => undefined)
      .finally(() => this.probesOut--);
  }

  /** Connections being served (0 or 1). */
  get connections(): number {
    return this.live && this.state === 'ready' ? 1 : 0;
  }

  /** The token was revoked: the live connection is cut with 4001, and the endpoint leaves the hub. */
  async revoke(): Promise<void> {
    this.live?.closeWith(WS_CLOSE.revoked, 'token revoked');
    this.pending?.closeWith(WS_CLOSE.revoked, 'token revoked');
    await this.close();
  }

  override async close(): Promise<void> {
    clearInterval(this.pinger);
    clearInterval(this.prober);
    await super.close();
  }
}
