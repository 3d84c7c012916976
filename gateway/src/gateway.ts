import { createHmac } from 'node:crypto';
import { join } from 'node:path';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { Logger } from 'pino';
import { metricsKeys } from './api/app.js';
import { startMetricsListener } from './api/health.js';
import { eventVisibility } from './api/device-scope.js';
import { createHttp } from './api/start.js';
import { Assistant } from './assistant/assistant.js';
import type { Cluster, ClusterConnection } from './cluster/cluster.js';
import type { Config } from './config.js';
import { CLOSE_SHUTDOWN } from './devices/link.js';
import { type FleetDirectory } from './devices/directory.js';
import { type DeviceRecords } from './devices/records.js';
import { DeviceTenants } from './devices/tenants.js';
import type { DeviceRegistry } from './devices/registry.js';
import type { Enrollment } from './enrollment/enrollment.js';
import { GatewayError } from './errors.js';
import { type EventBus } from './events/bus.js';
import { fanOutToMqtt } from './events/mqtt-fanout.js';
import { historyMaxAgeMs, type EventLog } from './events/history.js';
import { createHub, loadHubCode } from './hub/create.js';
import { hubEnabled } from './hub/config.js';
import type { McpHub } from './hub/hub.js';
import { Lifecycle, once, within } from './lifecycle.js';
import { openListeners, warnIfOverOpenFileLimit } from './links/listeners.js';
import type { MqttLink } from './links/mqtt.js';
import { clientAddressOf } from './links/client-address.js';
import { attachMcpEndpointLink } from './links/mcp-endpoint.js';
import { attachWebSocketLink } from './links/ws.js';
import { maxUnreadBytes } from './links/unread-bound.js';
import { McpEndpoints } from './hub/endpoints.js';
import { wsBounds } from './hub/upstream/transports.js';
import { createLogger } from './log.js';
import { createMetrics, type Metrics } from './metrics.js';
import { MetricsHistory } from './metrics-history.js';
import { SchemaValidators } from './schemas/validators.js';
import { resolveSecrets } from './secrets.js';
import { openStore } from './store/open.js';
import type { Store } from './store/store.js';
import { logStarted, warnAtStart } from './startup-summary.js';
import { TlsCertificates } from './tls/certificates.js';
import { GATEWAY_VERSION } from './version.js';
import { assistantExplainer } from './assistant/vision.js';
import { visionOffer, visionService } from './vision/start.js';
import type { ConverseKit } from './voice/converse/converse.js';
import { createModelGates, type ModelGates } from './throttle/model-gates.js';
import { startVoice, type Voice } from './voice/start.js';
import type { Fleet } from './fleet/start.js';
import { deviceSettings, enrollmentOf, mqttOptions, openDevices, openEvents, openFleet, openSchedules, publishFleet } from './open-state.js';
import type { Gateway } from './gateway-handle.js';

export type { Gateway };

/**
 * Start every part: HTTP API + device WebSocket on one port, the embedded MQTT broker on another. Each part
 * registers its closer as it opens (a Lifecycle stack), so a start that fails closes what it opened, and
 * close() runs the reverse of the start: drain hub calls, close devices, listeners, cluster, store.
 */
export async function startGateway(config: Config, opts: { log?: Logger; converseKit?: () => ConverseKit } = {}): Promise<Gateway> {
  const log = opts.log ?? createLogger(config.logLevel, undefined, config.logFormat);
  const secrets = resolveSecrets(config.dataDir, { apiKeys: config.apiKeys, deviceSecret: config.deviceSecret });
  warnAtStart(config, secrets, log);
  const life = new Lifecycle(log);
  try {
    return await wire(config, log, secrets, life, opts.converseKit);
  } catch (e) {
    await life.close().catch(() => undefined);
    throw e;
  }
}

type Secrets = ReturnType<typeof resolveSecrets>;

