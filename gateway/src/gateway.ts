import { createHmac } from 'node:crypto';
import { join } from 'node:path';
import { mintVisionToken, normalizeDeviceId, type VisionCapability } from '@voxgate/protocol';
import type { FastifyInstance } from 'fastify';
import type { Logger } from 'pino';
import { buildApi, metricsKeys } from './api/app.js';
import { startMetricsListener } from './api/health.js';
import type { Config } from './config.js';
import { DeviceRegistry } from './devices/registry.js';
import { CLOSE_REVOKED, CLOSE_SHUTDOWN } from './devices/link.js';
import { EnrollmentCredentials } from './enrollment/credentials.js';
import { Enrollment } from './enrollment/enrollment.js';
import { ToolsPageCache } from './devices/tools-page-cache.js';
import { GatewayError } from './errors.js';
import type { McpEndpoint } from './facade/mcp-endpoint.js';
import { resolveServers } from './hub/config.js';
import { McpHub } from './hub/hub.js';
import { EventBus } from './events/bus.js';
import { fanOutToMqtt } from './events/mqtt-fanout.js';
import { attachWebSocketLink } from './links/ws.js';
import { startMqttLink, type MqttLink } from './links/mqtt.js';
import { countRequestTimeouts, limitConnections, openFileLimit } from './links/connection-limits.js';
import { createLogger } from './log.js';
import { createMetrics, type Metrics } from './metrics.js';
import { SchemaValidators } from './schemas/validators.js';
import { resolveSecrets } from './secrets.js';
import { SqliteStore } from './store/sqlite-store.js';
import type { Store } from './store/store.js';
import { GATEWAY_NAME, GATEWAY_VERSION } from './version.js';
import type { Server as TlsServer } from 'node:tls';
import { TlsCertificates } from './tls/certificates.js';
import { closeFailedHandshakes } from './tls/listener.js';

export interface Gateway {
  config: Config;
  log: Logger;
  registry: DeviceRegistry;
  bus: EventBus;
  metrics: Metrics;
  http: FastifyInstance;
  mqtt: MqttLink | undefined;
  httpPort: number;
  mqttPort: number | undefined;
  /** The port of the separate /metrics listener, when `metrics.port` is set. */
  metricsPort: number | undefined;
  apiKeys: readonly string[];
  deviceSecret: string;
  /** Set when this start generated the first API key; print it once. */
  generatedApiKey: string | undefined;
  /** Key that signs vision tokens (derived from the device secret). */
  visionKey: string;
  /** Devices and upstream MCP servers as one tool namespace. */
  hub: McpHub;
  /** Settles when every upstream server has connected or failed (start does not wait for it). */
  hubStarted: Promise<void>;
  /** Persisted state (`<dataDir>/voxgate.db`). */
  store: Store;
  /** Which devices may join (absent when device auth is open). */
  enrollment: Enrollment | undefined;
  /** The MQTT-over-TLS port bound, when TLS is configured and `tls.mqttEnabled`. */
  mqttTlsPort: number | undefined;
  /** The certificate the TLS listeners serve (absent without `tls.certFile`). */
  tls: TlsCertificates | undefined;
  /** Reread the TLS files (SIGHUP); false when there is no TLS or the new files do not load (the old certificate stays). */
  reloadTls(): boolean;
  close(): Promise<void>;
}

