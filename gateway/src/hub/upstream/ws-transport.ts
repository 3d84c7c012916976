import type { JSONRPCMessage, Transport } from '@modelcontextprotocol/client';
import { checkJsonBounds, type JsonLimits } from '@voxgate/protocol';
import { WebSocket, type RawData } from 'ws';
import { clientSdk, clientSdkLoaded, loadClientSdk } from '../client-sdk.js';
import { assertPublicHost, guardedLookup } from '../ssrf.js';
import type { MessageTap } from '../stdio-transport.js';
import { UNREAD_FULL, type UnreadPlace, type UnreadShare } from '../unread-total.js';

/** Close codes every MCP-over-WebSocket connection of the gateway uses (inbound endpoint, outbound, publish). */
export const WS_CLOSE = {
  normal: 1000,
  goingAway: 1001,
  /** A frame that is not one JSON-RPC message, nested too deep, or a flood of messages. */
  policy: 1008,
  /** ws closes with this itself when a frame is over maxPayload. */
  tooBig: 1009,
  /** Another connection with the same token took this one's place. */
  replaced: 4000,
  /** The endpoint's token was revoked. */
  revoked: 4001,
  /** No answer to initialize within the handshake deadline, or to a keepalive ping. */
  unresponsive: 4002,
} as const;

export interface WsTransportOptions {
  /** Bounds of each text frame, checked before it is parsed. */
  limits: JsonLimits;
  /** Messages per second the peer may send (a burst of as many); past it the connection is closed (1008). */
  maxMessagesPerSecond: number;
  /** A frame was refused (the connection is closed with 1008). */
  onRefused?: (reason: 'too_deep' | 'too_large' | 'not_json' | 'flood', detail: string) => void;
  /**
   * Bytes the peer may leave unread before the next write (checked before each, so one large message always leaves
   * whole). Past it the socket is cut (terminated: a close frame would queue behind what it does not read) and told
   * through `onUnread`. Unset: unbounded.
   */
  maxUnreadBytes?: number;
  onUnread?: (unread: number) => void;
  /**
   * The gateway's total of what its peers leave unread, and this peer's group in it (hub/unread-total.ts): a write that
   * does not fit is refused, or another peer is cut to make room. Unset: only maxUnreadBytes bounds this peer.
   */
  unread?: UnreadPlace | undefined;
  /**
   * What the peer's frames spend, shared with whoever shares the budget: `take` answers how long (ms) to stop reading
   * the socket (0: go on). The frame in hand is handled; the socket is paused until the deficit is repaid.
   */
  readBudget?: { take(bytes: number): number };
  /** Reading paused for the read budget. */
  onReadPaused?: () => void;
  /**
   * Given, a frame that is not one JSON-RPC message is skipped and told here instead of refused: what mcp_pipe.py
   * relays of its server's own stdout lines (a banner, a print()), as the gateway's stdio transport and xiaozhi's
   * endpoint relay skip them. It still counts against maxMessagesPerSecond.
   */
  onSkipped?: (detail: string) => void;
}

/**
 * The MCP SDK's Transport over one WebSocket: one JSON-RPC message per text frame (a trailing newline, as
 * 78/mcp-calculator's mcp_pipe.py sends, is tolerated; binary frames are read as UTF-8 text). The socket is
 * either accepted (inbound endpoint) or dialed by `start()` (outbound, publish). Everything the peer sends is
 * bounded: size (maxPayload, at the socket), depth, rate; a frame past a bound ends the connection.
 */
export class WebSocketTransport implements Transport {
  onclose?: () => void;
  onerror?: (error: Error) => void;
  onmessage?: (message: JSONRPCMessage) => void;
  /** Set once the SDK Client is connected: the gateway's own `tools/call` lane takes its answers first. */
  tap: MessageTap | undefined;
  private ws: WebSocket | undefined;
  private closed = false;
  private tokens: number;
  /** Monotonic: a wall clock stepped back refilled the bucket by a negative time, and cut every peer as a flood. */
  private at = performance.now();

