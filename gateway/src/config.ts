import { readFileSync } from 'node:fs';
import { DeviceIdSchema } from '@voxgate/protocol';
import { normalizeDeviceId } from '@voxgate/protocol';
import ipaddr from 'ipaddr.js';
import { z } from 'zod';
import { jsonErrorWithoutInput, parseKeyTenants, redactProblem, safePath, secretValues, unknownKeyProblems } from './config-errors.js';
import { McpConfigError, resolveServers } from './hub/config.js';
import { CONVERSE_ENV, VoiceModeSchema, converseConfigShape } from './voice/converse/config.js';

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
const FirmwareRollout = z.strictObject({
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
  .strictObject({
    http: z
      .strictObject({
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
      .strictObject({
        path: z.string().startsWith('/').default('/xiaozhi/v1/'),
        maxPayloadBytes: z.coerce.number().int().min(1024).max(16 * 1024 * 1024).default(64 * 1024),
        heartbeatMs: Ms(30_000),
        /** Device WebSockets; an upgrade past it is answered 503. */
        maxConnections: Count(8000),
      })
      .prefault({}),
    mqtt: z
      .strictObject({
        enabled: Bool.default(true),
        host: z.string().default('0.0.0.0'),
        port: Port.default(1883),
        /** `host:port` handed to devices by OTA; default: the OTA request's host and `mqtt.port`. */
        publicEndpoint: z.string().regex(/^[^\s:]+:\d+$/, 'host:port').optional(),
        group: z.string().regex(/^[A-Za-z0-9_.-]{1,64}$/).default('voxgate'),
        /**
         * Largest MQTT packet. The firmware's largest messages are tool results (a tools/list page is <= 8 KB,
         * but a result such as the vision server's answer is not bounded by the firmware, and Wi-Fi boards'
         * MQTT client sends any size); 256 KiB leaves room. A device reply beyond it is refused alone.
         */
        maxPacketBytes: z.coerce.number().int().min(1024).max(16 * 1024 * 1024).default(256 * 1024),
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
    /** `json` lines for log collectors; `pretty` (pino-pretty) for people reading a terminal. */
    logFormat: z.enum(['json', 'pretty']).default('json'),
    vision: z
      .strictObject({
        url: HttpUrl.optional(),
        tokenTtlSeconds: z.coerce.number().int().min(60).default(3600),
        /** How often a connected device gets a fresh token (a repeated initialize); default: 80% of tokenTtlSeconds. */
        refreshMs: z.coerce.number().int().min(100).optional(),
        /** Serve the vision endpoint (POST /mcp/vision/explain) here; `url` defaults to it when `http.publicUrl` is set. */
        serve: Bool.default(true),
        /** Largest photo accepted (xiaozhi-server: 5 MB). */
        maxPhotoBytes: z.coerce.number().int().min(1024).max(64 * 1024 * 1024).default(5 * 1024 * 1024),
        /** Photos kept per device, and in all (oldest go first), under `<dataDir>/photos`. */
        photosPerDevice: z.coerce.number().int().min(1).max(10_000).default(20),
        maxStoredPhotos: z.coerce.number().int().min(1).max(1_000_000).default(1000),
        /** Uploads per device per minute (bursts of up to 5); beyond, 429. */
        uploadsPerMinute: z.coerce.number().int().min(1).max(10_000).default(6),
        /** An external xiaozhi-compatible explainer (POST multipart question + file); unset: none yet. */
        explainerUrl: HttpUrl.optional(),
        explainerToken: z.string().optional(),
        explainerTimeoutMs: Ms(30_000),
      })
      .prefault({}),
    calls: z
      .strictObject({
        defaultTimeoutMs: Ms(30_000),
        maxTimeoutMs: Ms(300_000),
        /** Calls waiting per device beyond the one running; more is `DEVICE_BUSY`. */
        queueLimit: z.coerce.number().int().min(0).max(10_000).default(16),
        /** Calls in flight per device; the reference firmware runs one tool at a time. */
        concurrency: z.coerce.number().int().min(1).max(64).default(1),
      })
      .prefault({}),
    session: z
      .strictObject({
        /** initialize and each tools/list page must answer within this. */
        requestTimeoutMs: Ms(10_000),
        maxToolPages: z.coerce.number().int().min(1).max(1000).default(64),
        maxTools: z.coerce.number().int().min(1).max(10_000).default(1024),
        /** A setup step that fails is retried while the link is up: first wait, doubling up to the max. */
        setupRetryMinMs: Ms(1_000),
        setupRetryMaxMs: Ms(30_000),
        /** Failures other than timeouts (malformed reply, device error) per setup step before the device is `failed`. */
        setupMaxErrors: z.coerce.number().int().min(1).max(100).default(5),
      })
      .prefault({}),
    devices: z
      .strictObject({
        /** Devices remembered (listed with lastSeenAt); past it offline ones are forgotten, never-ready ones first. */
        maxKnown: z.coerce.number().int().min(1).max(10_000_000).default(50_000),
      })
      .prefault({}),
    events: z
      .strictObject({
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
      .strictObject({
        /** Deepest object/array nesting accepted; deeper frames are rejected (`too_deep`). */
        maxDepth: z.coerce.number().int().min(8).max(512).default(64),
        /** Largest frame parsed, in UTF-8 bytes (`too_large`); the links' own byte caps apply first. */
        maxBytes: z.coerce.number().int().min(1024).max(16 * 1024 * 1024).default(256 * 1024),
      })
      .prefault({}),
    /** Tool schemas from devices and hosted MCP servers are untrusted data (see docs/security.md). */
    schemas: z
      .strictObject({
        /** A tool whose inputSchema/outputSchema is larger (UTF-8 bytes of its JSON) is left out of the catalog. */
        maxBytes: z.coerce.number().int().min(256).max(4 * 1024 * 1024).default(64 * 1024),
        /** ... or nested deeper than this (JSON levels). */
        maxDepth: z.coerce.number().int().min(2).max(256).default(32),
        /** Compiled validators kept, shared by every tool with the same schema content (LRU). */
        validatorCacheSize: z.coerce.number().int().min(1).max(100_000).default(1024),
      })
      .prefault({}),
    ota: z
      .strictObject({
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
      .strictObject({
        /** A bearer key that may read /metrics (and nothing else), besides the API keys. */
        key: z.string().min(16, 'at least 16 characters').optional(),
        /** Serve /metrics on its own listener (and not on the API port). It needs `key` only when one is set. */
        port: Port.optional(),
        host: z.string().default('127.0.0.1'),
        /** The in-memory history behind GET /v1/metrics/history (the console's health charts): one sample every `historyIntervalMs`, the last `historySamples` kept (default: an hour). */
        historyIntervalMs: Ms(10_000, 600_000),
        historySamples: z.coerce.number().int().min(1).max(10_000).default(360),
      })
      .prefault({}),
    /** The web console, static files served at /console (built into console/dist by `npm run build`). */
    console: z
      .object({
        enabled: Bool.default(true),
        /** Where the built files are; default: console/dist of this checkout. */
        dir: z.string().min(1).optional(),
      })
      .prefault({}),
    mcp: z
      .strictObject({
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
        /** Devices one `devices_list` result names at most (a fleet must not become one tool result); past it: `truncated`. */
        devicesListMax: z.coerce.number().int().min(1).max(10_000).default(200),
        /** Default for servers without `allow_private_network`: outbound HTTP may reach private addresses. */
        allowPrivateNetwork: Bool.default(false),
        /** Asked of hosted servers that log (logging/setLevel); their messages go to /mcp sessions that see them. */
        upstreamLogLevel: z.enum(['debug', 'info', 'notice', 'warning', 'error', 'critical', 'alert', 'emergency']).default('info'),
        /** Log messages per second passed on from one hosted server (a burst of as many); the rest are dropped and counted. */
        upstreamLogRatePerSecond: z.coerce.number().int().min(1).max(10_000).default(20),
        endpoint: z
          .strictObject({
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
      .strictObject({
        policy: z.enum(['open', 'approve', 'allowlist']).default('approve'),
        /** Device ids (any MAC spelling) that `allowlist` admits. */
        allowlist: Csv.refine((ids) => ids.every((id) => normalizeDeviceId(id) !== undefined), 'every entry must be a MAC address such as aa:bb:cc:dd:ee:ff').default([]),
        /** A pending activation code lives this long after the device's last OTA check. */
        pendingTtlSeconds: z.coerce.number().int().min(60).max(30 * 24 * 3600).default(3600),
        maxPending: z.coerce.number().int().min(1).max(100_000).default(1000),
        maxPendingPerDevice: z.coerce.number().int().min(1).max(100).default(4),
        /** OTA and activation requests per source address: a token bucket of `burst`, refilled at `perSecond`. */
        rateLimit: z
          .strictObject({
            perSecond: z.coerce.number().min(0.01).max(10_000).default(2),
            burst: z.coerce.number().int().min(1).max(100_000).default(60),
            /** Addresses tracked at once; the least recently seen is forgotten first. */
            maxAddresses: z.coerce.number().int().min(100).max(10_000_000).default(100_000),
          })
          .prefault({}),
      })
      .prefault({}),
    /** The LLM tool loop (docs/assistant.md). Models are named; a turn picks one (default: `defaultModel`). */
    assistant: z
      .object({
        models: z
          .record(
            z.string().regex(/^[A-Za-z0-9_.:-]{1,64}$/, 'model names: 1-64 of A-Z a-z 0-9 _ . : -'),
            z
              .object({
                /** `openai`: Chat Completions (OpenAI, Ollama, vLLM, llama.cpp, LM Studio, DeepSeek...); `anthropic`: Messages; `gemini`: Google Gemini. */
                provider: z.enum(['openai', 'anthropic', 'gemini']),
                baseUrl: HttpUrl.optional(),
                /** The environment variable holding the API key (never the key itself in the file). */
                apiKeyEnv: z.string().regex(/^[A-Za-z_][A-Za-z0-9_]{0,127}$/).optional(),
                model: z.string().min(1).max(256),
                /** `native` function calling, `markers` (tools described in the prompt, calls parsed from text), `none` (no tools). */
                toolMode: z.enum(['native', 'markers', 'none']).default('native'),
                vision: Bool.default(false),
                maxTokens: z.coerce.number().int().min(1).max(1_000_000).default(1024),
                /** SDK retries on connection errors, 408/409/429 and 5xx. */
                maxRetries: z.coerce.number().int().min(0).max(10).default(1),
              })
              .strict(),
          )
          .default({}),
        defaultModel: z.string().optional(),
        /** Answers the vision endpoint's questions about a device's photo; default: the first model with `vision: true`. */
        visionModel: z.string().optional(),
        visionPrompt: z
          .string()
          .max(16 * 1024)
          .default('You are the eyes of a voice device. Answer the question about the photo in one or two short sentences that can be spoken aloud, in the language of the question.'),
        systemPrompt: z
          .string()
          .max(64 * 1024)
          .default('You are the assistant of a fleet of voice devices. Use the tools to act on devices and to look things up; answer briefly, in the language of the user.'),
        /** Which tools a turn offers: the caller's whole namespace, device tools only, or none. */
        tools: z.enum(['all', 'devices', 'none']).default('all'),
        maxToolRounds: z.coerce.number().int().min(1).max(50).default(5),
        /** Tool calls run from one model reply; the rest are answered "not run" (a prompt-injected model cannot fan out without end). */
        maxToolCallsPerRound: z.coerce.number().int().min(1).max(256).default(16),
        toolTimeoutMs: Ms(30_000),
        modelTimeoutMs: Ms(120_000),
        /** Tools that need a person's yes (besides those annotated destructiveHint): namespaced or short names. */
        confirm: z.enum(['ask', 'deny', 'allow']).default('ask'),
        confirmTools: Csv.default([]),
        confirmTimeoutMs: Ms(60_000),
        conversationTtlMs: Ms(3_600_000, 7 * 24 * 3_600_000),
        maxConversations: z.coerce.number().int().min(1).max(1_000_000).default(10_000),
        /** Per conversation: user/answer pairs kept, and their total size; the oldest go first. */
        maxConversationTurns: z.coerce.number().int().min(1).max(1000).default(50),
        maxConversationBytes: z.coerce.number().int().min(1024).max(64 * 1024 * 1024).default(256 * 1024),
        maxMessageBytes: z.coerce.number().int().min(16).max(1024 * 1024).default(32 * 1024),
        /** Tool results are cut to this many characters before the model reads them. */
        maxToolResultChars: z.coerce.number().int().min(256).max(1024 * 1024).default(16_000),
        maxConcurrentTurns: z.coerce.number().int().min(1).max(100_000).default(64),
        /** Turns running at once for one tenant (keys without a tenant share one count): no tenant can take every slot. */
        maxConcurrentTurnsPerTenant: z.coerce.number().int().min(1).max(100_000).default(16),
      })
      .prefault({}),
    /**
     * Voice sessions relayed to a xiaozhi-compatible voice server (docs/voice.md). `off`: a WebSocket hello is
     * answered by the gateway and audio is dropped; an MQTT hello gets a goodbye.
     */
    voice: z
      .object({
        mode: VoiceModeSchema.default('off'),
        ...converseConfigShape,
        upstream: z
          .object({
            /** The voice server's device WebSocket, e.g. ws://voice-server:8000/xiaozhi/v1/ */
            url: z.url({ protocol: /^wss?$/ }).optional(),
            /** A static token, sent as `Authorization: Bearer <token>`. */
            token: z.string().min(1).max(4096).optional(),
            /** xiaozhi-esp32-server's auth key: each connection carries a fresh base64url(HMAC-SHA256(key, clientId|deviceId|ts)).ts */
            hmacSecret: z.string().min(8).max(4096).optional(),
            /** Extra headers for the upstream upgrade. */
            headers: z.record(z.string().regex(/^[A-Za-z0-9-]{1,64}$/), z.string().max(4096)).default({}),
            /** Upstream WebSocket open + its hello; past it the device gets an `alert` and the session ends. */
            connectTimeoutMs: Ms(10_000, 60_000),
          })
          .prefault({}),
        udp: z
          .object({
            host: z.string().default('0.0.0.0'),
            port: Port.default(8884),
            /** The address devices send UDP audio to (the server hello's udp.server); default: the MQTT connection's local address. */
            publicHost: z.string().min(1).max(253).optional(),
          })
          .prefault({}),
        /** Voice sessions at once; a hello past it gets an `alert`. */
        maxSessions: Count(1000),
        /** Bytes queued on one side's socket above which further audio for it is dropped (and counted). */
        maxBufferedBytes: z.coerce.number().int().min(1024).max(64 * 1024 * 1024).default(256 * 1024),
        /** One audio frame's payload; bigger frames are dropped (a 60 ms Opus frame is well under 1 KiB). */
        maxFrameBytes: z.coerce.number().int().min(256).max(65_535).default(4096),
        /** A voice session with no audio either way for this long ends (the firmware's channel timeout is 120 s). */
        idleTimeoutMs: Ms(120_000),
        /** The voice server's tools/list for a device also holds the hub's tools (hosted servers, other devices, device_call); Voxgate runs those calls. */
        exposeHubTools: Bool.default(false),
        /** The tenant whose hub tools are exposed (servers limited to other tenants stay hidden); unset: servers open to all only. */
        hubTenant: z.string().min(1).max(128).optional(),
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
    /** Many instances on NATS (docs/scaling.md). Off: one process, no external service. */
    cluster: z
      .object({
        enabled: Bool.default(false),
        /** This instance's name: NATS subjects and presence entries carry it; unique per instance. Default: a random one per start. */
        instanceId: z.string().regex(/^[A-Za-z0-9_-]{1,64}$/, 'letters, digits, "_" or "-" (at most 64)').optional(),
        nats: z
          .object({
            servers: Csv.default(['nats://127.0.0.1:4222']),
            /** A NATS .creds file (JWT + nkey seed) for authenticated clusters. */
            credsFile: z.string().min(1).max(4096).optional(),
          })
          .prefault({}),
        /** Key-value bucket holding presence and catalogs; events go to subjects under `voxgate.events.`. */
        bucket: z.string().regex(/^[A-Za-z0-9_-]{1,64}$/).default('voxgate'),
        /** Each instance announces itself this often; one silent for 3 heartbeats is dead (its devices offline, calls to it failed). */
        heartbeatMs: Ms(2_000, 60_000),
        /** Bytes of one forwarded call's request or reply (NATS's own max_payload is 1 MiB by default). */
        maxMessageBytes: z.coerce.number().int().min(4096).max(8 * 1024 * 1024).default(1024 * 1024),
        /** Key-value bucket of the persisted state every instance shares (enrollments): the store with the cluster on. */
        storeBucket: z.string().regex(/^[A-Za-z0-9_-]{1,64}$/).default('voxgate-store'),
        /** The JetStream stream over `voxgate.events.>` that `Last-Event-ID` resumes from on any instance; oldest dropped first. */
        events: z
          .object({
            stream: z.string().regex(/^[A-Za-z0-9_-]{1,64}$/).default('VOXGATE_EVENTS'),
            maxMsgs: z.coerce.number().int().min(1).max(1e9).default(100_000),
            maxBytes: z.coerce.number().int().min(1024 * 1024).max(1024 ** 4).default(256 * 1024 * 1024),
            maxAgeMs: z.coerce.number().int().min(1000).max(30 * 86_400_000).default(3_600_000),
          })
          .prefault({}),
      })
      .prefault({}),
  })
  .refine((c) => !(c.voice?.mode === 'relay' && !c.voice.upstream?.url), {
    path: ['voice', 'upstream', 'url'],
    message: 'voice.mode "relay" needs the voice server\'s WebSocket URL',
    when: always,
  })
  .refine((c) => c.voice?.model === undefined || Object.hasOwn(c.assistant?.models ?? {}, c.voice.model), {
    path: ['voice', 'model'],
    message: 'voice.model must name one of assistant.models',
    when: always,
  })
  .refine((c) => !(c.voice?.upstream?.token !== undefined && c.voice.upstream.hmacSecret !== undefined), {
    path: ['voice', 'upstream', 'hmacSecret'],
    message: 'set either voice.upstream.token or voice.upstream.hmacSecret, not both',
    when: always,
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
  .refine((c) => !(typeof c.vision?.refreshMs === 'number' && typeof c.vision.tokenTtlSeconds === 'number' && c.vision.refreshMs >= c.vision.tokenTtlSeconds * 1000), {
    path: ['vision', 'refreshMs'],
    message: 'must be shorter than vision.tokenTtlSeconds: the fresh token has to arrive before the old one expires',
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
  .refine((c) => !(typeof c.assistant?.defaultModel === 'string' && isPlain(c.assistant.models) && !(c.assistant.defaultModel in c.assistant.models)), {
    path: ['assistant', 'defaultModel'],
    message: 'names no model in assistant.models',
    when: always,
  })
  .refine((c) => !(typeof c.assistant?.visionModel === 'string' && isPlain(c.assistant.models) && !(c.assistant.visionModel in c.assistant.models)), {
    path: ['assistant', 'visionModel'],
    message: 'names no model in assistant.models',
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
  GATEWAY_LOG_FORMAT: ['logFormat'],
  GATEWAY_VISION_URL: ['vision', 'url'],
  GATEWAY_VISION_REFRESH_MS: ['vision', 'refreshMs'],
  GATEWAY_VISION_SERVE: ['vision', 'serve'],
  GATEWAY_VISION_EXPLAINER_URL: ['vision', 'explainerUrl'],
  GATEWAY_VISION_EXPLAINER_TOKEN: ['vision', 'explainerToken'],
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
  GATEWAY_METRICS_HISTORY_INTERVAL_MS: ['metrics', 'historyIntervalMs'],
  GATEWAY_METRICS_HISTORY_SAMPLES: ['metrics', 'historySamples'],
  GATEWAY_CONSOLE_ENABLED: ['console', 'enabled'],
  GATEWAY_CONSOLE_DIR: ['console', 'dir'],
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
  GATEWAY_ASSISTANT_DEFAULT_MODEL: ['assistant', 'defaultModel'],
  GATEWAY_ASSISTANT_TOOLS: ['assistant', 'tools'],
  GATEWAY_ASSISTANT_MAX_TOOL_ROUNDS: ['assistant', 'maxToolRounds'],
  GATEWAY_ASSISTANT_TOOL_TIMEOUT_MS: ['assistant', 'toolTimeoutMs'],
  GATEWAY_ASSISTANT_CONFIRM: ['assistant', 'confirm'],
  GATEWAY_ASSISTANT_CONFIRM_TOOLS: ['assistant', 'confirmTools'],
  GATEWAY_VOICE_MODE: ['voice', 'mode'],
  GATEWAY_VOICE_UPSTREAM_URL: ['voice', 'upstream', 'url'],
  GATEWAY_VOICE_UPSTREAM_TOKEN: ['voice', 'upstream', 'token'],
  GATEWAY_VOICE_UPSTREAM_HMAC_SECRET: ['voice', 'upstream', 'hmacSecret'],
  GATEWAY_VOICE_CONNECT_TIMEOUT_MS: ['voice', 'upstream', 'connectTimeoutMs'],
  GATEWAY_VOICE_UDP_HOST: ['voice', 'udp', 'host'],
  GATEWAY_VOICE_UDP_PORT: ['voice', 'udp', 'port'],
  GATEWAY_VOICE_UDP_PUBLIC_HOST: ['voice', 'udp', 'publicHost'],
  GATEWAY_VOICE_MAX_SESSIONS: ['voice', 'maxSessions'],
  GATEWAY_VOICE_EXPOSE_HUB_TOOLS: ['voice', 'exposeHubTools'],
  GATEWAY_VOICE_HUB_TENANT: ['voice', 'hubTenant'],
  ...CONVERSE_ENV,
  GATEWAY_TRUST_PROXY: ['http', 'trustProxy'],
  GATEWAY_TLS_CERT_FILE: ['tls', 'certFile'],
  GATEWAY_TLS_KEY_FILE: ['tls', 'keyFile'],
  GATEWAY_TLS_CA_FILE: ['tls', 'caFile'],
  GATEWAY_TLS_MQTT_ENABLED: ['tls', 'mqttEnabled'],
  GATEWAY_TLS_MQTT_PORT: ['tls', 'mqttPort'],
  GATEWAY_TLS_ADVERTISE: ['tls', 'advertise'],
  GATEWAY_CLUSTER_ENABLED: ['cluster', 'enabled'],
  GATEWAY_CLUSTER_INSTANCE_ID: ['cluster', 'instanceId'],
  GATEWAY_CLUSTER_NATS_SERVERS: ['cluster', 'nats', 'servers'],
  GATEWAY_CLUSTER_NATS_CREDS_FILE: ['cluster', 'nats', 'credsFile'],
  GATEWAY_CLUSTER_HEARTBEAT_MS: ['cluster', 'heartbeatMs'],
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
  throw fail(
    r.error.issues.flatMap((i) =>
      // Every object is strict: a misspelled key is an error (with a suggestion), never silently ignored.
      i.code === 'unrecognized_keys' ? unknownKeyProblems(ConfigSchema, i.path, i.keys) : [`${safePath(i.path, merged)}: ${i.message}${origin(i.path)}`],
    ),
  );
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
