import { createServer, type Server, type Socket } from 'node:net';
import { createServer as createTlsServer } from 'node:tls';
import { safeEqual } from '@voxgate/protocol';
import { Aedes, type AuthenticateError, type Client } from 'aedes';
import type { Logger } from 'pino';
import type { DeviceRegistry } from '../devices/registry.js';
import type { DeviceSession } from '../devices/session.js';
import type { Metrics } from '../metrics.js';
import type { TlsCertificates } from '../tls/certificates.js';
import { closeFailedHandshakes } from '../tls/listener.js';
import type { DeviceAuthPolicy } from './device-auth.js';
import { limitConnections } from './connection-limits.js';
import { PacketTooLargeError, type MqttPacketGuard } from './mqtt-packet-guard.js';
import { GuardedMqttConnection } from './mqtt-connection.js';
import { MqttDeviceConnection, type MqttDeviceOptions } from './mqtt-device-connection.js';
import { mqttDeviceHooks, NOT_AUTHORIZED } from './mqtt-device-hooks.js';
import { boundKeepalive, type KeepaliveBounds } from './mqtt-keepalive.js';
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

/** A QoS 0 publish's callback: nothing to wait for (one function for every publish, not a closure each). */
const ignore = (): void => {};

/**
 * The MQTT listener. Devices (xiaozhi client ids) are served by the link itself (MqttDeviceConnection): they publish
 * to `device-server` and receive on their own `devices/p2p/<mac_>`. Every other client goes to the embedded broker
 * (aedes): backends log in with an API key and may only subscribe to `voxgate/events/#`, where the gateway publishes.
 */
// eslint-disable-next-line max-lines-per-function -- the broker's handlers (authenticate, authorize, client events) share the link's state
export async function startMqttLink(o: MqttLinkOptions) {
  /** The remote address of each socket the broker reads (keyed by `client.conn`), for its log lines. */
  const remotes = new WeakMap<object, string>();
  const refusals = new ThrottledLog(o.log, 'warn', REFUSAL_LINES);
  const unread = new UnreadBound(o.maxUnreadBytes, 'mqtt', o.metrics, o.log);
  const refuse = (reason: string): AuthenticateError => {
    o.metrics.authRefused.inc({ transport: 'mqtt', reason });
    return Object.assign(new Error(`not authorized: ${reason}`), { returnCode: NOT_AUTHORIZED }) as AuthenticateError;
  };

  const broker = await Aedes.createBroker({
    // No queue of messages in the broker: past `concurrency` deliveries in flight (each until the next tick at least)
    // aedes' emitter queued every message, and released the queue recursively, one stack frame group per message
    // that reached no subscriber: a burst of a few thousand behind 100 events to a backend overflowed the stack, an
    // uncaught exception that stops the gateway (red team 2026-11-28). Writes complete once the socket holds them
    // (GuardedMqttConnection), and what a client leaves unread is bounded there.
    concurrency: 0,
    // A backstop only: the link's own deadline (MqttDeviceConnection, which reads every CONNECT) came first.
    connectTimeout: o.connectTimeoutMs * 2,
    preConnect(_client, packet, done) {
      // No persistent sessions: a backend keeps nothing at the broker between connections, so a clean=false client
      // is served a clean session (CONNACK sessionPresent 0) and nothing it leaves behind outlives its socket.
      packet.clean = true;
      // A will would be state kept per client for the whole connection, for a message no one may receive.
      delete packet.will;
      packet.keepalive = boundKeepalive(packet.keepalive, o.keepalive);
      done(null, true);
    },
    authenticate(client, _username, password, done) {
      // Device client ids never get here (the link serves them); anything else must bring an API key.
      const pw = password?.toString('utf8');
      if (pw !== undefined && o.apiKeys().some((k) => safeEqual(k, pw))) return done(null, true);
      const fields = { clientId: client.id, remote: remotes.get(client.conn) };
      refusals.write(fields, 'MQTT client refused: neither a device client id nor a valid API key', 'unknown_client');
      return done(refuse('unknown_client'), false);
    },
    authorizePublish(client, packet, cb) {
      if (!client) return cb(null);
      if (packet.qos === 2) {
        // The broker keeps a QoS 2 packet until its PUBREL, which a client may never send: refused before
        // anything is stored, like any publish it may not make.
        o.metrics.framesRejected.inc({ reason: 'mqtt_qos2' });
        refusals.write({ clientId: client.id }, 'MQTT QoS 2 publish refused; disconnecting', 'qos2');
        return cb(new Error('QoS 2 publishes are not accepted'));
      }
      // Backends only read events: they publish nothing.
      o.metrics.authRefused.inc({ transport: 'mqtt', reason: 'publish_denied' });
      refusals.write({ clientId: client.id, topic: packet.topic }, 'MQTT publish denied; disconnecting', 'publish_denied');
      cb(new Error(`publishing to ${packet.topic} is not allowed`));
    },
    authorizeSubscribe(client, sub, cb) {
      if (sub.topic === EVENTS_TOPIC_FILTER || sub.topic.startsWith(EVENTS_TOPIC_PREFIX)) return cb(null, sub);
      o.metrics.authRefused.inc({ transport: 'mqtt', reason: 'subscribe_denied' });
      refusals.write({ clientId: client.id, topic: sub.topic }, 'MQTT subscription denied', 'subscribe_denied');
      cb(null, null);
    },
  });

  broker.on('clientError', (client, err) => o.log.debug({ clientId: client.id, err: err.message }, 'MQTT client error'));
  // Backends with a subscription. Sessions are clean and events go out at QoS 0, unretained: with none of them, a
  // published event reaches no one, so it is not published.
  const eventReaders = new Set<Client>();
  broker.on('subscribe', (_subs, client) => {
    if (!client.closed) eventReaders.add(client);
  });
  broker.on('clientDisconnect', (client) => eventReaders.delete(client));

  // A CONNECT that is not a device's: the broker reads the socket from here, the bytes read so far first.
  const handOff = (dev: MqttDeviceConnection<DeviceSession>, guard: MqttPacketGuard, replay: Buffer) => {
    const remote = dev.remoteAddress;
    const onRefused = (err: Error) => {
      const reason = err instanceof PacketTooLargeError ? 'too_large' : 'mqtt_protocol';
      o.metrics.framesRejected.inc({ reason });
      refusals.write({ remote, reason, err: err.message }, 'MQTT connection dropped', reason);
    };
    const conn = new GuardedMqttConnection(dev.socket, guard, onRefused, unread, replay);
    remotes.set(conn, remote);
    leanParserBuffer(broker.handle(conn));
  };
  const live = new Set<MqttDeviceConnection<DeviceSession>>();
  const devices: MqttDeviceOptions<DeviceSession> = {
    hooks: mqttDeviceHooks(o, refusals, handOff, live),
    maxPacketBytes: o.maxPacketBytes,
    connectTimeoutMs: o.connectTimeoutMs,
    unread,
  };

  // Everything per socket, for the plain and the TLS listener alike (a TLS socket arrives here after its handshake).
  const onSocket = (socket: Socket) => {
    if (socket.destroyed) return; // refused by a connection limit
    // Replies are small packets: with Nagle on, each waited ~40 ms for a delayed ACK.
    socket.setNoDelay(true);
    socket.on('error', () => socket.destroy());
    live.add(new MqttDeviceConnection(socket, socket.remoteAddress ?? '', devices));
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
      // The listeners' close waits for their sockets: the devices' (and any still reading its CONNECT) close here.
      for (const dev of [...live]) dev.close();
      await stopped;
    },
  };
}

export type MqttLink = Awaited<ReturnType<typeof startMqttLink>>;
