import { z } from 'zod';
import { always, Bool, Count, Csv, documented, env, Int, Ms, Port } from '../config/fields.js';

/** How devices connect: the WebSocket path, the embedded MQTT broker, the bound on every frame, and device auth. */

export const WsSlice = z.strictObject({
  path: z.string().startsWith('/').default('/xiaozhi/v1/'),
  maxPayloadBytes: env(
    'GATEWAY_WS_MAX_PAYLOAD',
    Int(1024, 16 * 1024 * 1024, 64 * 1024),
    "largest device WebSocket frame; a larger one drops the device (the firmware's WebSocket client never sends a frame over 65 535 bytes)",
  ),
  heartbeatMs: Ms(30_000),
  /** Device WebSockets; an upgrade past it is answered 503. */
  maxConnections: env('GATEWAY_WS_MAX_CONNECTIONS', Count(8000), 'device WebSockets; an upgrade past it is answered 503'),
});
export type WsConfig = z.infer<typeof WsSlice>;

export const MqttSlice = z
  .strictObject({
    enabled: env('GATEWAY_MQTT_ENABLED', Bool.default(true), 'run the embedded MQTT broker'),
    host: env('GATEWAY_MQTT_HOST', z.string().default('0.0.0.0'), 'broker listen address'),
    port: env('GATEWAY_MQTT_PORT', Port.default(1883), 'broker port'),
    /** `host:port` handed to devices by OTA; default: the OTA request's host and `mqtt.port`. */
    publicEndpoint: env(
      'GATEWAY_MQTT_PUBLIC_ENDPOINT',
      z
        .string()
        .regex(/^[^\s:]+:\d+$/, 'host:port')
        .optional(),
      '`host:port` handed to MQTT devices',
      'OTA request host + `mqtt.port`',
    ),
    group: z
      .string()
      .regex(/^[A-Za-z0-9_.-]{1,64}$/)
      .default('voxgate'),
    /**
     * Largest MQTT packet. The firmware's largest messages are tool results (a tools/list page is <= 8 KB,
     * but a result such as the vision server's answer is not bounded by the firmware, and Wi-Fi boards'
     * MQTT client sends any size); 256 KiB leaves room. A device reply beyond it is refused alone.
     */
    maxPacketBytes: env(
      'GATEWAY_MQTT_MAX_PACKET',
      Int(1024, 16 * 1024 * 1024, 256 * 1024),
      "largest MQTT packet. A larger QoS 0 publish is skipped unread and the connection stays: the request it answers fails at once with `DEVICE_ERROR`; any other oversized packet disconnects the client. The firmware's pages are <= 8 KB, but results (e.g. the vision server's answer) have no firmware bound",
    ),
    /** Sockets on the MQTT port, and from one IPv4 address or IPv6 /64. */
    maxConnections: env('GATEWAY_MQTT_MAX_CONNECTIONS', Count(8000), 'sockets on the MQTT port'),
    maxConnectionsPerAddress: env('GATEWAY_MQTT_MAX_CONNECTIONS_PER_ADDRESS', Count(1000), '… from one IPv4 address or IPv6 /64'),
    /** A socket that has not sent CONNECT within this is closed. */
    connectTimeoutMs: env('GATEWAY_MQTT_CONNECT_TIMEOUT_MS', Ms(10_000, 60_000), 'a socket that has not sent CONNECT within this is closed'),
    /** A client's keepalive is held to [min, max] seconds (0 = "none" becomes max); silent for 1.5x that, it is closed. */
    keepaliveMinSeconds: env(
      'GATEWAY_MQTT_KEEPALIVE_MIN_S',
      z.coerce.number().int().min(1).max(65_535).default(10),
      "a client's keepalive is held to at least this",
    ),
    keepaliveMaxSeconds: env(
      'GATEWAY_MQTT_KEEPALIVE_MAX_S',
      z.coerce.number().int().min(1).max(65_535).default(300),
      '… and at most this (0, "none", becomes this); silent for 1.5x that, a client is closed',
    ),
  })
  .refine((m) => !(typeof m?.keepaliveMinSeconds === 'number' && typeof m.keepaliveMaxSeconds === 'number' && m.keepaliveMinSeconds > m.keepaliveMaxSeconds), {
    path: ['keepaliveMinSeconds'],
    message: 'must not exceed mqtt.keepaliveMaxSeconds',
    when: always,
  });
