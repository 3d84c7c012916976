import { createHmac } from 'node:crypto';
import { formatMqttClientId, mintDeviceToken, mqttPassword, parseMqttClientId, safeEqual, verifyDeviceToken, verifyMqttPassword } from '@voxgate/protocol';
import type { Binding } from './records.js';

/** What an OTA request may present to prove it is the enrolled device. */
export interface OtaProof {
  /** `Authorization: Bearer <token>`: the device's WebSocket token. */
  bearer?: string | undefined;
  /** `Authorization: Basic <username:password>`: the device's MQTT credentials. */
  basic?: { username: string; password: string } | undefined;
}

/**
 * An enrolled device's credentials, derived from the device secret and the binding's `credId`: the same
 * binding always yields the same token and MQTT password (nothing secret is stored), and a new binding
 * (re-enrollment) makes every earlier one fail. The wire formats stay the xiaozhi ones.
 */
export class EnrollmentCredentials {
  constructor(
    private readonly secret: string,
    private readonly mqttGroup: string,
  ) {}

  private key(b: Binding): string {
    return createHmac('sha256', this.secret).update(`voxgate-enrollment|${b.credId}`).digest('base64url');
  }

  token(b: Binding): string {
    return mintDeviceToken(this.key(b), b.clientId, b.deviceId, b.issuedAt);
  }

  mqttClientId(b: Binding): string {
    return formatMqttClientId(this.mqttGroup, b.deviceId, mqttUuid(b.clientId));
  }

  mqttPassword(b: Binding, username: string): string {
    return mqttPassword(this.key(b), this.mqttClientId(b), username);
  }

  /** A WebSocket token (with its client id) that belongs to this binding; no age limit: see docs/security.md. */
  checkToken(b: Binding, token: string, clientId: string): boolean {
    if (clientId !== b.clientId) return false;
    return verifyDeviceToken(this.key(b), token, clientId, b.deviceId, { nowSeconds: Date.now() / 1000, maxAgeSeconds: Number.POSITIVE_INFINITY }).ok;
  }

  /** MQTT CONNECT credentials that belong to this binding. */
  checkMqtt(b: Binding, mqttClientId: string, username: string, password: string): boolean {
    const id = parseMqttClientId(mqttClientId);
    if (!id || id.deviceId !== b.deviceId || id.uuid === undefined || !safeEqual(id.uuid, mqttUuid(b.clientId))) return false;
    return verifyMqttPassword(this.key(b), mqttClientId, username, password);
  }

  proves(b: Binding, proof: OtaProof): boolean {
    if (proof.bearer !== undefined && this.checkToken(b, proof.bearer, b.clientId)) return true;
    if (proof.basic !== undefined) return this.checkMqtt(b, this.mqttClientId(b), proof.basic.username, proof.basic.password);
    return false;
  }
}

/** The MQTT client id's third part: the client id with `:` (not allowed there by some parsers) as `_`. */
export const mqttUuid = (clientId: string): string => clientId.replace(/:/g, '_');