/** Start every part: HTTP API + device WebSocket on one port, the embedded MQTT broker on another. */
export async function startGateway(config: Config, opts: { log?: Logger } = {}): Promise<Gateway> {
  const log = opts.log ?? createLogger(config.logLevel);
  const secrets = resolveSecrets(config.dataDir, { apiKeys: config.apiKeys, deviceSecret: config.deviceSecret });
  if (secrets.tightenedFrom) log.warn({ file: `${config.dataDir}/secrets.json`, previousMode: secrets.tightenedFrom }, 'the secrets file was readable by group or others; its mode is now 0600');
  const visionKey = createHmac('sha256', secrets.deviceSecret).update('voxgate-vision').digest('base64url');
  if (config.deviceAuth === 'open') log.warn('device auth is "open": any device may connect. Set GATEWAY_DEVICE_AUTH=hmac (or token) in production.');

  const metrics = createMetrics();
  // Read first: a missing or mismatched certificate stops the start before anything listens.
  const tls = config.tls.certFile !== undefined && config.tls.keyFile !== undefined ? new TlsCertificates({ certFile: config.tls.certFile, keyFile: config.tls.keyFile, caFile: config.tls.caFile }, log.child({ component: 'tls' }), metrics) : undefined;
  const bus = new EventBus({
    bufferSize: config.events.bufferSize,
    metrics,
    log: log.child({ component: 'events' }),
    deviceRate: { ratePerSecond: config.events.devicePerSecond, burst: config.events.deviceBurst },
  });
  const vision = (deviceId: string): VisionCapability | undefined =>
    config.vision.url ? { url: config.vision.url, token: mintVisionToken(visionKey, deviceId, Date.now() / 1000 + config.vision.tokenTtlSeconds) } : undefined;
  const schemaValidators = new SchemaValidators({
    limits: config.schemas,
    maxCached: config.schemas.validatorCacheSize,
    onUnenforcedPattern: (reason) => metrics.patternsUnenforced.inc({ reason }),
    onSize: (size) => metrics.schemaValidators.set(size),
  });
  const registry = new DeviceRegistry({
    maxKnownDevices: config.devices.maxKnown,
    log,
    bus,
    metrics,
    vision,
    pages: new ToolsPageCache(),
    validators: schemaValidators,
    settings: {
      requestTimeoutMs: config.session.requestTimeoutMs,
      maxToolPages: config.session.maxToolPages,
      maxTools: config.session.maxTools,
      defaultCallTimeoutMs: config.calls.defaultTimeoutMs,
      maxCallTimeoutMs: config.calls.maxTimeoutMs,
      queueLimit: config.calls.queueLimit,
      concurrency: config.calls.concurrency,
      clientInfo: { name: GATEWAY_NAME, version: GATEWAY_VERSION },
      frameLimits: config.frames,
      schemaLimits: config.schemas,
    },
  });
  const store = new SqliteStore(join(config.dataDir, 'voxgate.db'));
  let enrollment: Enrollment | undefined;
  try {
    enrollment = config.deviceAuth === 'open' ? undefined : await openEnrollment(config, secrets.deviceSecret, store, log, metrics, registry);
  } catch (e) {
    await store.close();
    throw e;
  }
  const auth = {
    mode: config.deviceAuth,
    tokens: config.deviceTokens,
    secret: secrets.deviceSecret,
    tokenMaxAgeSeconds: config.deviceTokenMaxAgeSeconds,
    enrollment,
    liveCredential: (deviceId: string) => registry.liveCredential(deviceId),
  };

  const mcpServers = resolveServers(config.mcp);
  const hub = new McpHub({
    log,
    metrics,
    registry,
    bus,
    servers: mcpServers.servers,
    enabled: mcpServers.enabled,
    deviceTools: config.mcp.deviceTools,
    deviceCallTimeoutMs: config.calls.defaultTimeoutMs,
    settings: {
      connectTimeoutMs: config.mcp.connectTimeoutMs,
      callTimeoutMs: config.mcp.callTimeoutMs,
      killGraceMs: config.mcp.killGraceMs,
      maxRestarts: config.mcp.maxRestarts,
      restartBaseDelayMs: config.mcp.restartBaseDelayMs,
      restartMaxDelayMs: config.mcp.restartMaxDelayMs,
      restartResetMs: config.mcp.restartResetMs,
      maxResultBytes: config.mcp.maxResultBytes,
      maxMessageBytes: config.mcp.maxResultBytes,
      maxTools: config.mcp.maxToolsPerServer,
      allowPrivateNetwork: config.mcp.allowPrivateNetwork,
      logLevel: config.mcp.upstreamLogLevel,
      logRatePerSecond: config.mcp.upstreamLogRatePerSecond,
      clientInfo: { name: GATEWAY_NAME, version: GATEWAY_VERSION },
      schemaLimits: config.schemas,
      validators: schemaValidators,
    },
  });
  const tenants = new Map(Object.entries(config.apiKeyTenants));
  let mcpEndpoint: McpEndpoint | undefined;

  let stopping = false;
  let mqtt: MqttLink | undefined;
  let metricsListener: { port: number; close(): Promise<void> } | undefined;
  const http = await buildApi({
    config,
    log,
    registry,
    bus,
    metrics,
    apiKeys: () => secrets.apiKeys,
    deviceSecret: secrets.deviceSecret,
    mqttPort: () => mqtt?.port ?? config.mqtt.port,
    mqttTlsPort: () => mqtt?.tlsPort,
    ready: () => !stopping && http.server.listening && (!config.mqtt.enabled || mqtt !== undefined),
    version: GATEWAY_VERSION,
    hub,
    hubEnabled: mcpServers.enabled,
    tenantOf: (key) => tenants.get(key),
    onMcpEndpoint: (e) => (mcpEndpoint = e),
    enrollment,
    https: tls?.options,
  });
  if (tls) {
    // buildApi made an https.Server (a tls.Server) for these options; fastify types it as http.Server.
    const server = http.server as unknown as TlsServer;
    tls.serve(server);
    closeFailedHandshakes(server, 'http', metrics, log.child({ component: 'http' }));
  }
  limitConnections(http.server, 'http', config.http, metrics, log.child({ component: 'http' }));
  countRequestTimeouts(http.server, metrics);
  warnIfOverOpenFileLimit(config, log);
  const ws = attachWebSocketLink(http.server, {
    path: config.ws.path,
    maxPayloadBytes: config.ws.maxPayloadBytes,
    heartbeatMs: config.ws.heartbeatMs,
    maxConnections: config.ws.maxConnections,
    auth,
    registry,
    log,
    metrics,
  });
  try {
    if (config.mqtt.enabled) {
      mqtt = await startMqttLink({
        host: config.mqtt.host,
        port: config.mqtt.port,
        maxPacketBytes: config.mqtt.maxPacketBytes,
        maxConnections: config.mqtt.maxConnections,
        maxConnectionsPerAddress: config.mqtt.maxConnectionsPerAddress,
        connectTimeoutMs: config.mqtt.connectTimeoutMs,
        keepalive: { minSeconds: config.mqtt.keepaliveMinSeconds, maxSeconds: config.mqtt.keepaliveMaxSeconds },
        auth,
        apiKeys: () => secrets.apiKeys,
        registry,
        log: log.child({ component: 'mqtt' }),
        metrics,
        tls: tls && config.tls.mqttEnabled ? { port: config.tls.mqttPort, certificates: tls } : undefined,
      });
      fanOutToMqtt(bus, mqtt.publish);
    }
    await http.listen({ host: config.http.host, port: config.http.port });
    if (config.metrics.port !== undefined) {
      metricsListener = await startMetricsListener({
        host: config.metrics.host,
        port: config.metrics.port,
        metrics,
        // On its own listener the address is the protection; a metrics key, when set, is required too.
        keys: config.metrics.key === undefined ? undefined : metricsKeys({ config, apiKeys: () => secrets.apiKeys }),
        log: log.child({ component: 'metrics' }),
      });
    }
  } catch (e) {
    await metricsListener?.close();
    ws.close(CLOSE_SHUTDOWN, 'start failed');
    await mqtt?.close();
    await http.close();
    await hub.close();
    await store.close();
    throw e;
  }
  // Upstream servers connect after HTTP is up, in the background: a slow or broken one never delays start.
  const hubStarted = hub.start();
  const address = http.server.address();
  const httpPort = typeof address === 'object' && address ? address.port : config.http.port;
  log.info(
    {
      http: `${config.http.host}:${httpPort}`,
      ...(tls ? { tls: true } : {}),
      mqtt: mqtt ? `${config.mqtt.host}:${mqtt.port}` : 'disabled',
      ...(mqtt?.tlsPort !== undefined ? { mqttTls: `${config.mqtt.host}:${mqtt.tlsPort}` } : {}),
      deviceAuth: config.deviceAuth,
    },
    'voxgate started',
  );

  let closing: Promise<void> | undefined;
  const close = () =>
    (closing ??= (async () => {
      stopping = true;
      log.info('shutting down: refusing new work, closing devices');
      for (const s of registry.sessions()) s.failAll(new GatewayError('SHUTTING_DOWN', 'the gateway is shutting down'));
      // Calls to hosted servers in flight answer SHUTTING_DOWN before any connection closes.
      await hub.drain();
      // Wait until each device socket has closed (close handshake done, or terminated a second later): a
      // process that exits before that cuts off the close frame, and the device sees 1006, not 1001.
      const devicesClosed = Promise.all([...ws.wss.clients].map((c) => new Promise((resolve) => (c.readyState === c.CLOSED ? resolve(undefined) : c.once('close', resolve)))));
      ws.close(CLOSE_SHUTDOWN, 'gateway shutting down');
      await mcpEndpoint?.close();
      const grace = new Promise<void>((resolve) => setTimeout(resolve, config.shutdownGraceMs).unref());
      // Children are always awaited (TERM, then KILL after mcp.killGraceMs): no orphan outlives close().
      await Promise.all([Promise.race([Promise.all([devicesClosed, http.close(), mqtt?.close(), metricsListener?.close()]), grace]), hubStarted.then(() => hub.close())]);
      await store.close();
      log.info('stopped');
    })());

  return {
    config,
    log,
    registry,
    bus,
    metrics,
    http,
    mqtt,
    httpPort,
    mqttPort: mqtt?.port,
    metricsPort: metricsListener?.port,
    apiKeys: secrets.apiKeys,
    deviceSecret: secrets.deviceSecret,
    generatedApiKey: secrets.generatedApiKey,
    visionKey,
    hub,
    hubStarted,
    store,
    enrollment,
    mqttTlsPort: mqtt?.tlsPort,
    tls,
    reloadTls: () => {
      if (tls) return tls.reload();
      log.warn('TLS reload asked, but no tls.certFile is configured; nothing to reload');
      return false;
    },
    close,
  };
}