export type MqttConfig = z.infer<typeof MqttSlice>;

/** Every device text frame (WebSocket message, MQTT payload) is bounded before it is parsed. */
export const FramesSlice = z.strictObject({
  /** Deepest object/array nesting accepted; deeper frames are rejected (`too_deep`). */
  maxDepth: env('GATEWAY_FRAME_MAX_DEPTH', z.coerce.number().int().min(8).max(512).default(64), 'device frames nested deeper are refused before parsing'),
  /** Largest frame parsed, in UTF-8 bytes (`too_large`); the links' own byte caps apply first. */
  maxBytes: env(
    'GATEWAY_FRAME_MAX_BYTES',
    Int(1024, 16 * 1024 * 1024, 256 * 1024),
    '… or larger (a refused reply fails the request it answers at once): see [docs/security.md](docs/security.md)',
  ),
  /**
   * Unsolicited frames per device (text frames but replies to the gateway's requests: notifications, listen, abort,
   * hellos, bad frames; and audio no voice session takes), each counting once per 4 KiB it holds: a real device sends
   * a few small ones a minute. Past the burst and the rate its link stops reading until the budget refills (its frames
   * wait, none is dropped), so one device's flood is paid for by that device alone (devices/read-budget.ts).
   */
  devicePerSecond: env(
    'GATEWAY_FRAME_DEVICE_RATE',
    z.coerce.number().min(1).max(1_000_000).default(100),
    "unsolicited frames a device may send per second, each counting once per 4 KiB it holds (replies to the gateway's requests and a voice session's audio do not count); beyond, its link stops reading for a while",
  ),
  deviceBurst: env('GATEWAY_FRAME_DEVICE_BURST', z.coerce.number().int().min(1).max(10_000_000).default(200), '… and at once'),
  /**
   * The same frames, counted together for every device from one address (an IPv4 address or an IPv6 /64): one party
   * may connect up to `*.maxConnectionsPerAddress` devices, each under its own budget. Past it each of them pauses as
   * past its own. Behind a TCP proxy every device has the proxy's address: raise it with the connection caps.
   */
  addressPerSecond: env(
    'GATEWAY_FRAME_ADDRESS_RATE',
    z.coerce.number().min(1).max(10_000_000).default(2000),
    '… and all devices from one address (IPv4, or IPv6 /64) together; behind a TCP proxy raise it with the connection caps',
  ),
  addressBurst: env('GATEWAY_FRAME_ADDRESS_BURST', z.coerce.number().int().min(1).max(100_000_000).default(4000), '… and at once'),
});
export type FramesConfig = z.infer<typeof FramesSlice>;

export type DeviceAuthMode = 'open' | 'token' | 'hmac';

/** How devices prove who they are; top-level keys of the config file. */
export const deviceAuthFields = {
  /** `open` (anyone), `token` (configured tokens), `hmac` (signed tokens). */
  deviceAuth: env(
    'GATEWAY_DEVICE_AUTH',
    z.enum(['open', 'token', 'hmac']).default('open'),
    '`open`, `token` (configured tokens) or `hmac` (signed tokens and MQTT passwords)',
  ),
  deviceTokens: env('GATEWAY_DEVICE_TOKENS', Csv.default([]), 'comma-separated tokens for `token` mode'),
  /** Signs device tokens, MQTT passwords and vision tokens; generated into the data dir when unset. */
  deviceSecret: env(
    'GATEWAY_DEVICE_SECRET',
    z.string().min(16, 'at least 16 characters').optional(),
    'signs device tokens, MQTT passwords and vision tokens (>= 16 chars)',
    'generated into `data/secrets.json`',
  ),
  deviceTokenMaxAgeSeconds: documented(
    z.coerce
      .number()
      .int()
      .min(60)
      .default(30 * 24 * 3600),
    '`hmac` tokens older than this are refused',
    '`2592000` (30 days)',
  ),
};
