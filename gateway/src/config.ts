import { readFileSync } from 'node:fs';
import { DeviceIdSchema } from '@voxgate/protocol';
import { normalizeDeviceId } from '@voxgate/protocol';
import ipaddr from 'ipaddr.js';
import { z } from 'zod';
import { jsonErrorWithoutInput, parseKeyTenants, redactProblem, safePath, secretValues } from './config-errors.js';
import { McpConfigError, resolveServers } from './hub/config.js';

/**
 * Every setting and every default lives here. Sources, weakest first: these defaults, the optional JSON
 * file (`GATEWAY_CONFIG`, default `gateway.config.json`), then `GATEWAY_*` environment variables.
 */
const Port = z.coerce.number().int().min(0).max(65535);
const Ms = (def: number, max = 3_600_000) => z.coerce.number().int().min(1).max(max).default(def);
const Csv = z.preprocess((v) => (typeof v === 'string' ? v.split(',').map((s) => s.trim()).filter(Boolean) : v), z.array(z.string().min(1)));
const Bool = z.preprocess((v) => (v === 'true' || v === '1' ? true : v === 'false' || v === '0' ? false : v), z.boolean());
const HttpUrl = z.url({ protocol: /^https?$/ });

const Count = (def: number) => z.coerce.number().int().min(1).max(10_000_000).default(def);

const always = () => true;

/**
 * One staged firmware rollout: `version` at `url` (a file name in <dataDir>/firmware, served at
 * /firmware/<file>, or an absolute http(s) URL) for `percent` of the fleet (stable per device: a hash of
 * its id), always for the listed `devices`, and only for the listed `boards` when given (matched against
 * the OTA body's board.type / board.name and the User-Agent's product).
 */
const FirmwareRollout = z.object({
  version: z.string().regex(/^v?\d{1,9}(\.\d{1,9}){0,2}(-[0-9A-Za-z.-]{1,64})?(\+[0-9A-Za-z.-]{1,64})?$/, 'a semantic version such as 1.4.0'),
  url: z.union([HttpUrl, z.string().regex(/^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$/, 'a file name in <dataDir>/firmware or an http(s) URL')]),
  percent: z.coerce.number().min(0).max(100),
  devices: z.preprocess((v) => (typeof v === 'string' ? v.split(',').map((s) => s.trim()).filter(Boolean) : v), z.array(DeviceIdSchema).max(10_000)).optional(),
  boards: Csv.pipe(z.array(z.string().max(128)).max(64)).optional(),
  /** Ask devices to install it even when it is not newer (a downgrade). */
  force: Bool.optional(),
  /** For an external URL: the image's size and SHA-256 the device checks (local files are measured). */
  sha256: z.string().regex(/^[0-9a-fA-F]{64}$/).optional(),
  size: z.coerce.number().int().min(1).optional(),
});
export type FirmwareRolloutConfig = z.infer<typeof FirmwareRollout>;