/** The parts behind the ports: what HTTP, the links and the cluster are built on. */
interface Core {
  metrics: Metrics;
  tls: TlsCertificates | undefined;
  clusterLink: ClusterConnection | undefined;
  bus: EventBus;
  /** The persisted event history (GET /v1/events/history), when events.history is on. */
  eventLog: EventLog | undefined;
  voice: Voice;
  registry: DeviceRegistry;
  /** Every device ever admitted, in the store (devices/records.ts). */
  records: DeviceRecords;
  directory: FleetDirectory;
  store: Store;
  enrollment: Enrollment | undefined;
  deviceTenants: DeviceTenants;
  hub: McpHub;
  /** Tokens for tool processes that dial in (mcp.endpoints), when enabled. */
  mcpEndpoints: McpEndpoints | undefined;
  assistant: Assistant;
  fleet: Fleet;
  visionKey: string;
  /** The gateway-wide bounds on model requests (modelRequests): the vision endpoint's explainer takes its slot here. */
  modelGates: ModelGates;
  closeVoice: () => Promise<void>;
  closeHub: () => Promise<void>;
  closeAssistant: () => Promise<void>;
}

/** What the ports need to know while they run: set by the listeners, read by /readyz and OTA. */
interface Front {
  http: FastifyInstance;
  ws: ReturnType<typeof attachWebSocketLink>;
  mqtt: MqttLink | undefined;
  metricsListener: { port: number; close(): Promise<void> } | undefined;
  cluster: Cluster | undefined;
  history: MetricsHistory;
  stopping: boolean;
  closeHttp: () => Promise<void>;
  closeMqtt: () => Promise<void>;
  closeMetrics: () => Promise<void>;
  closeWs: (reason: string) => Promise<void>;
}

