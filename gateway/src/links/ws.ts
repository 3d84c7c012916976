import type { IncomingMessage, Server } from 'node:http';
import type { Duplex } from 'node:stream';
import { normalizeDeviceId } from '@voxgate/protocol';
import type { Logger } from 'pino';
import { WebSocket, WebSocketServer, type RawData } from 'ws';
import { CLOSE_INTERNAL_ERROR, type DeviceLink } from '../devices/link.js';
import type { DeviceRegistry } from '../devices/registry.js';
import type { DeviceSession } from '../devices/session.js';
import type { Metrics } from '../metrics.js';
import { REFUSAL_LOG, REFUSAL_LOG_NOTE } from './connection-limits.js';
import { REFUSAL_LINES, ThrottledLog } from '../throttle/throttled-log.js';
import { bearerToken, checkWebSocketAuth, type DeviceAuthPolicy } from './device-auth.js';
import { guardFrame, handlerFailed } from './frame-guard.js';
import { RequestTarget, trimSlashes } from './request-target.js';
import { UnreadBound } from './unread-bound.js';
import { hasUnshowable } from '../schemas/showable.js';

export interface WsLinkOptions {
  path: string;
  maxPayloadBytes: number;
  /** Paths another upgrade listener serves: left alone here. */
  otherPath?: (pathname: string) => boolean;
  heartbeatMs: number;
  /** Device WebSockets at once; kept below the HTTP port's socket cap so the API always has room. */
  maxConnections: number;
  /** Bytes a device may leave unread before its connection is closed (links/unread-bound.ts). */
  maxUnreadBytes: number;
  auth: DeviceAuthPolicy;
  registry: DeviceRegistry;
  /** The address a device connected from (its socket's, or a trusted proxy's X-Forwarded-For: client-address.ts). */
  addressOf: (req: IncomingMessage) => string;
  log: Logger;
  metrics: Metrics;
}

/**
 * A device's WebSocket (the server makes these): ws reports its events through `emit`, and once the
 * connection has a session they go straight to its link, with no listener per connection (five listener
 * closures, their context, the frame guard's, and ws's own client-tracking closure and listener table
 * were ~1.1 KB per device in a heap snapshot; one object now). Other events go through EventEmitter.
 */
class DeviceSocket extends WebSocket {
  /** Heard from since the heartbeat's last round (any frame, or the pong to its ping). */
  alive = true;
  link: WsDeviceLink | undefined = undefined;
  /** Pings and pongs heard since the heartbeat's last round (see `keepalive`). */
  controls = 0;
  /** The endpoint's open sockets (ws's clientTracking, without a listener per socket): left at 'close'. */
  clients: Set<DeviceSocket> | undefined = undefined;

  override emit(event: string | symbol, a?: unknown, b?: unknown): boolean {
    const link = this.link;
    if (event === 'close') {
      this.clients?.delete(this);
      link?.session.onClosed(`websocket closed (${a as number})`);
      return super.emit(event, a, b);
    }
    if (link === undefined) return super.emit(event, a, b);
    switch (event) {
      case 'message':
        link.onMessage(a as RawData, b as boolean);
        return true;
      // Keepalives are traffic (last seen moves), and unsolicited frames: a flood of them spends the read budget.
      case 'pong':
        this.alive = true;
        this.keepalive(link);
        return true;
      case 'ping':
        // ws answered it with a pong already: one the device does not read counts as unread.
        this.keepalive(link);
        link.stalled();
        return true;
      case 'error':
        link.onError(a as Error & { code?: string });
        return true;
      default:
        return super.emit(event, a, b);
    }
  }

  /** The heartbeat's round: heard from again by the next one, or dropped. */
  heartbeat(): void {
    this.alive = false;
    this.controls = 0;
    this.ping();
  }

  /**
   * A ping or pong. The first few of a heartbeat round only move last seen: a device's keepalives (esp_websocket_client
   * pings every 10 s) and the answer to ours make no read budget for it. Past them each spends from it.
   */
  private keepalive(link: WsDeviceLink): void {
    if (++this.controls > FREE_CONTROL_FRAMES) link.session.onControl();
    else link.session.lastSeenAt = Date.now();
  }
}