export const ConfigSchema = z
  .object({
    http: z
      .object({
        host: z.string().default('0.0.0.0'),
        port: Port.default(8000),
        /** How devices reach this gateway (OTA answers); default: the Host header of the OTA request. */
        publicUrl: HttpUrl.optional(),
        bodyLimitBytes: z.coerce.number().int().min(1024).max(16 * 1024 * 1024).default(1024 * 1024),
        /** Every socket on the HTTP port (device WebSockets + API); above `ws.maxConnections`, so the API keeps a reserve. */
        maxConnections: Count(9000),
        /** Sockets on the HTTP port from one IPv4 address or IPv6 /64 (a site's devices often share one NAT address). */
        maxConnectionsPerAddress: Count(1000),
        /** A connection that has not sent a complete request or WebSocket upgrade within this is closed. */
        headersTimeoutMs: Ms(10_000, 120_000),
        /**
         * Reverse proxies whose X-Forwarded-For/-Proto/-Host headers are believed (addresses, CIDRs, or
         * `loopback`, `linklocal`, `uniquelocal`). Empty: the headers are ignored, whoever sends them.
         */
        trustProxy: Csv.refine((list) => list.every(isProxyAddress), 'addresses, CIDRs, or loopback / linklocal / uniquelocal').default([]),
      })
      .prefault({}),
    ws: z
      .object({
        path: z.string().startsWith('/').default('/xiaozhi/v1/'),
        maxPayloadBytes: z.coerce.number().int().min(1024).max(16 * 1024 * 1024).default(64 * 1024),
        heartbeatMs: Ms(30_000),
        /** Device WebSockets; an upgrade past it is answered 503. */
        maxConnections: Count(8000),
      })
      .prefault({}),
    mqtt: z
      .object({
        enabled: Bool.default(true),
        host: z.string().default('0.0.0.0'),
        port: Port.default(1883),
        /** `host:port` handed to devices by OTA; default: the OTA request's host and `mqtt.port`. */
        publicEndpoint: z.string().regex(/^[^\s:]+:\d+$/, 'host:port').optional(),
        group: z.string().regex(/^[A-Za-z0-9_.-]{1,64}$/).default('voxgate'),
        maxPacketBytes: z.coerce.number().int().min(1024).max(16 * 1024 * 1024).default(64 * 1024),
        /** Sockets on the MQTT port, and from one IPv4 address or IPv6 /64. */
        maxConnections: Count(8000),
        maxConnectionsPerAddress: Count(1000),
        /** A socket that has not sent CONNECT within this is closed. */
        connectTimeoutMs: Ms(10_000, 60_000),
        /** A client's keepalive is held to [min, max] seconds (0 = "none" becomes max); silent for 1.5x that, it is closed. */
        keepaliveMinSeconds: z.coerce.number().int().min(1).max(65_535).default(10),
        keepaliveMaxSeconds: z.coerce.number().int().min(1).max(65_535).default(300),
      })
      .prefault({}),
    /** How devices prove who they are: `open` (anyone), `token` (configured tokens), `hmac` (signed tokens). */
    deviceAuth: z.enum(['open', 'token', 'hmac']).default('open'),
    deviceTokens: Csv.default([]),
    /** Signs device tokens, MQTT passwords and vision tokens; generated into the data dir when unset. */
    deviceSecret: z.string().min(16, 'at least 16 characters').optional(),
    deviceTokenMaxAgeSeconds: z.coerce.number().int().min(60).default(30 * 24 * 3600),
    apiKeys: Csv.default([]),
    /**
     * Tenants of API keys: `{"<key>": "<tenant>"}` in the file, or `GATEWAY_API_KEY_TENANTS=key1=tenantA,key2=tenantB`.
     * A key not listed has no tenant. Every key listed here must also be in `apiKeys`.
     */
    apiKeyTenants: z
      .preprocess(parseKeyTenants, z.record(z.string().min(1), z.string().regex(/^[A-Za-z0-9_.-]{1,64}$/, 'a tenant is 1-64 letters, digits, _ . -')))
      .default({}),
    dataDir: z.string().default('data'),
    logLevel: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
    vision: z
      .object({
        url: HttpUrl.optional(),
        tokenTtlSeconds: z.coerce.number().int().min(60).default(3600),
      })
      .prefault({}),
    calls: z
      .object({
        defaultTimeoutMs: Ms(30_000),
        maxTimeoutMs: Ms(300_000),
        /** Calls waiting per device beyond the one running; more is `DEVICE_BUSY`. */
        queueLimit: z.coerce.number().int().min(0).max(10_000).default(16),
        /** Calls in flight per device; the reference firmware runs one tool at a time. */
        concurrency: z.coerce.number().int().min(1).max(64).default(1),
      })
      .prefault({}),
    session: z
      .object({
        /** initialize and each tools/list page must answer within this. */
        requestTimeoutMs: Ms(10_000),
        maxToolPages: z.coerce.number().int().min(1).max(1000).default(64),
        maxTools: z.coerce.number().int().min(1).max(10_000).default(1024),
      })
      .prefault({}),
    devices: z
      .object({
        /** Devices remembered (listed with lastSeenAt); past it offline ones are forgotten, never-ready ones first. */
        maxKnown: z.coerce.number().int().min(1).max(10_000_000).default(50_000),
      })
      .prefault({}),
    events: z
      .object({
        bufferSize: z.coerce.number().int().min(0).max(1_000_000).default(1000),
        /** device.message + device.notification events per device: sustained rate and burst; beyond, dropped and counted. */
        devicePerSecond: z.coerce.number().min(0.01).max(100_000).default(20),
        deviceBurst: z.coerce.number().int().min(1).max(1_000_000).default(50),
        /** Open SSE streams in total and per API key; beyond, 429 TOO_MANY_STREAMS. */
        maxStreams: z.coerce.number().int().min(1).max(100_000).default(1000),
        maxStreamsPerKey: z.coerce.number().int().min(1).max(100_000).default(100),
        /** A stream whose unsent bytes pass this is closed (a reader too slow for the event rate). */
        maxBufferedBytes: z.coerce.number().int().min(64 * 1024).max(256 * 1024 * 1024).default(1024 * 1024),
      })
      .prefault({}),
    /** Every device text frame (WebSocket message, MQTT payload) is bounded before it is parsed. */
    frames: z
      .object({
        /** Deepest object/array nesting accepted; deeper frames are rejected (`too_deep`). */
        maxDepth: z.coerce.number().int().min(8).max(512).default(64),
        /** Largest frame parsed, in UTF-8 bytes (`too_large`); the links' own byte caps apply first. */
        maxBytes: z.coerce.number().int().min(1024).max(16 * 1024 * 1024).default(64 * 1024),
      })
      .prefault({}),
    /** Tool schemas from devices and hosted MCP servers are untrusted data (see docs/security.md). */
    schemas: z
      .object({
        /** A tool whose inputSchema/outputSchema is larger (UTF-8 bytes of its JSON) is left out of the catalog. */
        maxBytes: z.coerce.number().int().min(256).max(4 * 1024 * 1024).default(64 * 1024),
        /** ... or nested deeper than this (JSON levels). */
        maxDepth: z.coerce.number().int().min(2).max(256).default(32),
        /** Compiled validators kept, shared by every tool with the same schema content (LRU). */
        validatorCacheSize: z.coerce.number().int().min(1).max(100_000).default(1024),
      })
      .prefault({}),
    ota: z
      .object({
        transport: z.enum(['websocket', 'mqtt']).default('websocket'),
        firmwareVersion: z.string().default('0.0.0'),
        firmwareUrl: z.string().default(''),
        timezoneOffsetMinutes: z.coerce.number().int().min(-720).max(840).default(0),
        /** Staged firmware rollouts: one object, or a list (the first that matches a device wins); read as a list. */
        rollout: z.preprocess((v) => (isPlain(v) ? [v] : v), z.array(FirmwareRollout).max(64)).optional(),
      })
      .prefault({}),
    shutdownGraceMs: Ms(4000, 60_000),
    metrics: z
      .object({
        /** A bearer key that may read /metrics (and nothing else), besides the API keys. */
        key: z.string().min(16, 'at least 16 characters').optional(),
        /** Serve /metrics on its own listener (and not on the API port). It needs `key` only when one is set. */
        port: Port.optional(),
        host: z.string().default('127.0.0.1'),
      })
      .prefault({}),
    mcp: z
      .object({
        /** `MCP_ENABLED=false` turns the hub (upstream servers) off; device tools and /mcp keep working. */
        enabled: Bool.default(true),
        /** The `{"mcpServers": {...}}` file (`GATEWAY_MCP_CONFIG`). No file and no inline servers: no hub. */
        configFile: z.string().min(1).optional(),
        /** Servers given inline (same format as the file's `mcpServers`); the file's entries win on a name clash. */
        servers: z.record(z.string(), z.unknown()).default({}),
        /** Device tools for LLMs: one tool per device tool, the generic devices_list + device_call, or both. */
        deviceTools: z.enum(['per_device', 'generic', 'both']).default('both'),
        connectTimeoutMs: Ms(20_000),
        callTimeoutMs: Ms(60_000),
        /** After SIGTERM, a child gets this long to exit before SIGKILL. */
        killGraceMs: Ms(2000, 60_000),
        maxRestarts: z.coerce.number().int().min(0).max(100).default(5),
        restartBaseDelayMs: Ms(500),
        restartMaxDelayMs: Ms(30_000),
        restartResetMs: Ms(60_000),
        maxResultBytes: z.coerce.number().int().min(1024).max(64 * 1024 * 1024).default(1024 * 1024),
        maxToolsPerServer: z.coerce.number().int().min(1).max(10_000).default(512),
        /** Default for servers without `allow_private_network`: outbound HTTP may reach private addresses. */
        allowPrivateNetwork: Bool.default(false),
        /** Asked of hosted servers that log (logging/setLevel); their messages go to /mcp sessions that see them. */
        upstreamLogLevel: z.enum(['debug', 'info', 'notice', 'warning', 'error', 'critical', 'alert', 'emergency']).default('info'),
        /** Log messages per second passed on from one hosted server (a burst of as many); the rest are dropped and counted. */
        upstreamLogRatePerSecond: z.coerce.number().int().min(1).max(10_000).default(20),
        endpoint: z
          .object({
            enabled: Bool.default(true),
            /** Browser origins allowed besides the gateway's own; requests without Origin are allowed. */
            allowedOrigins: Csv.default([]),
            /**
             * Host names `/mcp` answers to (DNS-rebinding protection), besides localhost, 127.0.0.1, [::1],
             * the host of `http.publicUrl` and a specific `http.host`. Names only, no port.
             */
            allowedHosts: Csv.default([]),
            maxSessions: z.coerce.number().int().min(1).max(100_000).default(1000),
            /** Sessions one API key may hold at once, so one key cannot take every slot of `maxSessions`. */
            maxSessionsPerKey: z.coerce.number().int().min(1).max(100_000).default(100),
            sessionIdleMs: Ms(30 * 60_000, 24 * 3_600_000),
          })
          .prefault({}),
      })
      .prefault({}),
    /**
     * Which devices may get credentials from the OTA endpoint (hmac device auth only; `open` and `token`
     * mint nothing). `approve`: a new device shows a 6-digit code and waits for an operator; `open`: the
     * first device to ask for an id gets it; `allowlist`: only the listed ids. An enrolled device id is
     * bound to its credentials either way.
     */
    enrollment: z
      .object({
        policy: z.enum(['open', 'approve', 'allowlist']).default('approve'),
        /** Device ids (any MAC spelling) that `allowlist` admits. */
        allowlist: Csv.refine((ids) => ids.every((id) => normalizeDeviceId(id) !== undefined), 'every entry must be a MAC address such as aa:bb:cc:dd:ee:ff').default([]),
        /** A pending activation code lives this long after the device's last OTA check. */
        pendingTtlSeconds: z.coerce.number().int().min(60).max(30 * 24 * 3600).default(3600),
        maxPending: z.coerce.number().int().min(1).max(100_000).default(1000),
        maxPendingPerDevice: z.coerce.number().int().min(1).max(100).default(4),
        /** OTA and activation requests per source address: a token bucket of `burst`, refilled at `perSecond`. */
        rateLimit: z
          .object({
            perSecond: z.coerce.number().min(0.01).max(10_000).default(2),
            burst: z.coerce.number().int().min(1).max(100_000).default(60),
            /** Addresses tracked at once; the least recently seen is forgotten first. */
            maxAddresses: z.coerce.number().int().min(100).max(10_000_000).default(100_000),
          })
          .prefault({}),
      })
      .prefault({}),
    /**
     * TLS on the gateway itself (docs/deployment.md, "TLS"): with certFile and keyFile, the HTTP port serves
     * HTTPS/WSS and the broker gets a second, TLS listener. Files are read at start and on SIGHUP.
     */
    tls: z
      .object({
        /** PEM certificate (leaf first; intermediates may follow). */
        certFile: z.string().min(1).optional(),
        /** PEM private key of certFile. */
        keyFile: z.string().min(1).optional(),
        /** PEM intermediate/CA certificates that complete the chain presented, when certFile holds the leaf only. */
        caFile: z.string().min(1).optional(),
        /** MQTT over TLS (the reference firmware uses TLS exactly when the port it is given is 8883). */
        mqttEnabled: Bool.default(true),
        mqttPort: Port.default(8883),
        /**
         * What OTA hands devices. `auto`: wss:// when the OTA request came over HTTPS (here or, per
         * X-Forwarded-Proto, at a trusted proxy) and host:<mqttPort> when the TLS broker listener is on;
         * `tls`: always (TLS terminated in front of the gateway); `plain`: ws:// and mqtt.port.
         */
        advertise: z.enum(['auto', 'tls', 'plain']).default('auto'),
      })
      .prefault({}),
  })
  // Cross-field rules run even when other fields failed (`when`), so one start lists every problem; the
  // values they read may then be raw input, hence the type guards.
  .refine((c) => !(c.deviceAuth === 'token' && Array.isArray(c.deviceTokens) && c.deviceTokens.length === 0), {
    path: ['deviceTokens'],
    message: 'deviceAuth "token" needs at least one token',
    when: always,
  })
  .refine((c) => !isPlain(c.apiKeyTenants) || !Array.isArray(c.apiKeys) || Object.keys(c.apiKeyTenants).every((k) => c.apiKeys.includes(k)), {
    path: ['apiKeyTenants'],
    message: 'names a key that is not in apiKeys',
    when: always,
  })
  .refine((c) => !(typeof c.calls?.defaultTimeoutMs === 'number' && typeof c.calls.maxTimeoutMs === 'number' && c.calls.defaultTimeoutMs > c.calls.maxTimeoutMs), {
    path: ['calls', 'defaultTimeoutMs'],
    message: 'must not exceed calls.maxTimeoutMs',
    when: always,
  })
  .refine((c) => !(typeof c.http?.maxConnections === 'number' && typeof c.ws?.maxConnections === 'number' && c.http.maxConnections <= c.ws.maxConnections), {
    path: ['http', 'maxConnections'],
    message: 'must exceed ws.maxConnections: the difference is what the API and health checks keep when devices fill the port',
    when: always,
  })
  .refine((c) => (c.tls?.certFile === undefined) === (c.tls?.keyFile === undefined), {
    path: ['tls', 'keyFile'],
    message: 'tls.certFile and tls.keyFile go together',
    when: always,
  })
  .refine((c) => !(c.tls?.caFile !== undefined && c.tls.certFile === undefined), {
    path: ['tls', 'caFile'],
    message: 'needs tls.certFile and tls.keyFile',
    when: always,
  })
  .refine((c) => !(typeof c.mqtt?.keepaliveMinSeconds === 'number' && typeof c.mqtt.keepaliveMaxSeconds === 'number' && c.mqtt.keepaliveMinSeconds > c.mqtt.keepaliveMaxSeconds), {
    path: ['mqtt', 'keepaliveMinSeconds'],
    message: 'must not exceed mqtt.keepaliveMaxSeconds',
    when: always,
  });

