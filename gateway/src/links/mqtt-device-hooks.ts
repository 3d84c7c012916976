import { DEVICE_PUBLISH_TOPIC, deviceInboxTopic, parseMqttClientId } from '@voxgate/protocol';
import type { DeviceSession } from '../devices/session.js';
import type { ThrottledLog } from '../throttle/throttled-log.js';
import { checkMqttDeviceAuth } from './device-auth.js';
import { handlerFailed } from './frame-guard.js';
import type { MqttDeviceConnection, MqttDeviceHooks } from './mqtt-device-connection.js';
import { PacketTooLargeError } from './mqtt-packet-guard.js';
import { boundKeepalive } from './mqtt-keepalive.js';
import type { MqttLinkOptions } from './mqtt.js';

/** CONNACK "not authorized" (MQTT 3.1.1). */
export const NOT_AUTHORIZED = 5;

type DeviceConn = MqttDeviceConnection<DeviceSession>;

/**
 * What the MQTT link decides for device connections (MqttDeviceConnection does the protocol): who is admitted (the
 * device auth policy, the refused-device list), the session each feeds, and the counter and log line for each refusal.
 * A second CONNECT for the same device takes over [MQTT-3.1.4-2] through the registry, as on WebSocket: it closes the
 * older connection (CLOSE_REPLACED), and the auth policy has already refused one that proved other credentials.
 */
export function mqttDeviceHooks(
  o: MqttLinkOptions,
  refusals: ThrottledLog,
  handOff: MqttDeviceHooks<DeviceSession>['handOff'],
  /** Every socket the link reads, until it closes (the link closes them when it stops). */
  live: Set<DeviceConn>,
): MqttDeviceHooks<DeviceSession> {
  return {
    isDevice: (p) => parseMqttClientId(p.clientId) !== undefined,
    admit(conn, p) {
      const id = parseMqttClientId(p.clientId)!;
      const v = checkMqttDeviceAuth(o.auth, p.clientId, p.username, p.password?.toString('utf8'));
      const refused = o.auth.enrollment?.refused;
      if (!v.ok) {
        o.metrics.authRefused.inc({ transport: 'mqtt', reason: v.reason });
        const r = { deviceId: id.deviceId, clientId: p.clientId, transport: 'mqtt' as const, reason: v.reason, remoteAddress: conn.remoteAddress };
        // Listed for the operator (GET /v1/enrollments/refused); logged once per device per minute, and within REFUSAL_LINES.
        const due = refused ? refused.record(r) : {};
        if (due) refusals.write({ clientId: p.clientId, reason: v.reason, remote: conn.remoteAddress, ...due }, 'MQTT device refused', 'device');
        return { refused: NOT_AUTHORIZED };
      }
      refused?.forget(id.deviceId);
      // Presence is the gateway's job (it follows the socket): a will is ignored, and nothing is kept between
      // connections (a clean=false device is served a clean session, CONNACK sessionPresent 0).
      return {
        deviceId: id.deviceId,
        clientUuid: id.uuid ?? p.clientId,
        credential: v.credential,
        inbox: deviceInboxTopic(id.deviceId),
        keepaliveSeconds: boundKeepalive(p.keepalive, o.keepalive),
      };
    },
    ready(conn, a) {
      conn.owner = o.registry.connect({ deviceId: a.deviceId, clientId: a.clientUuid, link: conn, expectHello: false, credential: a.credential });
    },
    // A throw out of the session reaches the connection's guard (handlerFailed below), which closes it.
    message: (conn, text) => conn.owner?.onText(text),
    handlerFailed(conn, err) {
      // The guard's options are made only when a handler threw: nothing kept per device for the rare case.
      const who = { deviceId: conn.owner?.deviceId, clientId: conn.clientId };
      handlerFailed(err, { transport: 'mqtt', log: o.log, who: () => who, metrics: o.metrics, close: () => conn.close() });
    },
    ping(conn) {
      if (conn.owner) conn.owner.lastSeenAt = Date.now(); // traffic: last seen moves (devices/records.ts writes it, throttled)
    },
    control: (conn) => conn.owner?.onControl(),
    refused: (_conn, reason, detail) => refusePublish(o, refusals, reason, detail),
    subscribeDenied(conn, topic) {
      o.metrics.authRefused.inc({ transport: 'mqtt', reason: 'subscribe_denied' });
      refusals.write({ clientId: conn.clientId, topic }, 'MQTT subscription denied', 'subscribe_denied');
    },
    protocolRefused(conn, level, clientId) {
      o.metrics.framesRejected.inc({ reason: 'mqtt_protocol_level' });
      const fields = { remote: conn.remoteAddress, clientId: clientId?.slice(0, 128), protocolLevel: level };
      refusals.write(fields, 'MQTT CONNECT refused: unacceptable protocol level', 'protocol_level');
    },
    malformed(conn, err) {
      const reason = err instanceof PacketTooLargeError ? 'too_large' : 'mqtt_protocol';
      o.metrics.framesRejected.inc({ reason });
      refusals.write({ remote: conn.remoteAddress, clientId: conn.clientId || undefined, reason, err: err.message }, 'MQTT connection dropped', reason);
    },
    // A device message over the limit is refused alone: the request it answers fails with a clear error.
    oversized(conn, info) {
      o.metrics.framesRejected.inc({ reason: 'too_large' });
      const session = conn.owner;
      if (session && info.topic === DEVICE_PUBLISH_TOPIC) return session.onOversizedMessage(info.bytes, info.limit, info.payloadHead);
      refusals.write({ remote: conn.remoteAddress, bytes: info.bytes, limit: info.limit }, 'oversized MQTT publish skipped', 'oversized');
    },
    // A device that lost its network looks the same: counted apart from the closes it asked for, its calls told why.
    keepaliveExpired(conn) {
      o.metrics.connectionsRefused.inc({ listener: 'mqtt', reason: 'keepalive' });
      refusals.write({ remote: conn.remoteAddress, clientId: conn.clientId }, 'MQTT device silent past 1.5x its keepalive; disconnected', 'keepalive');
      conn.owner?.onClosed('mqtt keepalive expired');
    },
    noConnect(conn) {
      o.metrics.connectionsRefused.inc({ listener: 'mqtt', reason: 'no_connect' });
      o.log.debug({ remote: conn.remoteAddress }, 'MQTT socket sent no CONNECT in time; closed');
    },
    closed(conn) {
      live.delete(conn);
      conn.owner?.onClosed('mqtt disconnected');
    },
    handOff,
  };
}

/** A device publish the link does not take: counted, logged within REFUSAL_LINES; the connection is closed after. */
function refusePublish(o: MqttLinkOptions, refusals: ThrottledLog, reason: 'publish_denied' | 'qos2', detail: Record<string, unknown>): void {
  if (reason === 'qos2') {
    // Devices publish at QoS 0/1; a QoS 2 packet would be state kept until a PUBREL that may never come.
    o.metrics.framesRejected.inc({ reason: 'mqtt_qos2' });
    refusals.write(detail, 'MQTT QoS 2 publish refused; disconnecting', 'qos2');
  } else {
    o.metrics.authRefused.inc({ transport: 'mqtt', reason: 'publish_denied' });
    refusals.write(detail, 'MQTT publish denied; disconnecting', 'publish_denied');
  }
}