  constructor(
    private readonly socket: WebSocket | (() => Promise<WebSocket>),
    private readonly o: WsTransportOptions,
  ) {
    this.tokens = o.maxMessagesPerSecond;
  }

  async start(): Promise<void> {
    // The SDK's client side parses the messages (hub/client-sdk.ts): loaded before the socket is read. An
    // upstream's transport finds it loaded (no wait); a publish's first socket loads it before dialing.
    if (!clientSdkLoaded()) await loadClientSdk();
    const ws = typeof this.socket === 'function' ? await this.socket() : this.socket;
    this.ws = ws;
    const live = ws.readyState === WebSocket.OPEN || ws.readyState === WebSocket.CONNECTING;
    // Cut for the total: the bytes it holds go with its socket.
    if (live && this.o.unread) this.share = this.o.unread.total.join(this.o.unread, () => this.cut(ws));
    ws.on('message', (data: RawData) => this.onFrame(data));
    ws.on('error', (err: Error & { code?: string }) => {
      if (err.code === 'WS_ERR_UNSUPPORTED_MESSAGE_LENGTH') this.tooLargeFrame = true;
      this.onerror?.(err);
    });
    ws.on('close', () => {
      this.share?.leave();
      this.ended();
    });
    if (ws.isPaused) ws.resume();
    if (!live) this.ended();
  }

  /** This peer's part of the gateway's unread total (set once started, with `unread`). */
  private share: UnreadShare | undefined;

  send(message: JSONRPCMessage): Promise<void> {
    const ws = this.ws;
    if (!ws || ws.readyState !== WebSocket.OPEN) return Promise.reject(new Error('WebSocket not open'));
    if (this.o.maxUnreadBytes !== undefined && ws.bufferedAmount > this.o.maxUnreadBytes) {
      this.cutUnread(ws);
      return Promise.reject(new Error('WebSocket cut: the peer stopped reading what it is sent'));
    }
    const text = JSON.stringify(message);
    const share = this.share;
    if (!share) return new Promise((resolve, reject) => ws.send(text, (err) => (err ? reject(err) : resolve())));
    // Counted until the socket has taken it (the send's callback), so that what waits in memory is what is counted.
    const bytes = Buffer.byteLength(text);
    if (!share.take(bytes)) return Promise.reject(new Error(UNREAD_FULL));
    return new Promise((resolve, reject) =>
      ws.send(text, (err) => {
        share.give(bytes);
        if (err) reject(err);
        else resolve();
      }),
    );
  }

  /** The peer sent a frame over maxPayload (ws closes with 1009): what the calls that fail with the socket are told. */
  tooLargeFrame = false;
  /**
   * The peer was cut for what it left unread: more than maxUnreadBytes, or the most of a full unread total. A peer that keeps sending requests (each answered:
   * a `ping`, an unknown method, its id echoed back up to the frame bound long) while it reads nothing had every
   * answer kept in the gateway's memory: ~400 MB in seconds from one tool process (red team 10).
   */
  stalled = false;

  private cutUnread(ws: WebSocket): void {
    if (this.stalled) return;
    this.o.onUnread?.(ws.bufferedAmount);
    this.cut(ws);
  }

  /** Terminated (a close frame would queue behind what it does not read): what waited for it goes with the socket. */
  private cut(ws: WebSocket): void {
    if (this.stalled) return;
    this.stalled = true;
    ws.terminate();
    this.ended();
  }
  get maxFrameBytes(): number {
    return this.o.limits.maxBytes;
  }

  /** What close() (the SDK client's own close) tells the peer. */
  closeReason: { code: number; reason: string } = { code: WS_CLOSE.normal, reason: 'closing' };

  close(): Promise<void> {
    this.closeWith(this.closeReason.code, this.closeReason.reason);
    return Promise.resolve();
  }

  /** Close with a code the peer can act on; the socket is cut if it does not complete the close in a second. */
  closeWith(code: number, reason: string): void {
    const ws = this.ws ?? (typeof this.socket === 'function' ? undefined : this.socket);
    if (!ws) return this.ended();
    if (ws.readyState === WebSocket.OPEN || ws.readyState === WebSocket.CONNECTING) {
      ws.close(code, reason);
      setTimeout(() => ws.terminate(), 1000).unref();
    }
    // Calls in flight fail now, not when the peer acknowledges the close.
    this.ended();
  }