/** Each socket is a descriptor: caps whose sum passes the process's limit let one port starve the other. */
function warnIfOverOpenFileLimit(config: Config, log: Logger): void {
  const limit = openFileLimit();
  const sockets = config.http.maxConnections + (config.mqtt.enabled ? config.mqtt.maxConnections : 0);
  // Files, child processes' pipes, DNS and upstream connections need descriptors too.
  const headroom = 512;
  if (limit !== undefined && sockets + headroom > limit)
    log.warn(
      { openFileLimit: limit, httpMaxConnections: config.http.maxConnections, mqttMaxConnections: config.mqtt.enabled ? config.mqtt.maxConnections : 0, headroom },
      'connection caps exceed the open-file limit: raise `ulimit -n` or lower http.maxConnections / mqtt.maxConnections',
    );
}

async function openEnrollment(config: Config, deviceSecret: string, store: Store, log: Logger, metrics: Metrics, registry: DeviceRegistry): Promise<Enrollment> {
  const e = config.enrollment;
  const enrollment = await Enrollment.open({
    policy: e.policy,
    allowlist: new Set(e.allowlist.map((id) => normalizeDeviceId(id)!)),
    pendingTtlSeconds: e.pendingTtlSeconds,
    maxPending: e.maxPending,
    maxPendingPerDevice: e.maxPendingPerDevice,
    credentials: new EnrollmentCredentials(deviceSecret, config.mqtt.group),
    store,
    log: log.child({ component: 'enrollment' }),
    metrics,
    // Revoked credentials must not keep a live connection.
    onRevoked: (deviceId) => {
      for (const s of registry.sessions()) if (s.deviceId === deviceId) s.link.close(CLOSE_REVOKED, 'credentials revoked');
    },
  });
  log.info({ policy: e.policy }, 'device enrollment');
  return enrollment;
}