export type Config = z.infer<typeof ConfigSchema>;
export type ConfigInput = z.input<typeof ConfigSchema>;

/** Environment variable -> config path. */
export const ENV_MAP: Readonly<Record<string, readonly string[]>> = {
  GATEWAY_HTTP_HOST: ['http', 'host'],
  GATEWAY_HTTP_PORT: ['http', 'port'],
  GATEWAY_PUBLIC_URL: ['http', 'publicUrl'],
  GATEWAY_WS_MAX_PAYLOAD: ['ws', 'maxPayloadBytes'],
  GATEWAY_MQTT_ENABLED: ['mqtt', 'enabled'],
  GATEWAY_MQTT_HOST: ['mqtt', 'host'],
  GATEWAY_MQTT_PORT: ['mqtt', 'port'],
  GATEWAY_MQTT_PUBLIC_ENDPOINT: ['mqtt', 'publicEndpoint'],
  GATEWAY_MQTT_MAX_PACKET: ['mqtt', 'maxPacketBytes'],
  GATEWAY_DEVICE_AUTH: ['deviceAuth'],
  GATEWAY_DEVICE_TOKENS: ['deviceTokens'],
  GATEWAY_DEVICE_SECRET: ['deviceSecret'],
  GATEWAY_API_KEYS: ['apiKeys'],
  GATEWAY_API_KEY_TENANTS: ['apiKeyTenants'],
  GATEWAY_MCP_CONFIG: ['mcp', 'configFile'],
  MCP_ENABLED: ['mcp', 'enabled'],
  GATEWAY_MCP_ENABLED: ['mcp', 'enabled'],
  GATEWAY_MCP_DEVICE_TOOLS: ['mcp', 'deviceTools'],
  GATEWAY_MCP_ALLOWED_ORIGINS: ['mcp', 'endpoint', 'allowedOrigins'],
  GATEWAY_MCP_ENDPOINT_ENABLED: ['mcp', 'endpoint', 'enabled'],
  GATEWAY_MCP_ALLOWED_HOSTS: ['mcp', 'endpoint', 'allowedHosts'],
  GATEWAY_MCP_MAX_SESSIONS: ['mcp', 'endpoint', 'maxSessions'],
  GATEWAY_MCP_MAX_SESSIONS_PER_KEY: ['mcp', 'endpoint', 'maxSessionsPerKey'],
  GATEWAY_DATA_DIR: ['dataDir'],
  GATEWAY_LOG_LEVEL: ['logLevel'],
  GATEWAY_VISION_URL: ['vision', 'url'],
  GATEWAY_CALL_TIMEOUT_MS: ['calls', 'defaultTimeoutMs'],
  GATEWAY_CALL_MAX_TIMEOUT_MS: ['calls', 'maxTimeoutMs'],
  GATEWAY_CALL_QUEUE_LIMIT: ['calls', 'queueLimit'],
  GATEWAY_OTA_TRANSPORT: ['ota', 'transport'],
  GATEWAY_FIRMWARE_VERSION: ['ota', 'firmwareVersion'],
  GATEWAY_FIRMWARE_URL: ['ota', 'firmwareUrl'],
  GATEWAY_EVENTS_DEVICE_RATE: ['events', 'devicePerSecond'],
  GATEWAY_EVENTS_DEVICE_BURST: ['events', 'deviceBurst'],
  GATEWAY_SSE_MAX_STREAMS: ['events', 'maxStreams'],
  GATEWAY_SSE_MAX_STREAMS_PER_KEY: ['events', 'maxStreamsPerKey'],
  GATEWAY_DEVICES_MAX_KNOWN: ['devices', 'maxKnown'],
  GATEWAY_METRICS_KEY: ['metrics', 'key'],
  GATEWAY_METRICS_PORT: ['metrics', 'port'],
  GATEWAY_METRICS_HOST: ['metrics', 'host'],
  GATEWAY_HTTP_MAX_CONNECTIONS: ['http', 'maxConnections'],
  GATEWAY_HTTP_MAX_CONNECTIONS_PER_ADDRESS: ['http', 'maxConnectionsPerAddress'],
  GATEWAY_HTTP_HEADERS_TIMEOUT_MS: ['http', 'headersTimeoutMs'],
  GATEWAY_WS_MAX_CONNECTIONS: ['ws', 'maxConnections'],
  GATEWAY_MQTT_MAX_CONNECTIONS: ['mqtt', 'maxConnections'],
  GATEWAY_MQTT_MAX_CONNECTIONS_PER_ADDRESS: ['mqtt', 'maxConnectionsPerAddress'],
  GATEWAY_MQTT_CONNECT_TIMEOUT_MS: ['mqtt', 'connectTimeoutMs'],
  GATEWAY_MQTT_KEEPALIVE_MIN_S: ['mqtt', 'keepaliveMinSeconds'],
  GATEWAY_MQTT_KEEPALIVE_MAX_S: ['mqtt', 'keepaliveMaxSeconds'],
  GATEWAY_OTA_ROLLOUT_VERSION: ['ota', 'rollout', 'version'],
  GATEWAY_OTA_ROLLOUT_URL: ['ota', 'rollout', 'url'],
  GATEWAY_OTA_ROLLOUT_PERCENT: ['ota', 'rollout', 'percent'],
  GATEWAY_OTA_ROLLOUT_DEVICES: ['ota', 'rollout', 'devices'],
  GATEWAY_OTA_ROLLOUT_BOARDS: ['ota', 'rollout', 'boards'],
  GATEWAY_ENROLLMENT: ['enrollment', 'policy'],
  GATEWAY_ENROLLMENT_ALLOWLIST: ['enrollment', 'allowlist'],
  GATEWAY_ENROLLMENT_PENDING_TTL_S: ['enrollment', 'pendingTtlSeconds'],
  GATEWAY_OTA_RATE_PER_SECOND: ['enrollment', 'rateLimit', 'perSecond'],
  GATEWAY_OTA_RATE_BURST: ['enrollment', 'rateLimit', 'burst'],
  GATEWAY_FRAME_MAX_DEPTH: ['frames', 'maxDepth'],
  GATEWAY_FRAME_MAX_BYTES: ['frames', 'maxBytes'],
  GATEWAY_SCHEMA_MAX_BYTES: ['schemas', 'maxBytes'],
  GATEWAY_SCHEMA_MAX_DEPTH: ['schemas', 'maxDepth'],
  GATEWAY_VALIDATOR_CACHE_SIZE: ['schemas', 'validatorCacheSize'],
  GATEWAY_TRUST_PROXY: ['http', 'trustProxy'],
  GATEWAY_TLS_CERT_FILE: ['tls', 'certFile'],
  GATEWAY_TLS_KEY_FILE: ['tls', 'keyFile'],
  GATEWAY_TLS_CA_FILE: ['tls', 'caFile'],
  GATEWAY_TLS_MQTT_ENABLED: ['tls', 'mqttEnabled'],
  GATEWAY_TLS_MQTT_PORT: ['tls', 'mqttPort'],
  GATEWAY_TLS_ADVERTISE: ['tls', 'advertise'],
};

