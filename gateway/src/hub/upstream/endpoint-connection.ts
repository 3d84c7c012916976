import { ProtocolError, type CallToolResult, type Transport } from '@modelcontextprotocol/client';
import { GatewayError } from '../../errors.js';
import type { CallContext } from './base.js';
import { tooLargeText } from './failure.js';
import { McpUpstream } from './mcp.js';
import { WS_CLOSE, type WebSocketTransport } from './ws-transport.js';

/** While calls are in flight, a ping this often (see `probe`). */
const PROBE_MS = 2000;
/** Probes unanswered at once, at most (a server that handles one message at a time answers them after its call). */
const MAX_PROBES_OUT = 8;

/**
 * One tool process dialed in on an MCP endpoint: the gateway is the MCP client on the socket the process opened.
 * Everything else is an MCP upstream's (initialize within connectTimeoutMs, paginated tools/list, list_changed, call
 * timeouts, calls in flight failed the moment the socket drops). It lives as long as its socket: once lost or failed
 * it is never started again (the process dials in anew); the endpoint (endpoint.ts) drops it.
 */
export class EndpointConnection extends McpUpstream {
  private pending: WebSocketTransport | undefined;
  private pinger: NodeJS.Timeout | undefined;
  private prober: NodeJS.Timeout | undefined;
  private callsInFlight = 0;
  private probesOut = 0;
  pingIntervalMs = 30_000;
  /** When it became ready (newer connections win a tool name two of them list). */
  readyAt = 0;

  constructor(
    readonly socket: WebSocketTransport,
    ...rest: ConstructorParameters<typeof McpUpstream>
  ) {
    super(...rest);
    this.pending = socket;
  }

  protected override createTransport(): Transport {
    const t = this.pending;
    if (!t) throw new Error('the tool process is gone');
    this.pending = undefined;
    return t;
  }

  /** Initialize on the socket. Resolves when ready; rejects (state failed, lastError why) when it is not. */
  async open(): Promise<void> {
    this.socket.closeReason = { code: WS_CLOSE.unresponsive, reason: 'no answer to initialize in time' };
    await this.start();
    if (this.state !== 'ready') throw new Error(this.lastError ?? 'not ready');
    this.readyAt = Date.now();
    this.socket.closeReason = { code: WS_CLOSE.goingAway, reason: 'the gateway closed the endpoint' };
    this.keepAlive();
  }

  /** MCP ping on a timer: a tool process that stopped answering (any answer, an error too) is cut (4002), and its calls fail at once. */
  private keepAlive(): void {
    clearInterval(this.pinger);
    this.pinger = setInterval(() => {
      const client = this.client;
      if (!client || this.state !== 'ready') return clearInterval(this.pinger);
      client.ping({ timeout: this.pingIntervalMs }).catch((e: unknown) => {
        // A JSON-RPC error is an answer: hand-written tool servers answer `ping` with -32601, and are alive.
        if (e instanceof ProtocolError) return;
        this.socket.closeWith(WS_CLOSE.unresponsive, 'no answer to ping');
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
    } catch (e) {
      // A frame over the bound ends the socket (1009), most likely this answer: "stopped, try again" would be retried.
      if (this.socket.tooLargeFrame && e instanceof GatewayError && e.code === 'UPSTREAM_UNAVAILABLE') {
        const why = `it sent a message over the limit of ${this.socket.maxFrameBytes} bytes (mcp.maxResultBytes, twice, plus framing) and was disconnected`;
        throw new GatewayError('UPSTREAM_ERROR', tooLargeText(this.config.name, why));
      }
      if (this.socket.stalled && e instanceof GatewayError && e.code === 'UPSTREAM_UNAVAILABLE')
        throw new GatewayError(
          'UPSTREAM_UNAVAILABLE',
          `The tool server "${this.config.name}" stopped reading what the gateway sends it and was disconnected. Try again once it has reconnected.`,
        );
      throw e;
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

  /** Ends the session, its socket closed with a code the tool process sees (not told as a lost connection). */
  async closeWith(code: number, reason: string): Promise<void> {
    this.socket.closeReason = { code, reason };
    await this.close();
    this.socket.closeWith(code, reason); // a session still initializing has not handed its transport over yet
  }

  override async close(): Promise<void> {
    clearInterval(this.pinger);
    clearInterval(this.prober);
    await super.close();
  }
}
