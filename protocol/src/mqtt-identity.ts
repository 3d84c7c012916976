import { createHmac } from 'node:crypto';
import { deviceIdToUnderscored, normalizeDeviceId } from './device-id.js';
import { safeEqual } from './hmac-token.js';

/** Where a device publishes, and where the gateway pushes to it. */
export const DEVICE_PUBLISH_TOPIC = 'device-server';
export const deviceInboxTopic = (deviceId: string): string => `devices/p2p/${deviceIdToUnderscored(deviceId)}`;

export interface MqttDeviceIdentity {
  group: string;
  deviceId: string;
  /** The third part (a UUID; some servers put the MAC there); absent in the legacy two-part form. */
  uuid?: string;
}

/** Parse `GID_<group>@@@<mac_>@@@<uuid>` (or the legacy `GID@@@<mac>`). */
export function parseMqttClientId(clientId: string): MqttDeviceIdentity | undefined {
  if (clientId.length > 256) return undefined;
  const parts = clientId.split('@@@');
  if (parts.length !== 2 && parts.length !== 3) return undefined;
  const [gid, mac, uuid] = parts as [string, string, string | undefined];
  const g = /^GID(?:_([A-Za-z0-9_.-]{1,64}))?$/.exec(gid);
  if (!g) return undefined;
  const deviceId = normalizeDeviceId(mac);
  if (!deviceId) return undefined;
  if (uuid !== undefined && !/^[A-Za-z0-9_:.-]{1,64}$/.test(uuid)) return undefined;
  const identity: MqttDeviceIdentity = { group: g[1] ?? '', deviceId };
  if (uuid !== undefined) identity.uuid = uuid;
  return identity;
}

export function formatMqttClientId(group: string, deviceId: string, uuid: string): string {
  return `GID_${group}@@@${deviceIdToUnderscored(deviceId)}@@@${uuid}`;
}

/** password = base64(HMAC-SHA256(key, clientId + "|" + username)), as the xiaozhi MQTT gateway checks. */
export function mqttPassword(key: string, clientId: string, username: string): string {
  return createHmac('sha256', key).update(`${clientId}|${username}`).digest('base64');
}

export function verifyMqttPassword(key: string, clientId: string, username: string, password: string): boolean {
  return safeEqual(mqttPassword(key, clientId, username), password);
}

/** The username the OTA endpoint hands out: base64 of a small JSON object (the reference puts `ip` there). */
export function mqttUsername(info: Record<string, string>): string {
  return Buffer.from(JSON.stringify(info)).toString('base64');
}