/** Pings and pongs a device may send per heartbeat round before they spend from its read budget. */
const FREE_CONTROL_FRAMES = 16;

/** The options of every audio frame's send (ws copies them into its own: one shared object, none per frame). */
const BINARY = { binary: true } as const;

/** What every link of one endpoint shares: its options, its refusal lines and its unread bound. */
interface WsLinkContext extends WsLinkOptions {
  refusals: ThrottledLog;
  unread: UnreadBound;
}

/** One device connection: the session's link, and the handler of its socket's events. */
class WsDeviceLink implements DeviceLink {
  /** Set right after the registry made it (the socket reports nothing to the link before). */
  session!: DeviceSession;
  /** Terminated for what the device left unread: frames ws still hands over are not handled. */
  private cut = false;

  constructor(
    private readonly ws: DeviceSocket,
    readonly remoteAddress: string,
    private readonly o: WsLinkContext,
  ) {}

  get transport(): 'websocket' {
    return 'websocket';
  }

  send(text: string): boolean {
    if (this.ws.readyState !== WebSocket.OPEN || this.stalled()) return false;
    this.ws.send(text);
    return true;
  }

  sendBinary(data: Buffer): boolean {
    if (this.ws.readyState !== WebSocket.OPEN || this.stalled()) return false;
    this.ws.send(data, BINARY);
    return true;
  }

  /** A device past the unread bound is cut (terminated: a close frame would queue behind what it does not read). */
  stalled(): boolean {
    if (this.cut) return true;
    const unread = this.ws.bufferedAmount;
    // The usual case first, with nothing made per frame.
    if (unread <= this.o.unread.maxBytes) return false;
    this.o.unread.exceeded(unread, { deviceId: this.session.deviceId, remote: this.remoteAddress });
    this.cut = true;
    this.ws.terminate();
    return true;
  }

  bufferedBytes(): number {
    return this.ws.bufferedAmount;
  }

  // ws stops reading the socket; frames of the read already under way still come (the session holds them).
  pauseReading(): void {
    this.ws.pause();
  }

  resumeReading(): void {
    this.ws.resume();
  }

  close(code: number, reason: string): void {
    if (this.ws.readyState === WebSocket.CLOSED) return;
    this.ws.close(code, reason);
    // Do not wait the default 30 s for a close frame from a device that may be gone.
    setTimeout(() => this.ws.terminate(), 1000).unref();
  }

  onMessage(data: RawData, isBinary: boolean): void {
    this.ws.alive = true;
    // A device that sends while it reads nothing of the answers is cut before it makes more.
    if (this.stalled()) return;
    if (isBinary) {
      this.o.metrics.hot.framesIn.websocket.audio.inc();
      // Voice audio goes to the voice relay's session; without one the session counts and drops it.
      return this.session.onBinary(toBuffer(data));
    }
    const text = data.toString();
    try {
      this.session.onText(text);
    } catch (err) {
      // The frame guard's safety net (links/frame-guard.ts), its options made only when it is needed.
      const { deviceId } = this.session;
      const { log, metrics } = this.o;
      handlerFailed(err, { transport: 'websocket', log, metrics, who: () => ({ deviceId }), close: () => this.close(CLOSE_INTERNAL_ERROR, 'internal error') });
    }
  }

  onError(err: Error & { code?: string }): void {
    const reason = err.code === 'WS_ERR_UNSUPPORTED_MESSAGE_LENGTH' ? 'too_large' : 'ws_protocol';
    this.o.metrics.framesRejected.inc({ reason });
    this.o.refusals.write({ deviceId: this.session.deviceId, reason, err: err.message }, 'device WebSocket error; dropping the connection', reason);
  }
}

