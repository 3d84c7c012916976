import { createHmac } from 'node:crypto';
import { join } from 'node:path';
import type { FastifyInstance } from 'fastify';
import type { Logger } from 'pino';
import { metricsKeys } from './api/app.js';
import { startMetricsListener } from './api/health.js';
import { createHttp } from './api/start.js';
import { Assistant } from './assistant/assistant.js';
import { connectCluster, startCluster, type Cluster } from './cluster/cluster.js';
import type { Config } from './config.js';
import { createRegistry } from './devices/create.js';
import { CLOSE_REVOKED, CLOSE_SHUTDOWN } from './devices/link.js';
import type { DeviceRegistry } from './devices/registry.js';
import type { Enrollment } from './enrollment/enrollment.js';
import { openEnrollment } from './enrollment/open.js';
import { GatewayError } from './errors.js';
import { EventBus } from './events/bus.js';
import { fanOutToMqtt } from './events/mqtt-fanout.js';
import { createHub } from './hub/create.js';
import { hubEnabled } from './hub/config.js';
import type { McpHub } from './hub/hub.js';
import { Lifecycle, once, within } from './lifecycle.js';
import { openListeners, warnIfOverOpenFileLimit } from './links/listeners.js';
import type { MqttLink, MqttLinkOptions } from './links/mqtt.js';
import { attachWebSocketLink } from './links/ws.js';
import { createLogger } from './log.js';
import { createMetrics, type Metrics } from './metrics.js';
import { MetricsHistory } from './metrics-history.js';
import { SchemaValidators } from './schemas/validators.js';
import { resolveSecrets } from './secrets.js';
import { openStore } from './store/open.js';
import type { Store } from './store/store.js';
import { TlsCertificates } from './tls/certificates.js';
import { GATEWAY_VERSION } from './version.js';
import { visionOffer, visionService } from './vision/start.js';
import { startVoice, type Voice } from './voice/start.js';

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
  /** The LLM tool loop. */
  assistant: Assistant;
  /** The voice relay (and its UDP socket), when voice.mode is "relay". */
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

/**
 * Start every part: HTTP API + device WebSocket on one port, the embedded MQTT broker on another. Each part
 * registers its closer as it opens (a Lifecycle stack), so a start that fails closes what it opened, and
 * close() runs the reverse of the start: drain hub calls, close devices, listeners, cluster, store.
 */
export async function startGateway(config: Config, opts: { log?: Logger } = {}): Promise<Gateway> {
  const log = opts.log ?? createLogger(config.logLevel, undefined, config.logFormat);
  const secrets = resolveSecrets(config.dataDir, { apiKeys: config.apiKeys, deviceSecret: config.deviceSecret });
  if (secrets.tightenedFrom) log.warn({ file: `${config.dataDir}/secrets.json`, previousMode: secrets.tightenedFrom }, 'the secrets file was readable by group or others; its mode is now 0600');
  if (config.deviceAuth === 'open') log.warn('device auth is "open": any device may connect. Set GATEWAY_DEVICE_AUTH=hmac (or token) in production.');
  const life = new Lifecycle(log);
  try {
    return await wire(config, log, secrets, life);
  } catch (e) {
    await life.close().catch(() => undefined);
    throw e;
  }
}

type Secrets = ReturnType<typeof resolveSecrets>;

