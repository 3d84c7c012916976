import { createServer, type Server, type Socket } from 'node:net';
import { createServer as createTlsServer } from 'node:tls';
import { DEVICE_PUBLISH_TOPIC, deviceInboxTopic, parseMqttClientId, safeEqual } from '@voxgate/protocol';
import { Aedes, type AuthenticateError, type Client, type PublishPacket } from 'aedes';
import type { Logger } from 'pino';
import type { DeviceLink } from '../devices/link.js';
import type { DeviceRegistry } from '../devices/registry.js';
import type { DeviceSession } from '../devices/session.js';
import type { Metrics } from '../metrics.js';
import type { TlsCertificates } from '../tls/certificates.js';
import { closeFailedHandshakes } from '../tls/listener.js';
import { checkMqttDeviceAuth, type DeviceAuthPolicy } from './device-auth.js';
import { limitConnections } from './connection-limits.js';
import { MqttPacketGuard, PacketTooLargeError } from './mqtt-packet-guard.js';
import { handlerFailed } from './frame-guard.js';
import { GuardedMqttConnection } from './mqtt-connection.js';
import { leanParserBuffer } from './mqtt-parser-buffer.js';
import { REFUSAL_LINES, ThrottledLog } from '../throttle/throttled-log.js';
import { UnreadBound } from './unread-bound.js';
import { EVENTS_TOPIC_FILTER, EVENTS_TOPIC_PREFIX } from '../events/mqtt-fanout.js';

export interface MqttLinkOptions {
  host: string;
  port: number;
  maxPacketBytes: number;
  maxConnections: number;
  maxConnectionsPerAddress: number;
  /** Bytes a client (device or backend) may leave unread before its connection is closed (links/unread-bound.ts). */
  maxUnreadBytes: number;
  /** A socket that sends no CONNECT within this is closed. */
  connectTimeoutMs: number;
  keepalive: KeepaliveBounds;
  auth: DeviceAuthPolicy;
  apiKeys: () => readonly string[];
  registry: DeviceRegistry;
  log: Logger;
  metrics: Metrics;
  /** A second listener, MQTT over TLS, sharing the connection caps and everything per socket. */
  tls?: { port: number; certificates: TlsCertificates } | undefined;
}

type Peer = { kind: 'device'; deviceId: string; inbox: string; credential: string; session?: DeviceSession | undefined } | { kind: 'backend' };

/** What the link knows of one accepted socket (keyed by the stream aedes reads, `client.conn`). */
interface Conn {
  socket: Socket;
  conn: GuardedMqttConnection;
  remote: string;
  connectDeadline: NodeJS.Timeout | undefined;
  /** The device session on this socket, once it is ready (an oversized reply is refused to it). */
  session?: DeviceSession;
}

export interface KeepaliveBounds {
  minSeconds: number;
  maxSeconds: number;
}

/**
 * The keepalive the broker holds a client to (it closes a client silent for 1.5x this). 0 asks for no
 * keepalive at all, which would keep a half-open socket, and its device "online", forever: it gets the
 * maximum, as does anything above it. Below the minimum, a ping a moment late on a busy gateway would
 * drop the device, so the timer gets the minimum.
 */
export function boundKeepalive(seconds: number | undefined, b: KeepaliveBounds): number {
  if (!seconds) return b.maxSeconds;
  return Math.min(b.maxSeconds, Math.max(b.minSeconds, seconds));
}

const NOT_AUTHORIZED = 5;
/** A QoS 0 publish's callback: nothing to wait for (one function for every publish, not a closure each). */
const ignore = (): void => {};

class MqttDeviceLink implements DeviceLink {
  readonly transport = 'mqtt' as const;
  constructor(
    private readonly client: Client,
    private readonly topic: string,
    readonly remoteAddress: string,
    private readonly socket: Socket,
    private readonly conn: GuardedMqttConnection,
  ) {}

  get localAddress(): string {
    return this.socket.localAddress ?? '';
  }

  /** Pushed straight to the client: the reference firmware subscribes to nothing. A device past the unread bound is cut. */
  send(text: string): boolean {
    if (this.client.closed || this.conn.stalled()) return false;
    const packet: PublishPacket = { cmd: 'publish', topic: this.topic, payload: Buffer.from(text), qos: 0, retain: false, dup: false };
    this.client.publish(packet, ignore);
    return true;
  }