  private ended(): void {
    if (this.closed) return;
    this.closed = true;
    this.onclose?.();
    this.tap?.closed();
  }

  private onFrame(data: RawData): void {
    if (this.closed) return;
    const now = performance.now();
    this.tokens = Math.min(this.o.maxMessagesPerSecond, this.tokens + ((now - this.at) / 1000) * this.o.maxMessagesPerSecond);
    this.at = now;
    if (this.tokens < 1) return this.refuse('flood', `over ${this.o.maxMessagesPerSecond} messages per second`);
    this.tokens -= 1;
    const bytes = Array.isArray(data) ? Buffer.concat(data) : Buffer.from(data as ArrayBuffer);
    this.spend(bytes.length);
    const text = bytes.toString('utf8').trim();
    if (text === '') return;
    const bounds = checkJsonBounds(text, this.o.limits);
    if (!bounds.ok) return this.refuse(bounds.reason, bounds.detail);
    let message: JSONRPCMessage;
    try {
      message = clientSdk().deserializeMessage(text);
    } catch {
      if (this.o.onSkipped) return this.o.onSkipped(text.slice(0, 80));
      return this.refuse('not_json', 'a frame is not one JSON-RPC message');
    }
    try {
      if (!this.tap?.take(message)) this.onmessage?.(message);
    } catch (e) {
      this.onerror?.(e as Error);
    }
  }

  private readPaused = false;

  /** The read budget: past it the socket is not read until the deficit is repaid (frames already read still come). */
  private spend(bytes: number): void {
    const wait = this.o.readBudget?.take(bytes) ?? 0;
    const ws = this.ws;
    if (wait <= 0 || this.readPaused || !ws) return;
    this.readPaused = true;
    ws.pause();
    this.o.onReadPaused?.();
    setTimeout(() => {
      this.readPaused = false;
      if (!this.closed) ws.resume();
    }, wait).unref();
  }

  private refuse(reason: 'too_deep' | 'too_large' | 'not_json' | 'flood', detail: string): void {
    this.o.onRefused?.(reason, detail);
    this.closeWith(WS_CLOSE.policy, detail.slice(0, 120));
  }
}

export interface DialOptions {
  headers: Record<string, string>;
  allowPrivateNetwork: boolean;
  maxPayloadBytes: number;
  handshakeTimeoutMs: number;
  /** `mcp` (the draft WebSocket transport); none for a xiaozhi endpoint, which answers no subprotocol. */
  subprotocol?: string | undefined;
}

/**
 * Dial an MCP server over WebSocket (the MCP draft transport: subprotocol `mcp`). Without
 * allowPrivateNetwork the host is checked up front and again in the connection's own DNS lookup.
 */
export async function dialWebSocket(url: string, o: DialOptions): Promise<WebSocket> {
  const host = new URL(url).hostname.replace(/^\[|\]$/g, '');
  if (!o.allowPrivateNetwork) await assertPublicHost(host);
  const ws = new WebSocket(url, o.subprotocol === undefined ? [] : [o.subprotocol], {
    headers: o.headers,
    maxPayload: o.maxPayloadBytes,
    handshakeTimeout: o.handshakeTimeoutMs,
    perMessageDeflate: false,
    followRedirects: false,
    ...(o.allowPrivateNetwork ? {} : { lookup: guardedLookup() }),
  });
  return new Promise((resolve, reject) => {
    const fail = (err: Error) => {
      ws.terminate();
      reject(err);
    };
    ws.once('open', () => {
      // The peer may speak first (an endpoint sends initialize at once), and its frame can come with the
      // upgrade answer: held until the transport listens (start() resumes).
      ws.pause();
      ws.off('error', fail);
      resolve(ws);
    });
    ws.once('error', fail);
    ws.once('unexpected-response', (_req, res) => fail(new Error(`the server answered the WebSocket upgrade with HTTP ${res.statusCode}`)));
  });
}
