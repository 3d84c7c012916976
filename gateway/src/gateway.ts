import { createHmac } from 'node:crypto';
import { mintVisionToken, type VisionCapability } from '@voxgate/protocol';
import type { FastifyInstance } from 'fastify';
import type { Logger } from 'pino';
import { buildApi } from './api/app.js';
import type { Config } from './config.js';
import { DeviceRegistry } from './devices/registry.js';
import { ToolsPageCache } from './devices/tools-page-cache.js';
import { CLOSE_SHUTDOWN } from './devices/link.js';
import { GatewayError } from './errors.js';
import type { McpEndpoint } from './facade/mcp-endpoint.js';
import { resolveServers } from './hub/config.js';
import { McpHub } from './hub/hub.js';
import { EventBus } from './events/bus.js';
import { fanOutToMqtt } from './events/mqtt-fanout.js';
import { attachWebSocketLink } from './links/ws.js';
import { startMqttLink, type MqttLink } from './links/mqtt.js';
import { createLogger } from './log.js';
import { createMetrics, type Metrics } from './metrics.js';
import { SchemaValidators } from './schemas/validators.js';
import { resolveSecrets } from './secrets.js';
import { GATEWAY_NAME, GATEWAY_VERSION } from './version.js';

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
  close(): Promise<void>;
}

/** Start every part: HTTP API + device WebSocket on one port, the embedded MQTT broker on another. */
export async function startGateway(config: Config, opts: { log?: Logger } = {}): Promise<Gateway> {
  const log = opts.log ?? createLogger(config.logLevel);
  const secrets = resolveSecrets(config.dataDir, { apiKeys: config.apiKeys, deviceSecret: config.deviceSecret });
  const visionKey = createHmac('sha256', secrets.deviceSecret).update('voxgate-vision').digest('base64url');
  if (config.deviceAuth === 'open') log.warn('device auth is "open": any device may connect. Set GATEWAY_DEVICE_AUTH=hmac (or token) in production.');

  const metrics = createMetrics();
  const bus = new EventBus(config.events.bufferSize, metrics, (err) => log.error({ err }, 'event listener failed'));
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
  const auth = { mode: config.deviceAuth, tokens: config.deviceTokens, secret: secrets.deviceSecret, tokenMaxAgeSeconds: config.deviceTokenMaxAgeSeconds };

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
      maxMessageBytes: Math.max(config.mcp.maxResultBytes * 2, 1024 * 1024),
      maxTools: config.mcp.maxToolsPerServer,
      allowPrivateNetwork: config.mcp.allowPrivateNetwork,
      clientInfo: { name: GATEWAY_NAME, version: GATEWAY_VERSION },
      schemaLimits: config.schemas,
      validators: schemaValidators,
    },
  });
  const tenants = new Map(Object.entries(config.apiKeyTenants));
  let mcpEndpoint: McpEndpoint | undefined;

  let stopping = false;
  let mqtt: MqttLink | undefined;
  const http = await buildApi({
    config,
    log,
    registry,
    bus,
    metrics,
    apiKeys: () => secrets.apiKeys,
    deviceSecret: secrets.deviceSecret,
    mqttPort: () => mqtt?.port ?? config.mqtt.port,
    ready: () => !stopping && http.server.listening && (!config.mqtt.enabled || mqtt !== undefined),
    version: GATEWAY_VERSION,
    hub,
    hubEnabled: mcpServers.enabled,
    tenantOf: (key) => tenants.get(key),
    onMcpEndpoint: (e) => (mcpEndpoint = e),
  });
  const ws = attachWebSocketLink(http.server, {
    path: config.ws.path,
    maxPayloadBytes: config.ws.maxPayloadBytes,
    heartbeatMs: config.ws.heartbeatMs,
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
        auth,
        apiKeys: () => secrets.apiKeys,
        registry,
        log: log.child({ component: 'mqtt' }),
        metrics,
      });
      fanOutToMqtt(bus, mqtt.publish);
    }
    await http.listen({ host: config.http.host, port: config.http.port });
  } catch (e) {
    ws.close(CLOSE_SHUTDOWN, 'start failed');
    await mqtt?.close();
    await http.close();
    await hub.close();
    throw e;
  }
  // Upstream servers connect after HTTP is up, in the background: a slow or broken one never delays start.
  const hubStarted = hub.start();
  const address = http.server.address();
  const httpPort = typeof address === 'object' && address ? address.port : config.http.port;
  log.info({ http: `${config.http.host}:${httpPort}`, mqtt: mqtt ? `${config.mqtt.host}:${mqtt.port}` : 'disabled', deviceAuth: config.deviceAuth }, 'voxgate started');

  let closing: Promise<void> | undefined;
  const close = () =>
    (closing ??= (async () => {
      stopping = true;
      log.info('shutting down: refusing new work, closing devices');
      for (const s of registry.sessions()) s.failAll(new GatewayError('SHUTTING_DOWN', 'the gateway is shutting down'));
      ws.close(CLOSE_SHUTDOWN, 'gateway shutting down');
      await mcpEndpoint?.close();
      const grace = new Promise<void>((resolve) => setTimeout(resolve, config.shutdownGraceMs).unref());
      // Children are always awaited (TERM, then KILL after mcp.killGraceMs): no orphan outlives close().
      await Promise.all([Promise.race([Promise.all([http.close(), mqtt?.close()]), grace]), hubStarted.then(() => hub.close())]);
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
    apiKeys: secrets.apiKeys,
    deviceSecret: secrets.deviceSecret,
    generatedApiKey: secrets.generatedApiKey,
    visionKey,
    hub,
    hubStarted,
    close,
  };
}