/** A device that answered no ping for a heartbeat round (or lost its network: it looks the same): counted, its calls told why. */
function dropSilent(ws: DeviceSocket, ctx: WsLinkContext): void {
  ctx.metrics.connectionsRefused.inc({ listener: 'http', reason: 'keepalive' });
  const session = ws.link?.session;
  ctx.refusals.write({ deviceId: session?.deviceId }, 'WebSocket device answered no ping for a heartbeat round; disconnected', 'keepalive');
  session?.onClosed('websocket heartbeat unanswered');
  ws.terminate();
}

/** Device WebSocket endpoint on the HTTP server: auth at the upgrade, frames to sessions, heartbeat. */
export function attachWebSocketLink(server: Server, o: WsLinkOptions) {
  // The endpoint keeps its own set of sockets (see DeviceSocket): ws's clientTracking adds a closure per socket.
  const wss = deviceServer(o.maxPayloadBytes);
  const clients = new Set<DeviceSocket>();
  const base = trimSlashes(o.path);
  const fullLog = new ThrottledLog(o.log, 'warn', REFUSAL_LOG);
  const ctx = linkContext(o);

  // Nothing a caller sends may throw out of the `upgrade` event (the safety net would stop the gateway): a throw
  // ends this connection only, counted and logged, as in the MCP endpoint's listener.
  const onUpgrade = (req: IncomingMessage, socket: Duplex, head: Buffer) =>
    guardFrame(() => upgrade(req, socket, head), {
      transport: 'websocket',
      log: o.log,
      metrics: o.metrics,
      who: () => ({ remote: req.socket.remoteAddress }),
      close: () => socket.destroy(),
    });

  const upgrade = (req: IncomingMessage, socket: Duplex, head: Buffer) => {
    const target = new RequestTarget(req.url);
    if (o.otherPath?.(target.path)) return; // another upgrade listener's (the MCP endpoint)
    if (trimSlashes(target.path) !== base) return refuse(socket, 404, 'Not Found');
    // handleUpgrade (no verifyClient) calls back synchronously, which adds the socket to `clients`: no burst overshoots.
    if (clients.size >= o.maxConnections) {
      o.metrics.connectionsRefused.inc({ listener: 'http', reason: 'device_cap' });
      fullLog.write(
        { remote: req.socket.remoteAddress, maxConnections: o.maxConnections },
        `device WebSocket refused: ws.maxConnections reached${REFUSAL_LOG_NOTE}`,
      );
      return refuse(socket, 503, 'Service Unavailable', 'the gateway holds as many devices as it may; try again later');
    }
    const h = (name: string) => headerValue(req, name) ?? target.query(name) ?? target.query(name.replace('-', '_')) ?? undefined;
    const who = identify(h);
    if ('refused' in who) {
      o.metrics.authRefused.inc({ transport: 'websocket', reason: who.refused });
      return refuse(socket, 400, 'Bad Request', who.message);
    }
    const { deviceId, clientId } = who;
    const verdict = checkWebSocketAuth(o.auth, bearerToken(h('authorization') ?? target.query('token') ?? undefined), clientId, deviceId);
    if (!verdict.ok) {
      o.metrics.authRefused.inc({ transport: 'websocket', reason: verdict.reason });
      const remoteAddress = o.addressOf(req);
      // Listed for the operator (GET /v1/enrollments/refused); logged once per device per minute, and within REFUSAL_LINES.
      const refused = o.auth.enrollment?.refused;
      const due = refused ? refused.record({ deviceId, clientId, transport: 'websocket', reason: verdict.reason, remoteAddress }) : {};
      if (due) ctx.refusals.write({ deviceId, clientId, reason: verdict.reason, remote: remoteAddress, ...due }, 'device WebSocket refused', 'device');
      return refuse(socket, 401, 'Unauthorized');
    }
    o.auth.enrollment?.refused?.forget(deviceId);
    wss.handleUpgrade(req, socket, head, (ws) => onConnection(ws, req, deviceId, clientId, verdict.credential));
  };

  const onConnection = (ws: DeviceSocket, req: IncomingMessage, deviceId: string, clientId: string, credential: string) => {
    ws.clients = clients;
    clients.add(ws);
    const link = new WsDeviceLink(ws, o.addressOf(req), ctx);
    const session = o.registry.connect({ deviceId, clientId, link, expectHello: true, credential });
    if (!session) return; // a live connection with other credentials holds this device; link closed
    link.session = session;
    ws.link = link;
  };

  // One timer for every socket: a device that missed a whole round of pings is dropped.
  const heartbeat = setInterval(() => {
    for (const ws of clients) {
      if (!ws.alive) {
        dropSilent(ws, ctx);
        continue;
      }
      ws.heartbeat();
    }
  }, o.heartbeatMs);
  heartbeat.unref();

  server.on('upgrade', onUpgrade);
  return {
    wss,
    /** The device sockets open now. */
    clients: clients as ReadonlySet<WebSocket>,
    /** Stop accepting; close every device with a close frame. */
    close(code: number, reason: string): void {
      clearInterval(heartbeat);
      server.off('upgrade', onUpgrade);
      for (const ws of clients) {
        ws.close(code, reason);
        setTimeout(() => ws.terminate(), 1000).unref();
      }
      wss.close();
    },
  };
}