async function wire(config: Config, log: Logger, secrets: Secrets, life: Lifecycle, converseKit?: () => ConverseKit): Promise<Gateway> {
  const core = await openCore(config, log, secrets, life, converseKit);
  const front = await openFront(config, log, secrets, core, life);
  // Upstream servers connect after HTTP is up, in the background: a slow or broken one never delays start.
  const hubStarted = core.hub.start();
  await publishFleet(config, log, core.hub, life);
  deferShutdown(config, log, core, front, life);
  logStarted(config, log, front.http, front.mqtt, core.tls !== undefined);
  const address = front.http.server.address();
  const { metrics, bus, registry, directory, hub, mcpEndpoints, store, enrollment, assistant, voice, tls, visionKey, fleet, deviceTenants } = core;
  return {
    config,
    log,
    registry,
    directory,
    bus,
    metrics,
    hub,
    mcpEndpoints,
    hubStarted,
    store,
    enrollment,
    assistant,
    voice,
    tls,
    visionKey,
    fleet,
    deviceTenants,
    http: front.http,
    mqtt: front.mqtt,
    cluster: front.cluster,
    httpPort: typeof address === 'object' && address ? address.port : config.http.port,
    mqttPort: front.mqtt?.port,
    mqttTlsPort: front.mqtt?.tlsPort,
    metricsPort: front.metricsListener?.port,
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

/** Events, devices, persisted state, the hub and the assistant; each registers its closer as it opens. */
async function openCore(config: Config, log: Logger, secrets: Secrets, life: Lifecycle, converseKit?: () => ConverseKit): Promise<Core> {
  const visionKey = createHmac('sha256', secrets.deviceSecret).update('voxgate-vision').digest('base64url');
  const metrics = createMetrics();
  // One bound per kind of model service (modelRequests), shared by every path that asks it: voice, assistant, vision.
  const modelGates = createModelGates(config.modelRequests, metrics.registry, log.child({ component: 'model-requests' }));
  const tls = readTls(config, log, metrics);
  // The cluster's code (and the NATS client under it) loads only when the cluster is on.
  const clusterCode = config.cluster.enabled ? await import('./cluster/cluster.js') : undefined;
  const clusterLink = clusterCode
    ? await clusterCode.connectCluster(config.cluster, {
        log,
        metricsRegistry: metrics.registry,
        replayLimit: config.events.bufferSize,
        history: { maxEvents: config.events.history.maxEvents, maxBytes: config.events.history.maxBytes, maxAgeMs: historyMaxAgeMs(config.events.history) },
      })
    : undefined;
  if (clusterLink) life.defer('cluster connection', () => clusterLink.close());
  // Opened before the bus: the event history (a table in it) is where the bus resumes an id its ring lost.
  const store = await openStore(config.cluster, config.dataDir, log);
  life.defer('store', () => store.close());
  // The event history's retention shares are per device tenant (a flood evicts its own tenant's oldest): read from here.
  const deviceTenants = new DeviceTenants(config.enrollment.tenantRules ?? [], log.child({ component: 'tenancy' }), { metrics });
  const { bus, eventLog } = openEvents(config, store, clusterLink, log, metrics, life, deviceTenants);
  const validators = new SchemaValidators({
    limits: config.schemas,
    maxCached: config.schemas.validatorCacheSize,
    onUnenforcedPattern: (reason) => metrics.patternsUnenforced.inc({ reason }),
    onSize: (size) => metrics.schemaValidators.set(size),
  });
  const voice: Voice = await startVoice(config.voice, metrics, log, { ...(converseKit ? { kit: converseKit } : {}), gates: modelGates });
  const closeVoice = once(() => voice.close());
  life.defer('voice', closeVoice);
  const vision = visionOffer(config.vision, config.http.publicUrl, visionKey);
  const { records, registry, directory } = await openDevices(config, { voice, log, bus, metrics, vision, validators, store, life });
  await voice.useStore(store, records);
  const enrollment = await enrollmentOf(config, { deviceSecret: secrets.deviceSecret, store, log, metrics, registry, records, deviceTenants });
  // Tenancy (issue 20 item 6): each device's tenant, kept in the store and shared through it in a cluster;
  // the hub, the device, event and enrollment routes and OTA (enrollment.tenantRules) read it. It follows the records.
  await deviceTenants.attach(store, records);
  voice.useTenancy(deviceTenants);
  await loadHubCode(config.mcp);
  const hub = createHub({ log, metrics, registry: directory, bus, validators, deviceTenancy: deviceTenants }, config.mcp, {
    schemas: config.schemas,
    deviceCallTimeoutMs: config.calls.defaultTimeoutMs,
  });
  const closeHub = once(() => hub.close());
  life.defer('hub', closeHub);
  const mcpEndpoints = config.mcp.endpoints.enabled
    ? await McpEndpoints.open(hub, store, log.child({ component: 'mcp-endpoint' }), { ...config.mcp.endpoints, metrics })
    : undefined;
  // The hub needs the registry, which needs the relay: the relay learns of the hub last.
  voice.useHub(hub);
  const assistant = new Assistant({ config: config.assistant, hub, log, metrics, gates: modelGates });
  voice.useAssistant(assistant, bus);
  const closeAssistant = once(() => assistant.close());
  life.defer('assistant', closeAssistant);
  const fleet = await openFleet(config, { store, bus, log, registry, directory, hub, life, tenancy: deviceTenants, apiKeys: secrets.apiKeys, metrics });
  return {
    metrics,
    tls,
    clusterLink,
    bus,
    eventLog,
    voice,
    registry,
    records,
    directory,
    store,
    enrollment,
    deviceTenants,
    hub,
    mcpEndpoints,
    assistant,
    fleet,
    visionKey,
    modelGates,
    closeVoice,
    closeHub,
    closeAssistant,
  };
}

/** The certificate, read first: a missing or mismatched one stops the start before anything listens. */
function readTls(config: Config, log: Logger, metrics: Metrics): TlsCertificates | undefined {
  const { certFile, keyFile, caFile } = config.tls;
  return certFile !== undefined && keyFile !== undefined
    ? new TlsCertificates({ certFile, keyFile, caFile }, log.child({ component: 'tls' }), metrics)
    : undefined;
}

/** The HTTP app and device WebSockets, the cluster, then every listener; each registers its closer as it opens. */
// eslint-disable-next-line max-lines-per-function -- each listener opens and registers its closer in start order
async function openFront(config: Config, log: Logger, secrets: Secrets, core: Core, life: Lifecycle): Promise<Front> {
  const { metrics, registry, directory, bus, hub, enrollment, assistant, tls } = core;
  const tenants = new Map(Object.entries(config.apiKeyTenants));
  const apiKeys = () => secrets.apiKeys;
  const history = new MetricsHistory(metrics, config.metrics.historyIntervalMs, config.metrics.historySamples, Date.now, log.child({ component: 'metrics' }));
  const fallbackExplainer = assistantExplainer(assistant, config.vision.maxPhotoBytes);
  const vision = visionService(
    {
      visionKey: core.visionKey,
      dataDir: config.dataDir,
      fallbackExplainer,
      bus,
      metrics,
      log,
      gate: core.modelGates.vision,
      tenantOf: (id) => core.deviceTenants.tenantOf(id),
    },
    config.vision,
  );
  const api = {
    log,
    registry: directory,
    bus,
    metrics,
    hub,
    enrollment,
    assistant,
    history,
    apiKeys,
    version: GATEWAY_VERSION,
    deviceSecret: secrets.deviceSecret,
  };
  const f = { stopping: false, mqtt: undefined as MqttLink | undefined };
  const scheduler = await openSchedules(config, log, core, life);
  const http: FastifyInstance = await createHttp(
    {
      ...api,
      scheduler,
      ...(vision ? { vision } : {}),
      settings: { ...config, mcpEndpoint: config.mcp.endpoint, firmwareDir: join(config.dataDir, 'firmware') },
      mqttPort: () => f.mqtt?.port ?? config.mqtt.port,
      mqttTlsPort: () => f.mqtt?.tlsPort,
      ready: () => !f.stopping && http.server.listening && (!config.mqtt.enabled || f.mqtt !== undefined),
      hubEnabled: hubEnabled(config.mcp),
      tenantOf: (key) => tenants.get(key),
      // Fleet registry (issue 23): name, room, tags, tenant; DELETE forgets; what OTA checks say of a device.
      deviceSettings: deviceSettings(core),
      deviceReports: (id, facts) => core.records.reported(id, facts),
      deviceKnown: (id) => core.records.has(id),
      onDeviceForgotten: (fn) => core.records.onForgotten(fn),
      deviceTenants: core.deviceTenants,
      ...(core.mcpEndpoints ? { mcpEndpoints: { endpoints: core.mcpEndpoints, path: config.mcp.endpoints.path } } : {}),
      fleet: core.fleet,
      // History: device tenancy's per-request filter (a tenant's key reads its devices' events only).
      ...(core.eventLog ? { eventHistory: { log: core.eventLog, visibleTo: (req: FastifyRequest) => eventVisibility(req, core.deviceTenants) } } : {}),
    },
    tls,
  );
  const closeHttp = once(() => http.close());
  life.defer('http', closeHttp);
  warnIfOverOpenFileLimit(config, log);
  const auth = {
    mode: config.deviceAuth,
    tokens: config.deviceTokens,
    secret: secrets.deviceSecret,
    tokenMaxAgeSeconds: config.deviceTokenMaxAgeSeconds,
    enrollment,
    liveCredential: (id: string) => registry.liveCredential(id),
  };
  const endpoints = config.mcp.endpoints;
  const addressOf = clientAddressOf(config.http.trustProxy);
  const toolLink = core.mcpEndpoints
    ? attachMcpEndpointLink(http.server, {
        path: endpoints.path,
        endpoints: core.mcpEndpoints,
        bounds: wsBounds(hub.settings),
        maxConnections: endpoints.maxConnections,
        maxConnectionsPerToken: endpoints.maxConnectionsPerToken,
        unknownTokenRate: { perSecond: endpoints.unknownTokenPerSecond, burst: endpoints.unknownTokenBurst },
        connectRate: { perSecond: endpoints.connectsPerSecond, burst: endpoints.connectBurst },
        readBytesPerSecond: endpoints.readBytesPerSecond,
        unreadTotal: hub.settings.unreadTotal,
        addressOf,
        log,
        metrics,
      })
    : undefined;
  const otherPath = (p: string) => toolLink?.owns(p) ?? false;
  const unread = maxUnreadBytes(config.voice.maxBufferedBytes);
  const ws = attachWebSocketLink(http.server, { ...config.ws, maxUnreadBytes: unread, otherPath, auth, registry, addressOf, log, metrics });
  const closeWs = once(async (reason: string) => {
    ws.close(CLOSE_SHUTDOWN, reason);
    toolLink?.close();
  });
  life.defer('device websockets', () => closeWs('start failed'));
  // Joined before the listeners open, so the first device's presence reaches the other instances.
  const clusterCode = core.clusterLink ? await import('./cluster/cluster.js') : undefined;
  const cluster =
    core.clusterLink && clusterCode
      ? await clusterCode.startCluster(core.clusterLink, { calls: config.calls, registry, bus, catalogBudgetBytes: config.devices.catalogBudgetBytes })
      : undefined;
  if (cluster) {
    directory.attach(cluster.devices);
    life.defer('cluster', () => cluster.close());
  }
  const closeMqtt = once(() => f.mqtt?.close());
  life.defer('mqtt', closeMqtt);
  // MQTT backends read every device's events (voxgate/events/#): operator keys only, never a tenant's key.
  const operatorKeys = () => secrets.apiKeys.filter((k) => !tenants.has(k));
  await openListeners(
    http,
    config,
    () => mqttOptions(config, { auth, registry, log, metrics, tls, apiKeys: operatorKeys }),
    (m) => (f.mqtt = m),
  );
  if (f.mqtt) fanOutToMqtt(bus, f.mqtt);
  const metricsListener =
    config.metrics.port === undefined
      ? undefined
      : await startMetricsListener({
          host: config.metrics.host,
          port: config.metrics.port,
          metrics,
          // On its own listener the address is the protection; a metrics key, when set, is required too.
          keys: config.metrics.key === undefined ? undefined : metricsKeys(apiKeys, config.metrics.key),
          log: log.child({ component: 'metrics' }),
        });
  const closeMetrics = once(() => metricsListener?.close());
  life.defer('metrics listener', closeMetrics);
  history.start();
  life.defer('metrics history', () => history.stop());
  return Object.assign(f, { http, ws, metricsListener, cluster, history, closeHttp, closeMqtt, closeMetrics, closeWs });
}

/**
 * The shutdown, in stages pushed last so they run first: drain hub calls, close devices, then the
 * listeners within shutdownGraceMs (hosted servers alongside). The parts opened before then close as
 * no-ops, except the cluster and the store, which close after the listeners.
 */
function deferShutdown(config: Config, log: Logger, core: Core, front: Front, life: Lifecycle): void {
  let devicesClosed: Promise<unknown> = Promise.resolve();
  life.defer('listeners and hosted servers', () =>
    Promise.all([
      within(Promise.all([devicesClosed, front.closeHttp(), front.closeMqtt(), front.closeMetrics()]), config.shutdownGraceMs),
      // Children are always awaited (TERM, then KILL after mcp.killGraceMs): no orphan outlives close().
      // hub.close() also ends servers still connecting: a stuck initialize never holds shutdown up.
      core.closeHub(),
    ]),
  );
  life.defer('devices', async () => {
    // Wait until each device socket has closed (close handshake done, or terminated a second later): a
    // process that exits before that cuts off the close frame, and the device sees 1006, not 1001.
    devicesClosed = Promise.all(
      [...front.ws.clients].map((c) => new Promise((resolve) => (c.readyState === c.CLOSED ? resolve(undefined) : c.once('close', resolve)))),
    );
    await core.closeAssistant();
    await core.closeVoice();
    await front.closeWs('gateway shutting down');
  });
  life.defer('hub calls', async () => {
    front.stopping = true;
    front.history.stop();
    log.info('shutting down: refusing new work, closing devices');
    // No queued call goes out from now on; the ones in flight are failed SHUTTING_DOWN just below.
    const fleetStopped = core.fleet.delivery.close();
    for (const s of core.registry.sessions()) s.failAll(new GatewayError('SHUTTING_DOWN', 'the gateway is shutting down'));
    await fleetStopped;
    // Calls to hosted servers in flight answer SHUTTING_DOWN before any connection closes (the /mcp
    // endpoint's sessions close in its own preClose hook, when the HTTP app closes).
    await core.hub.drain();
  });
}
