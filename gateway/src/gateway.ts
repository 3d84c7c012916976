import { createHmac } from 'node:crypto';
import { join } from 'node:path';
import { mintVisionToken, normalizeDeviceId, type VisionCapability } from '@voxgate/protocol';
import type { FastifyInstance } from 'fastify';
import type { Logger } from 'pino';
import { buildApi, metricsKeys } from './api/app.js';
import { startCluster, type Cluster } from './cluster/cluster.js';
import { Assistant } from './assistant/assistant.js';
import { startMetricsListener } from './api/health.js';
import type { Config } from './config.js';
import { FleetDirectory, type DeviceDirectory } from './devices/directory.js';
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
import { MetricsHistory } from './metrics-history.js';
import { SchemaValidators } from './schemas/validators.js';
import { resolveSecrets } from './secrets.js';
import { NatsKvStore } from './store/nats-kv-store.js';
import { SqliteStore } from './store/sqlite-store.js';
import type { Store } from './store/store.js';
import { GATEWAY_NAME, GATEWAY_VERSION } from './version.js';
import { httpExplainer, noExplainer } from './vision/explainer.js';
import { PhotoStore } from './vision/photo-store.js';
import { VISION_EXPLAIN_PATH, type VisionService } from './vision/routes.js';
import { assistantExplainer } from './assistant/vision.js';
import type { ConverseKit } from './voice/converse/converse.js';
import { startVoice, type Voice } from './voice/start.js';
import type { Server as TlsServer } from 'node:tls';
import { TlsCertificates } from './tls/certificates.js';
import { closeFailedHandshakes } from './tls/listener.js';

export interface Gateway {
  config: Config;
  log: Logger;
  registry: DeviceRegistry;
  /** Where callers find devices: the registry, and with the cluster on, the other instances' devices. */
  directory: DeviceDirectory;
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
  /** The LLM tool loop. */
  assistant: Assistant;
  /** Voice: the mode router, the relay and the conversation, the UDP socket (when a configured mode needs it). */
  voice: Voice | undefined;
  /** The MQTT-over-TLS port bound, when TLS is configured and `tls.mqttEnabled`. */
  mqttTlsPort: number | undefined;
  /** The certificate the TLS listeners serve (absent without `tls.certFile`). */
  tls: TlsCertificates | undefined;
  /** Reread the TLS files (SIGHUP); false when there is no TLS or the new files do not load (the old certificate stays). */
  reloadTls(): boolean;
  /** This instance's part of the cluster, when `cluster.enabled`. */
  cluster: Cluster | undefined;
  close(): Promise<void>;
}