export class ConfigError extends Error {
  constructor(readonly problems: string[]) {
    super(`invalid configuration:\n${problems.map((p) => `  - ${p}`).join('\n')}`);
  }
}

/** Build the configuration; throws ConfigError listing every bad field with where it came from. */
export function loadConfig(env: NodeJS.ProcessEnv = process.env, overrides: ConfigInput = {}): Config {
  const file = env['GATEWAY_CONFIG'] ?? 'gateway.config.json';
  const fromFile = readConfigFile(file, env['GATEWAY_CONFIG'] !== undefined);
  const merged = deepMerge(deepMerge(fromFile, envToObject(env)), overrides as Record<string, unknown>);
  const r = ConfigSchema.safeParse(merged);
  // No problem text ever carries a secret value (see config-errors.ts).
  const secrets = secretValues(merged);
  const fail = (problems: string[]) => new ConfigError(problems.map((p) => redactProblem(p, secrets)));
  if (r.success) {
    try {
      resolveServers(r.data.mcp);
    } catch (e) {
      if (e instanceof McpConfigError) throw fail(e.problems);
      throw e;
    }
    return r.data;
  }
  const origin = (path: PropertyKey[]) => {
    // The variable that set this path or a parent of it (an issue inside apiKeyTenants came from
    // GATEWAY_API_KEY_TENANTS); list indexes are not part of an env path (GATEWAY_OTA_ROLLOUT_PERCENT sets ota.rollout.0.percent).
    const key = path.filter((p) => typeof p !== 'number');
    const envName = Object.entries(ENV_MAP).find(([, p]) => p.join('.') === key.slice(0, p.length).join('.'))?.[0];
    return envName && env[envName] !== undefined ? ` (from ${envName})` : '';
  };
  throw fail(r.error.issues.map((i) => `${safePath(i.path, merged)}: ${i.message}${origin(i.path)}`));
}