async function wire(config: Config, log: Logger, secrets: Secrets, life: Lifecycle): Promise<Gateway> {
  const visionKey = createHmac('sha256', secrets.deviceSecret).update('voxgate-vision').digest('base64url');
  const metrics = createMetrics();
  // Read first: a missing or mismatched certificate stops the start before anything listens.
  const tls = config.tls.certFile !== undefined && config.tls.keyFile !== undefined ? new TlsCertificates({ certFile: config.tls.certFile, keyFile: config.tls.keyFile, caFile: config.tls.caFile }, log.child({ component: 'tls' }), metrics) : undefined;
  const clusterLink = config.cluster.enabled ? await connectCluster(config.cluster, { log, metricsRegistry: metrics.registry, replayLimit: config.events.bufferSize }) : undefined;
  if (clusterLink) life.defer('cluster connection', () => clusterLink.close());
  const bus = new EventBus({ bufferSize: config.events.bufferSize, metrics, log: log.child({ component: 'events' }), deviceRate: { ratePerSecond: config.events.devicePerSecond, burst: config.events.deviceBurst }, replaySource: clusterLink?.replay });
  const validators = new SchemaValidators({ limits: config.schemas, maxCached: config.schemas.validatorCacheSize, onUnenforcedPattern: (reason) => metrics.patternsUnenforced.inc({ reason }), onSize: (size) => metrics.schemaValidators.set(size) });
  const voice: Voice | undefined = config.voice.mode === 'relay' ? await startVoice(config.voice, metrics, log) : undefined;
  const closeVoice = once(() => voice?.close());
  life.defer('voice', closeVoice);
  const vision = visionOffer(config.vision, config.http.publicUrl, visionKey);
  const registry = createRegistry({ ...(voice ? { voice: voice.relay } : {}), log, bus, metrics, vision: vision.capability, validators }, { ...config, visionRefreshMs: vision.refreshMs });
  const store = await openStore(config.cluster, config.dataDir, log);
  life.defer('store', () => store.close());
  const onRevoked = (deviceId: string) => {
    for (const s of registry.sessions()) if (s.deviceId === deviceId) s.link.close(CLOSE_REVOKED, 'credentials revoked');
  };
  const enrollment = config.deviceAuth === 'open' ? undefined : await openEnrollment({ deviceSecret: secrets.deviceSecret, mqttGroup: config.mqtt.group, store, log, metrics, onRevoked }, config.enrollment);
  const auth = { mode: config.deviceAuth, tokens: config.deviceTokens, secret: secrets.deviceSecret, tokenMaxAgeSeconds: config.deviceTokenMaxAgeSeconds, enrollment, liveCredential: (id: string) => registry.liveCredential(id) };
  const hub = createHub({ log, metrics, registry, bus, validators }, config.mcp, { schemas: config.schemas, deviceCallTimeoutMs: config.calls.defaultTimeoutMs });
  const closeHub = once(() => hub.close());
  life.defer('hub', closeHub);
  // The hub needs the registry, which needs the relay: the relay learns of the hub last.
  voice?.relay.useHub(hub);
  const assistant = new Assistant({ config: config.assistant, hub, log, metrics });
  const closeAssistant = once(() => assistant.close());
  life.defer('assistant', closeAssistant);
  const tenants = new Map(Object.entries(config.apiKeyTenants));
  const history = new MetricsHistory(metrics, config.metrics.historyIntervalMs, config.metrics.historySamples, Date.now, log.child({ component: 'metrics' }));
  let stopping = false;
  let mqtt: MqttLink | undefined;
  const vService = visionService({ visionKey, dataDir: config.dataDir, assistant, bus, metrics, log }, config.vision);
  const http: FastifyInstance = await createHttp(
    {
      settings: { ...config, mcpEndpoint: config.mcp.endpoint, firmwareDir: join(config.dataDir, 'firmware') },
      ...(vService ? { vision: vService } : {}),
      log, registry, bus, metrics, hub, enrollment, assistant, history, version: GATEWAY_VERSION,
      apiKeys: () => secrets.apiKeys,
      deviceSecret: secrets.deviceSecret,
      mqttPort: () => mqtt?.port ?? config.mqtt.port,
      mqttTlsPort: () => mqtt?.tlsPort,
      ready: () => !stopping && http.server.listening && (!config.mqtt.enabled || mqtt !== undefined),
      hubEnabled: hubEnabled(config.mcp),
      tenantOf: (key) => tenants.get(key),
    },
    tls,
  );
  const closeHttp = once(() => http.close());
  life.defer('http', closeHttp);
  warnIfOverOpenFileLimit(config, log);
  const ws = attachWebSocketLink(http.server, { ...config.ws, auth, registry, log, metrics });
  const closeWs = once((reason: string) => ws.close(CLOSE_SHUTDOWN, reason));
  life.defer('device websockets', () => closeWs('start failed'));
  // Joined before the listeners open, so the first device's presence reaches the other instances.
  const cluster = clusterLink ? await startCluster(clusterLink, { calls: config.calls, registry, bus }) : undefined;
  if (cluster) life.defer('cluster', () => cluster.close());
  const closeMqtt = once(() => mqtt?.close());
  life.defer('mqtt', closeMqtt);
  await openListeners(http, config, () => mqttOptions(config, { auth, registry, log, metrics, tls, apiKeys: () => secrets.apiKeys }), (m) => (mqtt = m));
  if (mqtt) fanOutToMqtt(bus, mqtt.publish);
  const metricsListener = config.metrics.port === undefined ? undefined : await startMetricsListener({
    host: config.metrics.host,
    port: config.metrics.port,
    metrics,
    // On its own listener the address is the protection; a metrics key, when set, is required too.
    keys: config.metrics.key === undefined ? undefined : metricsKeys(() => secrets.apiKeys, config.metrics.key),
    log: log.child({ component: 'metrics' }),
  });
  const closeMetrics = once(() => metricsListener?.close());
  life.defer('metrics listener', closeMetrics);
  history.start();
  life.defer('metrics history', () => history.stop());
  // Upstream servers connect after HTTP is up, in the background: a slow or broken one never delays start.
  const hubStarted = hub.start();

  // Shutdown, in stages pushed last so they run first: the parts above then close as no-ops, except the
  // cluster and the store, which close after the listeners.
  let devicesClosed: Promise<unknown> = Promise.resolve();
  life.defer('listeners and hosted servers', () =>
    // Children are always awaited (TERM, then KILL after mcp.killGraceMs): no orphan outlives close().
    Promise.all([within(Promise.all([devicesClosed, closeHttp(), closeMqtt(), closeMetrics()]), config.shutdownGraceMs), hubStarted.then(closeHub)]),
  );
  life.defer('devices', async () => {
    // Wait until each device socket has closed (close handshake done, or terminated a second later): a
    // process that exits before that cuts off the close frame, and the device sees 1006, not 1001.
    devicesClosed = Promise.all([...ws.wss.clients].map((c) => new Promise((resolve) => (c.readyState === c.CLOSED ? resolve(undefined) : c.once('close', resolve)))));
    await closeAssistant();
    await closeVoice();
    await closeWs('gateway shutting down');
  });
  life.defer('hub calls', async () => {
    stopping = true;
    history.stop();
    log.info('shutting down: refusing new work, closing devices');
    for (const s of registry.sessions()) s.failAll(new GatewayError('SHUTTING_DOWN', 'the gateway is shutting down'));
    // Calls to hosted servers in flight answer SHUTTING_DOWN before any connection closes (the /mcp
    // endpoint's sessions close in its own preClose hook, when the HTTP app closes).
    await hub.drain();
  });

  logStarted(config, log, http, mqtt, tls !== undefined);
  const address = http.server.address();
  return {
    config, log, registry, bus, metrics, http, mqtt, hub, hubStarted, store, enrollment, assistant, voice, tls, cluster, visionKey,
    httpPort: typeof address === 'object' && address ? address.port : config.http.port,
    mqttPort: mqtt?.port,
    mqttTlsPort: mqtt?.tlsPort,
    metricsPort: metricsListener?.port,
    apiKeys: secrets.apiKeys,
    deviceSecret: secrets.deviceSecret,
    generatedApiKey: secrets.generatedApiKey,
    reloadTls: () => {
      if (tls) return tls.reload();
      log.warn('TLS reload asked, but no tls.certFile is configured; nothing to reload');
      return false;
    },
    close: once(async () => {
      await life.close();
      log.info('stopped');
    }),
  };
}

function mqttOptions(
  config: Config,
  d: Pick<MqttLinkOptions, 'auth' | 'registry' | 'metrics' | 'apiKeys'> & { log: Logger; tls: TlsCertificates | undefined },
): MqttLinkOptions {
  const m = config.mqtt;
  return {
    host: m.host,
    port: m.port,
    maxPacketBytes: m.maxPacketBytes,
    maxConnections: m.maxConnections,
    maxConnectionsPerAddress: m.maxConnectionsPerAddress,
    connectTimeoutMs: m.connectTimeoutMs,
    keepalive: { minSeconds: m.keepaliveMinSeconds, maxSeconds: m.keepaliveMaxSeconds },
    auth: d.auth,
    apiKeys: d.apiKeys,
    registry: d.registry,
    log: d.log.child({ component: 'mqtt' }),
    metrics: d.metrics,
    tls: d.tls && config.tls.mqttEnabled ? { port: config.tls.mqttPort, certificates: d.tls } : undefined,
  };
}

function logStarted(config: Config, log: Logger, http: FastifyInstance, mqtt: MqttLink | undefined, tls: boolean): void {
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
}