/** Start every part: HTTP API + device WebSocket on one port, the embedded MQTT broker on another. */
export async function startGateway(config: Config, opts: { log?: Logger; converseKit?: () => ConverseKit } = {}): Promise<Gateway> {
  const log = opts.log ?? createLogger(config.logLevel, undefined, config.logFormat);
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
  // The URL devices post photos to: configured, or this gateway's own endpoint when its public URL is known.
  const visionUrl = config.vision.url ?? (config.vision.serve && config.http.publicUrl ? new URL(VISION_EXPLAIN_PATH, config.http.publicUrl).toString() : undefined);
  const vision = (deviceId: string): VisionCapability | undefined =>
    visionUrl ? { url: visionUrl, token: mintVisionToken(visionKey, deviceId, Date.now() / 1000 + config.vision.tokenTtlSeconds) } : undefined;
  const schemaValidators = new SchemaValidators({
    limits: config.schemas,
    maxCached: config.schemas.validatorCacheSize,
    onUnenforcedPattern: (reason) => metrics.patternsUnenforced.inc({ reason }),
    onSize: (size) => metrics.schemaValidators.set(size),
  });
  const voice: Voice | undefined = await startVoice(config.voice, metrics, log, opts.converseKit ? { kit: opts.converseKit } : {});
  const registry = new DeviceRegistry({
    voice: voice.hook,
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
      setupRetryMinMs: config.session.setupRetryMinMs,
      setupRetryMaxMs: config.session.setupRetryMaxMs,
      setupMaxErrors: config.session.setupMaxErrors,
      visionRefreshMs: visionUrl ? (config.vision.refreshMs ?? Math.floor(config.vision.tokenTtlSeconds * 800)) : undefined,
    },
  });
  // With the cluster on, persisted state is shared by every instance (a KV bucket), not this data dir's.
  const store: Store = config.cluster.enabled
    ? await NatsKvStore.open(config.cluster, log).catch((e: unknown) => {
        voice?.close();
        throw e;
      })
    : new SqliteStore(join(config.dataDir, 'voxgate.db'));
  let enrollment: Enrollment | undefined;
  try {
    await voice?.useStore(store);
    enrollment = config.deviceAuth === 'open' ? undefined : await openEnrollment(config, secrets.deviceSecret, store, log, metrics, registry);
  } catch (e) {
    voice?.close();
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

  // Callers find devices here: this instance's registry, and the cluster's devices once it has joined.
  const directory = new FleetDirectory(registry);
  const mcpServers = resolveServers(config.mcp);
  const hub = new McpHub({
    log,
    metrics,
    registry: directory,
    bus,
    servers: mcpServers.servers,
    enabled: mcpServers.enabled,
    deviceTools: config.mcp.deviceTools,
    deviceCallTimeoutMs: config.calls.defaultTimeoutMs,
    devicesListMax: config.mcp.devicesListMax,
    settings: {
      connectTimeoutMs: config.mcp.connectTimeoutMs,
      callTimeoutMs: config.mcp.callTimeoutMs,
      killGraceMs: config.mcp.killGraceMs,
      maxRestarts: config.mcp.maxRestarts,
      restartBaseDelayMs: config.mcp.restartBaseDelayMs,
      restartMaxDelayMs: config.mcp.restartMaxDelayMs,
      restartResetMs: config.mcp.restartResetMs,
      maxResultBytes: config.mcp.maxResultBytes,
      maxTools: config.mcp.maxToolsPerServer,
      allowPrivateNetwork: config.mcp.allowPrivateNetwork,
      logLevel: config.mcp.upstreamLogLevel,
      logRatePerSecond: config.mcp.upstreamLogRatePerSecond,
      clientInfo: { name: GATEWAY_NAME, version: GATEWAY_VERSION },
      schemaLimits: config.schemas,
      validators: schemaValidators,
    },
  });
  // The hub needs the registry, which needs the relay: the relay learns of the hub last.
  voice?.useHub(hub);
  const tenants = new Map(Object.entries(config.apiKeyTenants));
  const assistant = new Assistant({ config: config.assistant, hub, log, metrics });
  voice?.useAssistant(assistant, bus);
  let mcpEndpoint: McpEndpoint | undefined;

  let stopping = false;
  let mqtt: MqttLink | undefined;
  let metricsListener: { port: number; close(): Promise<void> } | undefined;
  let cluster: Cluster | undefined;
  const visionService: VisionService | undefined = config.vision.serve
    ? {
        visionKey,
        store: new PhotoStore(join(config.dataDir, 'photos'), { perDevice: config.vision.photosPerDevice, total: config.vision.maxStoredPhotos }),
        // An external explainer when configured, else the assistant's vision model, else a clear "none" answer.
        explainer: config.vision.explainerUrl
          ? httpExplainer(config.vision.explainerUrl, { token: config.vision.explainerToken, timeoutMs: config.vision.explainerTimeoutMs })
          : (assistantExplainer(assistant) ?? noExplainer),
        maxPhotoBytes: config.vision.maxPhotoBytes,
        uploadsPerMinute: config.vision.uploadsPerMinute,
        bus,
        metrics,
        log: log.child({ component: 'vision' }),
      }
    : undefined;
  const history = new MetricsHistory(metrics, config.metrics.historyIntervalMs, config.metrics.historySamples, Date.now, log.child({ component: 'metrics' }));
  const http = await buildApi({
    ...(visionService ? { vision: visionService } : {}),
    config,
    log,
    registry: directory,
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
    assistant,
    history,
    https: tls?.options,
    deviceSettings: { voiceModes: voice.modes, effectiveVoiceMode: (id) => voice.modeOf(id) },
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
    // Joined before the listeners open, so the first device's presence reaches the other instances.
    if (config.cluster.enabled) {
      cluster = await startCluster({ config: config.cluster, calls: config.calls, registry, bus, log, metricsRegistry: metrics.registry, replayLimit: config.events.bufferSize });
      directory.attach(cluster.devices);
    }
    // Both listeners start together, so a start that fails reports every port that failed, not the first.
    const [mqttStart, httpStart] = await Promise.allSettled([
      config.mqtt.enabled ? startMqttLink({
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
      }) : Promise.resolve(undefined),
      http.listen({ host: config.http.host, port: config.http.port }),
    ]);
    if (mqttStart.status === 'fulfilled') mqtt = mqttStart.value;
    const failed = [
      ...(httpStart.status === 'rejected' ? [listenProblem('HTTP', config.http.host, config.http.port, httpStart.reason)] : []),
      ...(mqttStart.status === 'rejected' ? [listenProblem('MQTT', config.mqtt.host, config.mqtt.port, mqttStart.reason)] : []),
    ];
    if (failed.length) throw new Error(`cannot listen: ${failed.join('; ')}`);
    if (mqtt) fanOutToMqtt(bus, mqtt.publish);
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
    assistant.close();
    await metricsListener?.close();
    voice?.close();
    ws.close(CLOSE_SHUTDOWN, 'start failed');
    await mqtt?.close();
    await http.close();
    await hub.close();
    await cluster?.close();
    await store.close();
    throw e;
  }
  history.start();
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
      history.stop();
      log.info('shutting down: refusing new work, closing devices');
      for (const s of registry.sessions()) s.failAll(new GatewayError('SHUTTING_DOWN', 'the gateway is shutting down'));
      // Calls to hosted servers in flight answer SHUTTING_DOWN before any connection closes.
      await hub.drain();
      // Wait until each device socket has closed (close handshake done, or terminated a second later): a
      // process that exits before that cuts off the close frame, and the device sees 1006, not 1001.
      const devicesClosed = Promise.all([...ws.wss.clients].map((c) => new Promise((resolve) => (c.readyState === c.CLOSED ? resolve(undefined) : c.once('close', resolve)))));
      assistant.close();
      voice?.close();
      ws.close(CLOSE_SHUTDOWN, 'gateway shutting down');
      await mcpEndpoint?.close();
      const grace = new Promise<void>((resolve) => setTimeout(resolve, config.shutdownGraceMs).unref());
      // Children are always awaited (TERM, then KILL after mcp.killGraceMs): no orphan outlives close().
      // hub.close() also ends servers still connecting: a stuck initialize never holds shutdown up.
      await Promise.all([Promise.race([Promise.all([devicesClosed, http.close(), mqtt?.close(), metricsListener?.close()]), grace]), hub.close()]);
      await cluster?.close();
      await store.close();
      log.info('stopped');
    })());

  return {
    config,
    log,
    registry,
    directory,
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
    assistant,
    voice,
    mqttTlsPort: mqtt?.tlsPort,
    tls,
    reloadTls: () => {
      if (tls) return tls.reload();
      log.warn('TLS reload asked, but no tls.certFile is configured; nothing to reload');
      return false;
    },
    cluster,
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
      for (const s of registry.sessions()) if (s.deviceId === deviceId) s.close(CLOSE_REVOKED, 'credentials revoked');
    },
  });
  log.info({ policy: e.policy }, 'device enrollment');
  return enrollment;
}

/** "HTTP 0.0.0.0:8000 is already in use (EADDRINUSE)": which listener, where, and why, for the person starting it. */
function listenProblem(listener: string, host: string, port: number, err: unknown): string {
  const code = (err as NodeJS.ErrnoException | undefined)?.code;
  const why = code === 'EADDRINUSE' ? 'is already in use' : code === 'EACCES' ? 'needs more privileges' : `failed: ${err instanceof Error ? err.message : String(err)}`;
  return `${listener} ${host}:${port} ${why}${code ? ` (${code})` : ''}`;
}