function readConfigFile(path: string, required: boolean): Record<string, unknown> {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (e) {
    if (!required && (e as NodeJS.ErrnoException).code === 'ENOENT') return {};
    throw new ConfigError([`${path}: cannot read (${(e as Error).message})`]);
  }
  try {
    const v = JSON.parse(text) as unknown;
    if (typeof v !== 'object' || v === null || Array.isArray(v)) throw new Error('the top level must be an object');
    return v as Record<string, unknown>;
  } catch (e) {
    throw new ConfigError([`${path}: not valid JSON (${jsonErrorWithoutInput(e)})`]);
  }
}

function envToObject(env: NodeJS.ProcessEnv): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [name, path] of Object.entries(ENV_MAP)) {
    const v = env[name];
    if (v === undefined || v === '') continue;
    let node = out;
    for (const key of path.slice(0, -1)) node = (node[key] ??= {}) as Record<string, unknown>;
    node[path[path.length - 1]!] = v;
  }
  return out;
}

function deepMerge(a: Record<string, unknown>, b: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = { ...a };
  for (const [k, v] of Object.entries(b)) {
    const prev = out[k];
    out[k] = isPlain(prev) && isPlain(v) ? deepMerge(prev, v) : v;
  }
  return out;
}

/** What fastify's trustProxy (proxy-addr) takes: an address, a CIDR, or a named range. */
const isProxyAddress = (v: string) => ['loopback', 'linklocal', 'uniquelocal'].includes(v) || ipaddr.isValid(v) || ipaddr.isValidCIDR(v);

const isPlain = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
