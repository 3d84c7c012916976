import { z } from 'zod';
import { DeviceIdSchema } from './device-id.js';

/** Headers a device sends to the OTA endpoint (the body is free-form system info and is not trusted). */
export const OtaRequestHeadersSchema = z.object({
  'device-id': DeviceIdSchema,
  'client-id': z
    .string()
    .min(1)
    .max(64)
    .regex(/^[A-Za-z0-9_:.-]+$/, 'letters, digits and _ : . - only'),
  'user-agent': z.string().max(256).optional(),
});

/** The part of the system info we read: the firmware version, to decide whether to offer an upgrade. */
export const OtaSystemInfoSchema = z
  .object({
    application: z
      .object({ name: z.string().max(128).optional(), version: z.string().max(64).optional() })
      .loose()
      .optional(),
    board: z
      .object({ type: z.string().max(128).optional() })
      .loose()
      .optional(),
  })
  .loose();

/**
 * The device copies every member of `websocket` / `mqtt` into its settings, so a member left out keeps the
 * value it stored: an answer without credentials (an enrolled device that did not prove itself) leaves
 * the device's own credentials in place.
 */
export interface OtaWebsocketSection {
  url: string;
  token?: string;
}

export interface OtaMqttSection {
  endpoint: string;
  client_id?: string;
  username?: string;
  password?: string;
  publish_topic: string;
  subscribe_topic: string;
}

/**
 * The offered firmware. An empty `url` offers nothing. `force: 1` asks the device to install it even when
 * it is not newer; `size` and `sha256` (lowercase hex) let the device check the download (the reference
 * firmware ignores them).
 */
export interface OtaFirmwareSection {
  version: string;
  url: string;
  force?: number;
  size?: number;
  sha256?: string;
}

/** A device not yet enrolled shows and speaks `code`, then polls `POST <ota_url>/activate` (202 pending, 200 done). */
export interface OtaActivationSection {
  code: string;
  message: string;
  /** The firmware polls only when a challenge is present; an eFuse-keyed (v2) device sends back its HMAC. */
  challenge: string;
  timeout_ms: number;
}

export interface OtaResponse {
  server_time: { timestamp: number; timezone_offset: number };
  firmware: OtaFirmwareSection;
  websocket?: OtaWebsocketSection;
  mqtt?: OtaMqttSection;
  activation?: OtaActivationSection;
}

/** The device picks MQTT when an `mqtt` section is present, else WebSocket: send exactly one. */
export const OtaResponseSchema = z.object({
  server_time: z.object({ timestamp: z.number(), timezone_offset: z.number() }),
  firmware: z.object({
    version: z.string(),
    url: z.string(),
    force: z.number().optional(),
    size: z.number().int().min(0).optional(),
    sha256: z
      .string()
      .regex(/^[0-9a-f]{64}$/)
      .optional(),
  }),
  websocket: z.object({ url: z.string(), token: z.string().optional() }).optional(),
  mqtt: z
    .object({
      endpoint: z.string(),
      client_id: z.string().optional(),
      username: z.string().optional(),
      password: z.string().optional(),
      publish_topic: z.string(),
      subscribe_topic: z.string(),
    })
    .optional(),
  activation: z.object({ code: z.string(), message: z.string(), challenge: z.string(), timeout_ms: z.number() }).optional(),
});

/** `POST <ota_url>/activate`: `{}` from a v1 device; a v2 device adds its serial number and the challenge's HMAC. */
export const OtaActivateBodySchema = z
  .object({
    algorithm: z.string().max(32).optional(),
    serial_number: z.string().max(128).optional(),
    challenge: z.string().max(128).optional(),
    hmac: z.string().max(256).optional(),
  })
  .loose();