/**
 * The pieces a device message may come in. Each costs a parse, but the read budget counts messages: ws's default (16 384)
 * let a message of one-byte pieces cost ~55 ms of CPU for 4 tokens. esp_websocket_client cuts a message into pieces of
 * its buffer (1 KiB by default; the xiaozhi firmware sends each message whole), so a largest message still fits.
 */
export function maxFragments(maxPayloadBytes: number): number {
  return Math.ceil(maxPayloadBytes / 1024) + 1;
}

/** The endpoint's ws server: messages bounded in size and in pieces, the sockets tracked by the endpoint (see DeviceSocket). */
function deviceServer(maxPayloadBytes: number) {
  const maxPieces = maxFragments(maxPayloadBytes);
  return new WebSocketServer({
    noServer: true,
    maxPayload: maxPayloadBytes,
    maxFragments: maxPieces,
    perMessageDeflate: false,
    WebSocket: DeviceSocket,
    clientTracking: false,
  });
}

/** What every link of one endpoint shares, made once. */
function linkContext(o: WsLinkOptions): WsLinkContext {
  return { ...o, refusals: new ThrottledLog(o.log, 'warn', REFUSAL_LINES), unread: new UnreadBound(o.maxUnreadBytes, 'http', o.metrics, o.log) };
}

function headerValue(req: IncomingMessage, name: string): string | undefined {
  const v = req.headers[name];
  return Array.isArray(v) ? v[0] : v;
}

export function refuse(socket: Duplex, status: number, text: string, detail = ''): void {
  const body = detail || text;
  socket.once('finish', () => socket.destroy());
  socket.end(`HTTP/1.1 ${status} ${text}\r\nConnection: close\r\nContent-Type: text/plain\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`);
}

function toBuffer(d: RawData): Buffer {
  if (Buffer.isBuffer(d)) return d;
  return Array.isArray(d) ? Buffer.concat(d) : Buffer.from(d);
}

/**
 * The device's ids from its headers (or the query string): a MAC address, and a client id of at most 64 characters (the
 * device id when absent). The API and the console show the client id: a query string's percent-escapes could carry a
 * terminal's controls or reorder what is read (red team 11); the firmware's is a UUID.
 */
function identify(
  h: (name: string) => string | undefined,
): { deviceId: string; clientId: string } | { refused: 'bad_device_id' | 'bad_client_id'; message: string } {
  const deviceId = normalizeDeviceId(h('device-id') ?? '');
  if (!deviceId) return { refused: 'bad_device_id', message: 'Device-Id header must be a MAC address' };
  const clientId = (h('client-id') ?? deviceId).slice(0, 64);
  if (hasUnshowable(clientId)) return { refused: 'bad_client_id', message: 'Client-Id must not hold control or bidirectional-formatting characters' };
  return { deviceId, clientId };
}