  /**
   * What waits to reach the device: the broker's writes queued in the connection (GuardedMqttConnection holds them
   * while its socket is above its high-water mark) and the socket's own. Without it, a device that stopped reading
   * had the voice relay's JSON queued for it without bound (the relay drops past voice.maxBufferedBytes).
   */
  bufferedBytes(): number {
    return this.conn.unreadBytes;
  }

  close(): void {
    this.client.close();
  }
}

/**
 * The embedded broker. Devices (xiaozhi client ids) publish to `device-server` and receive on their own
 * `devices/p2p/<mac_>`; backends log in with an API key and may only subscribe to `voxgate/events/#`.
 */
// eslint-disable-next-line max-lines-per-function -- the broker's handlers (authenticate, authorizePublish, subscribe, client events) share the link's state
export async function startMqttLink(o: MqttLinkOptions) {
  const peers = new WeakMap<Client, Peer>();
  const conns = new WeakMap<object, Conn>();
  const refusals = new ThrottledLog(o.log, 'warn', REFUSAL_LINES);
  const unread = new UnreadBound(o.maxUnreadBytes, 'mqtt', o.metrics, o.log);
  const refuse = (reason: string): AuthenticateError => {
    o.metrics.authRefused.inc({ transport: 'mqtt', reason });
    return Object.assign(new Error(`not authorized: ${reason}`), { returnCode: NOT_AUTHORIZED }) as AuthenticateError;
  };

  const broker = await Aedes.createBroker({
    // No queue of messages in the broker: past `concurrency` deliveries in flight (each until the next tick at least)
    // aedes' emitter queued every message, and released the queue recursively, one stack frame group per message
    // that reached no subscriber (a device's publish): a burst of a few thousand behind 100 events to a backend
    // overflowed the stack, an uncaught exception that stops the gateway (red team 2026-11-28). Writes complete once
    // the socket holds them (GuardedMqttConnection), and what a client leaves unread is bounded there.
    concurrency: 0,
    // A backstop only: the link's own deadline (below) closes and counts a socket without CONNECT first.
    connectTimeout: o.connectTimeoutMs * 2,
    preConnect(client, packet, done) {
      const c = conns.get(client.conn);
      if (c) {
        clearTimeout(c.connectDeadline);
        c.connectDeadline = undefined;
      }
      // No persistent sessions: a device keeps nothing at the broker between connections (its tools are
      // listed again after every CONNECT), so a clean=false client is served a clean session
      // (CONNACK sessionPresent 0) and nothing it leaves behind outlives its socket.
      packet.clean = true;
      // Presence is the gateway's job (it follows the socket), not a will's; a will would be state
      // kept per client for the whole connection.
      delete packet.will;
      packet.keepalive = boundKeepalive(packet.keepalive, o.keepalive);
      done(null, true);
    },
    authenticate(client, username, password, done) {
      const pw = password?.toString('utf8');
      const id = parseMqttClientId(client.id);
      if (id) {
        const v = checkMqttDeviceAuth(o.auth, client.id, username, pw);
        const refused = o.auth.enrollment?.refused;
        if (!v.ok) {
          const remoteAddress = conns.get(client.conn)?.remote ?? '';
          const r = { deviceId: id.deviceId, clientId: client.id, transport: 'mqtt' as const, reason: v.reason, remoteAddress };
          // Listed for the operator (GET /v1/enrollments/refused); logged once per device per minute, and within REFUSAL_LINES.
          const due = refused ? refused.record(r) : {};
          if (due) refusals.write({ clientId: client.id, reason: v.reason, remote: remoteAddress, ...due }, 'MQTT device refused', 'device');
          return done(refuse(v.reason), false);
        }
        refused?.forget(id.deviceId);
        peers.set(client, { kind: 'device', deviceId: id.deviceId, inbox: deviceInboxTopic(id.deviceId), credential: v.credential });
        return done(null, true);
      }
      if (pw !== undefined && o.apiKeys().some((k) => safeEqual(k, pw))) {
        peers.set(client, { kind: 'backend' });
        return done(null, true);
      }
      const fields = { clientId: client.id, remote: conns.get(client.conn)?.remote };
      refusals.write(fields, 'MQTT client refused: neither a device client id nor a valid API key', 'unknown_client');
      return done(refuse('unknown_client'), false);
    },
    authorizePublish(client, packet, cb) {
      if (!client) return cb(null);
      if (packet.qos === 2) {
        // Devices publish at QoS 0/1. The broker keeps a QoS 2 packet until its PUBREL, which a client
        // may never send: refused before anything is stored, like any publish it may not make.
        o.metrics.framesRejected.inc({ reason: 'mqtt_qos2' });
        refusals.write({ clientId: client.id }, 'MQTT QoS 2 publish refused; disconnecting', 'qos2');
        return cb(new Error('QoS 2 publishes are not accepted'));
      }
      // Nothing is kept for later subscribers.
      packet.retain = false;
      const peer = peers.get(client);
      if (peer?.kind === 'device' && packet.topic === DEVICE_PUBLISH_TOPIC) return cb(null);
      o.metrics.authRefused.inc({ transport: 'mqtt', reason: 'publish_denied' });
      refusals.write({ clientId: client.id, topic: packet.topic }, 'MQTT publish denied; disconnecting', 'publish_denied');
      cb(new Error(`publishing to ${packet.topic} is not allowed`));
    },
    authorizeSubscribe(client, sub, cb) {
      const peer = peers.get(client);
      const allowed =
        peer?.kind === 'device'
          ? sub.topic === peer.inbox
          : peer?.kind === 'backend' && (sub.topic === EVENTS_TOPIC_FILTER || sub.topic.startsWith(EVENTS_TOPIC_PREFIX));
      if (allowed) return cb(null, sub);
      o.metrics.authRefused.inc({ transport: 'mqtt', reason: 'subscribe_denied' });
      refusals.write({ clientId: client.id, topic: sub.topic }, 'MQTT subscription denied', 'subscribe_denied');
      cb(null, null);
    },
  });

  // Presence follows the socket, not aedes' reports: aedes finishes a CONNECT asynchronously and can
  // report a client ready after its socket closed (its clientDisconnect already came, before it).
  broker.on('clientReady', (client) => {
    const peer = peers.get(client);
    if (peer?.kind !== 'device') return;
    const c = conns.get(client.conn);
    if (!c || client.closed || c.socket.destroyed) return;
    const id = parseMqttClientId(client.id)!;
    const link = new MqttDeviceLink(client, peer.inbox, c.remote, c.socket, c.conn);
    const session = o.registry.connect({ deviceId: peer.deviceId, clientId: id.uuid ?? client.id, link, expectHello: false, credential: peer.credential });
    peer.session = session;
    // Its socket's close ends it (onSocket's listener).
    c.session = session;
  });
  broker.on('publish', (packet, client) => {
    if (!client) return;
    const peer = peers.get(client);
    if (peer?.kind !== 'device' || !peer.session) return;
    const payload = packet.payload;
    const text = typeof payload === 'string' ? payload : payload.toString('utf8');
    try {
      peer.session.onText(text);
    } catch (err) {
      // The guard's options are made only when a handler threw: nothing kept per device for the rare case.
      handlerFailed(err, { transport: 'mqtt', log: o.log, who: () => ({ deviceId: peer.deviceId }), metrics: o.metrics, close: () => client.close() });
    }
  });
  // A PINGREQ is traffic: last seen moves with it (devices/records.ts writes it, throttled).
  broker.on('ping', (_packet, client) => {
    const peer = peers.get(client);
    if (peer?.kind === 'device' && peer.session) peer.session.lastSeenAt = Date.now();
  });
  broker.on('clientError', (client, err) => o.log.debug({ clientId: client.id, err: err.message }, 'MQTT client error'));
  // Backends with a subscription (only event topics are allowed them). Sessions are clean and events go
  // out at QoS 0, unretained: with none of them, a published event reaches no one, so it is not published.
  const eventReaders = new Set<Client>();
  broker.on('subscribe', (_subs, client) => {
    if (peers.get(client)?.kind === 'backend' && !client.closed) eventReaders.add(client);
  });
  broker.on('clientDisconnect', (client) => eventReaders.delete(client));

  // Everything per socket, for the plain and the TLS listener alike (a TLS socket arrives here after its handshake).
  const onSocket = (socket: Socket) => {
    if (socket.destroyed) return; // refused by a connection limit
    // aedes writes a packet in several small chunks; behind the guard's Duplex they are not corked
    // together, so with Nagle on, every reply to a device waited ~40 ms for a delayed ACK.
    socket.setNoDelay(true);
    socket.on('error', () => socket.destroy());
    // A device message over the limit is refused alone: the request it answers fails with a clear error.
    const guard = new MqttPacketGuard(o.maxPacketBytes, (info) => {
      o.metrics.framesRejected.inc({ reason: 'too_large' });
      const session = c.session;
      if (session && info.topic === DEVICE_PUBLISH_TOPIC) return session.onOversizedMessage(info.bytes, info.limit, info.payloadHead);
      refusals.write({ remote: socket.remoteAddress, bytes: info.bytes, limit: info.limit }, 'oversized MQTT publish skipped', 'oversized');
    });
    // Any other verdict ends the connection (GuardedMqttConnection destroys it, and its socket, after this).
    const conn = new GuardedMqttConnection(
      socket,
      guard,
      (err) => {
        const reason = err instanceof PacketTooLargeError ? 'too_large' : 'mqtt_protocol';
        o.metrics.framesRejected.inc({ reason });
        refusals.write({ remote: socket.remoteAddress, reason, err: err.message }, 'MQTT connection dropped', reason);
      },
      unread,
    );
    const c: Conn = {
      socket,
      conn,
      remote: socket.remoteAddress ?? '',
      // An idle socket holds a descriptor: one that never sends CONNECT is closed soon.
      connectDeadline: setTimeout(() => {
        o.metrics.connectionsRefused.inc({ listener: 'mqtt', reason: 'no_connect' });
        o.log.debug({ remote: socket.remoteAddress }, 'MQTT socket sent no CONNECT in time; closed');
        socket.destroy();
      }, o.connectTimeoutMs),
    };
    // One listener for both jobs ('close' comes once; `once` would add a wrapper and its state per socket).
    socket.on('close', () => {
      clearTimeout(c.connectDeadline);
      c.session?.onClosed('mqtt disconnected');
    });
    conns.set(conn, c);
    leanParserBuffer(broker.handle(conn));
  };
  const server: Server = createServer(onSocket);
  // The handshake gets the CONNECT deadline too: a socket that never finishes it is closed as soon.
  const tls = o.tls;
  const tlsServer = tls && createTlsServer({ ...tls.certificates.options, handshakeTimeout: o.connectTimeoutMs }, onSocket);
  if (tls && tlsServer) {
    tls.certificates.serve(tlsServer);
    closeFailedHandshakes(tlsServer, 'mqtt', o.metrics, o.log);
  }
  const servers = tlsServer ? [server, tlsServer] : [server];
  limitConnections(servers, 'mqtt', { maxConnections: o.maxConnections, maxConnectionsPerAddress: o.maxConnectionsPerAddress }, o.metrics, o.log);
  const listen = (srv: Server, port: number) =>
    new Promise<number>((resolve, reject) => {
      srv.once('error', reject);
      srv.listen(port, o.host, () => {
        srv.off('error', reject);
        const address = srv.address();
        resolve(typeof address === 'object' && address ? address.port : port);
      });
    });
  let port: number;
  let tlsPort: number | undefined;
  try {
    port = await listen(server, o.port);
    if (tls && tlsServer) tlsPort = await listen(tlsServer, tls.port);
  } catch (e) {
    // A port that cannot be bound leaves nothing running: the other listener and the broker (and its timers) are closed too.
    await Promise.all(servers.filter((srv) => srv.listening).map((srv) => new Promise<void>((resolve) => srv.close(() => resolve()))));
    await new Promise<void>((resolve) => broker.close(() => resolve()));
    throw e;
  }

  return {
    broker,
    port,
    /** The MQTT-over-TLS port bound, when that listener is on. */
    tlsPort,
    /** Whether a backend may read what `publish` sends (one has subscribed and is still connected). */
    hasEventReaders(): boolean {
      return eventReaders.size > 0;
    },
    /** Publish an event to backend subscribers. */
    publish(topic: string, payload: string): void {
      broker.publish({ cmd: 'publish', topic, payload: Buffer.from(payload), qos: 0, retain: false, dup: false }, ignore);
    },
    async close(): Promise<void> {
      const stopped = Promise.all(servers.map((srv) => new Promise<void>((resolve) => srv.close(() => resolve()))));
      await new Promise<void>((resolve) => broker.close(() => resolve()));
      await stopped;
    },
  };
}

export type MqttLink = Awaited<ReturnType<typeof startMqttLink>>;
