import { z } from 'zod';
import { always, Bool, Count, env, Ms, Port, Tenant } from '../config/fields.js';
import { CONVERSE_ENV, converseConfigShape, VoiceModeSchema } from './converse/config.js';

/** The voice server a relay connects devices to (`voice.mode: "relay"`). */
export const VoiceUpstreamSlice = z.strictObject({
  /** The voice server's device WebSocket, e.g. ws://voice-server:8000/xiaozhi/v1/ */
  url: env(
    'GATEWAY_VOICE_UPSTREAM_URL',
    z.url({ protocol: /^wss?$/ }).optional(),
    "the voice server's device WebSocket (`ws://voice-server:8000/xiaozhi/v1/`)",
  ),
  /** A static token, sent as `Authorization: Bearer <token>`. */
  token: env('GATEWAY_VOICE_UPSTREAM_TOKEN', z.string().min(1).max(4096).optional(), 'a static token sent to it as `Authorization: Bearer`'),
  /** xiaozhi-esp32-server's auth key: each connection carries a fresh base64url(HMAC-SHA256(key, clientId|deviceId|ts)).ts */
  hmacSecret: env(
    'GATEWAY_VOICE_UPSTREAM_HMAC_SECRET',
    z.string().min(8).max(4096).optional(),
    "… or xiaozhi-esp32-server's auth key (a fresh signed token per connection)",
  ),
  /** Extra headers for the upstream upgrade. */
  headers: z.record(z.string().regex(/^[A-Za-z0-9-]{1,64}$/), z.string().max(4096)).default({}),
  /**
   * Upstream WebSocket open + its hello; past it the device gets an `alert` and the session ends. Under the firmware's
   * own 10 s wait for the server hello (websocket_protocol.cc, mqtt_protocol.cc), so the device reads why: at 10 s the
   * alert came after it had given up with its own "failed to receive server hello".
   */
  connectTimeoutMs: env(
    'GATEWAY_VOICE_CONNECT_TIMEOUT_MS',
    Ms(8_000, 60_000),
    "the voice server must open and answer the hello within this (the firmware waits 10 s for the gateway's)",
  ),
});

export const VoiceUdpSlice = z.strictObject({
  host: env('GATEWAY_VOICE_UDP_HOST', z.string().default('0.0.0.0'), 'UDP audio (MQTT devices) listen address'),
  port: env('GATEWAY_VOICE_UDP_PORT', Port.default(8884), '… and port'),
  /** The address devices send UDP audio to (the server hello's udp.server); default: the MQTT connection's local address. */
  publicHost: env(
    'GATEWAY_VOICE_UDP_PUBLIC_HOST',
    z.string().min(1).max(253).optional(),
    'the address devices send UDP audio to',
    "the MQTT connection's local address",
  ),
});

/**
 * The fields every voice mode shares; a mode that needs more adds its own object beside `upstream`
 * (the slice is a plain shape so it extends without touching the others).
 */
export const voiceFields = {
  mode: env(
    'GATEWAY_VOICE_MODE',
    VoiceModeSchema.default('off'),
    '`off` (hellos answered here, audio dropped), `relay` to a voice server, or `converse` (Voxgate answers): see [docs/voice.md](docs/voice.md)',
  ),
  ...declareConverseEnv(converseConfigShape),
  upstream: VoiceUpstreamSlice.prefault({}),
  udp: VoiceUdpSlice.prefault({}),
  /** Voice sessions at once; a hello past it gets an `alert`. */
  maxSessions: env('GATEWAY_VOICE_MAX_SESSIONS', Count(1000), 'voice sessions at once; a hello past it gets an `alert`'),
  /** Optional (not defaulted): unset, a share of maxSessions (voice/tenant-shares.ts) once any device has a tenant. */
  maxSessionsPerTenant: env(
    'GATEWAY_VOICE_MAX_SESSIONS_PER_TENANT',
    z.coerce.number().int().min(1).max(10_000_000).optional(),
    '… per tenant, all its devices together (devices without a tenant count as one); a hello past it gets the same `alert`',
    '3/4 of maxSessions, rounded up, once any device has a tenant (until then: maxSessions)',
  ),
  /** Bytes queued on one side's socket above which further audio for it is dropped (and counted). */
  maxBufferedBytes: z.coerce
    .number()
    .int()
    .min(1024)
    .max(64 * 1024 * 1024)
    .default(256 * 1024),
  /** One audio frame's payload; bigger frames are dropped (a 60 ms Opus frame is well under 1 KiB). */
  maxFrameBytes: z.coerce.number().int().min(256).max(65_535).default(4096),
  /** A voice session with no audio either way for this long ends (the firmware's channel timeout is 120 s). */
  idleTimeoutMs: Ms(120_000),
  /** The voice server's tools/list for a device also holds the hub's tools (hosted servers, other devices, device_call); Voxgate runs those calls. */
  exposeHubTools: env('GATEWAY_VOICE_EXPOSE_HUB_TOOLS', Bool.default(false), "the voice server's tool list for a device also holds the hub's tools"),
  /** The tenant whose hub tools are exposed (servers limited to other tenants stay hidden); unset: servers open to all only. */
  hubTenant: env('GATEWAY_VOICE_HUB_TENANT', Tenant.optional(), 'the tenant whose hub tools are exposed', 'servers open to all only'),
};

/** The converse fields keep their variable table (voice/converse/config.ts): each name is declared on its field here. */
function declareConverseEnv<T extends Record<string, z.core.$ZodType>>(shape: T): T {
  for (const [name, path] of Object.entries(CONVERSE_ENV)) {
    let node: z.core.$ZodType | undefined = shape[path[1]!];
    for (const key of path.slice(2)) {
      while (node && !('shape' in node._zod.def)) node = (node._zod.def as { innerType?: z.core.$ZodType }).innerType;
      node = node ? (node._zod.def as unknown as { shape: Record<string, z.core.$ZodType> }).shape[key] : undefined;
    }
    if (node) env(name, node, `voice.mode "converse": \`${path.slice(1).join('.')}\` (see [docs/voice.md](docs/voice.md))`);
  }
  return shape;
}

/**
 * Voice sessions relayed to a xiaozhi-compatible voice server (docs/voice.md). `off`: a WebSocket hello is
 * answered by the gateway and audio is dropped; an MQTT hello gets a no-voice UDP hello and a goodbye.
 */
export const VoiceSlice = z
  .strictObject(voiceFields)
  .refine((v) => !(v?.mode === 'relay' && !v.upstream?.url), {
    path: ['upstream', 'url'],
    message: 'voice.mode "relay" needs the voice server\'s WebSocket URL',
    when: always,
  })
  // A share above the whole never applies: the operator meant something else (a unit, a digit), and is told so.
  .refine((v) => !(typeof v?.maxSessionsPerTenant === 'number' && typeof v.maxSessions === 'number' && v.maxSessionsPerTenant > v.maxSessions), {
    path: ['maxSessionsPerTenant'],
    message: 'must be at most voice.maxSessions: a share above the whole would never apply',
    when: always,
  })
  .refine((v) => !(v?.upstream?.token !== undefined && v.upstream.hmacSecret !== undefined), {
    path: ['upstream', 'hmacSecret'],
    message: 'set either voice.upstream.token or voice.upstream.hmacSecret, not both',
    when: always,
  });
export type VoiceConfig = z.infer<typeof VoiceSlice>;
