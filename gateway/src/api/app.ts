import type { SecureContextOptions } from 'node:tls';
import Fastify, { LogController, type FastifyBaseLogger, type FastifyInstance } from 'fastify';
import type { Logger } from 'pino';
import type { AssistantConfig } from '../assistant/config.js';
import type { EventsConfig } from '../events/config.js';
import type { OtaConfig } from '../firmware/config.js';
import type { McpConfig } from '../hub/config.js';
import type { ConsoleConfig, HttpConfig, MetricsConfig } from './config.js';
import type { DeviceDirectory } from '../devices/directory.js';
import type { DeviceTenants } from '../devices/tenants.js';
import type { EventBus } from '../events/bus.js';
import { mcpAllowedHosts } from '../facade/allowed-hosts.js';
import { firmwareRoutes } from '../firmware/routes.js';
import { firmwareOfferRoute } from '../firmware/offer-route.js';
import { FirmwareService } from '../firmware/service.js';
import { registerMcpEndpoint } from '../facade/mcp-endpoint.js';
import type { McpEndpoints } from '../hub/endpoints.js';
import type { McpHub } from '../hub/hub.js';
import type { Metrics } from '../metrics.js';
import type { Assistant } from '../assistant/assistant.js';
import { assistantRoutes } from './assistant.js';
import { requireApiKey } from './auth.js';
import { NO_TENANTS, operatorOnly, scopeDeviceRoutes } from './device-scope.js';
import type { Enrollment } from '../enrollment/enrollment.js';
import { deviceRoutes } from './devices.js';
import { deviceSettingsRoutes, type DeviceSettingsDeps } from './device-settings.js';
import { enrollmentRoutes } from './enrollments.js';
import { eventRoutes } from './events.js';
import { eventHistoryRoutes, type EventHistoryRouteOptions } from './events-history.js';
import { healthRoutes, metricsRoute } from './health.js';
import { otaRoutes, type DeviceReport, type OtaSettings } from './ota.js';
import { registerBoundedJsonParser } from './json-body.js';
import { mcpEndpointRoutes } from './mcp-endpoints.js';
import { registerProblemHandlers } from './problem.js';
import { rootRoute } from './root.js';
import { toolRoutes } from './tools.js';
import { photoRoutes } from '../vision/photo-routes.js';
import { visionExplainRoute, type VisionService } from '../vision/routes.js';
import { consoleRoutes } from './console.js';
import { historyRoutes } from './history.js';
import { fleetRoutes } from './jobs.js';
import type { QueuedCalls } from '../fleet/queued-calls.js';
import type { Jobs } from '../fleet/jobs.js';
import type { Scheduler } from '../fleet/schedules.js';
import { scheduleRoutes } from './schedules.js';
import type { MetricsHistory } from '../metrics-history.js';
import { requestLoggers } from './request-logger.js';
import { registerOpenApiDocs } from './openapi-docs.js';

/** The slices of the configuration the HTTP side reads. */
export interface ApiSettings extends OtaSettings {
  http: HttpConfig;
  metrics: Pick<MetricsConfig, 'key' | 'port'>;
  console: ConsoleConfig;
  events: Pick<EventsConfig, 'maxStreams' | 'maxStreamsPerKey' | 'maxBufferedBytes' | 'writeTimeoutMs'> & Partial<Pick<EventsConfig, 'maxStreamsPerTenant'>>;
  mcpEndpoint: McpConfig['endpoint'];
  assistant: Pick<AssistantConfig, 'maxMessageBytes'>;
  ota: OtaConfig;
  /** Where firmware images are kept (<dataDir>/firmware). */
  firmwareDir: string;
}

export interface ApiDeps {
  settings: ApiSettings;
  log: Logger;
  registry: DeviceDirectory;
  bus: EventBus;
  metrics: Metrics;
  apiKeys: () => readonly string[];
  deviceSecret: string;
  mqttPort: () => number;
  /** The MQTT-over-TLS port bound, if that listener is on. */
  mqttTlsPort?: () => number | undefined;
  ready: () => boolean;
  version: string;
  /** The MCP hub (devices + upstream servers as one tool namespace). */
  hub?: McpHub;
  hubEnabled?: boolean;
  /** The tenant an API key carries, if any. */
  tenantOf?: (key: string) => string | undefined;
  /** Tokens for tool processes that dial in (mcp.endpoints). */
  mcpEndpoints?: { endpoints: McpEndpoints; path: string };
  /** Device enrollment (absent when device auth is open). */
  enrollment?: Enrollment | undefined;
  /** The vision endpoint and photo store, when vision.serve is on. */
  vision?: VisionService;
  /** The LLM tool loop (/v1/assistant/*, /v1/chat/completions). */
  assistant?: Assistant;
  /** In-memory metric samples for GET /v1/metrics/history (the console's health charts). */
  history?: MetricsHistory;
  /** Serve HTTPS (and WSS) with this certificate and key instead of plain HTTP. */
  https?: SecureContextOptions | undefined;
  /** Per-device voice modes (PATCH /v1/devices/{id}). */
  deviceSettings?: DeviceSettingsDeps;
  /** What a device's OTA check said about it (board, firmware): the device records keep it (devices/records.ts). */
  deviceReports?: (deviceId: string, facts: DeviceReport) => boolean;
  /** Whether the device records know the device (it connected): its OTA reports are kept apart from made-up ids'. */
  deviceKnown?: (deviceId: string) => boolean;
  /**
   * Devices forgotten (DELETE here or on another instance, also of ids that never connected, or past devices.maxKnown):
   * their OTA reports go too. Returns the unsubscribe.
   */
  onDeviceForgotten?: (fn: (deviceId: string) => void) => () => void;
  /** Queued calls and fleet jobs (/v1/devices/{id}/calls, /v1/calls, /v1/jobs). */
  fleet?: { calls: QueuedCalls; jobs: Jobs };
  /** Devices' tenants: what a tenant's API key may see (absent: no device has a tenant; operator keys see all). */
  deviceTenants?: DeviceTenants;
  /** The persisted event log (GET /v1/events/history), when events.history is on. */
  eventHistory?: EventHistoryRouteOptions | undefined;
  /** Cron and one-off schedules (/v1/schedules). */
  scheduler?: Scheduler;
}

/** The HTTP side: one fastify app; every feature a plugin with its own schemas. */
// eslint-disable-next-line max-lines-per-function -- the API's plugin table: each line mounts one plugin with its options
export async function buildApi(d: ApiDeps): Promise<FastifyInstance> {
  const s = d.settings;
  const serverOptions = {
    headersTimeout: s.http.headersTimeoutMs,
    connectionsCheckingInterval: Math.max(10, Math.min(1000, Math.floor(s.http.headersTimeoutMs / 4))),
  };
  const log = d.log.child({ component: 'http' }) as FastifyBaseLogger;
  const app = Fastify({
    // The request loggers are the factory's (lazy, with the request id); fastify is given no logger of its own, so it
    // adds no response listeners per request for its request lines, which are off (disableRequestLogging).
    logController: new LogController({ disableRequestLogging: true }),
    childLoggerFactory: requestLoggers(log),
    bodyLimit: s.http.bodyLimitBytes,
    // Device ids may be percent-encoded (aa%3Abb...): fastify decodes params.
    routerOptions: { maxParamLength: 256, ignoreTrailingSlash: true },
    forceCloseConnections: true,
    // The bodies' schemas are strict: a misspelled key (`ttlms`) is refused with 400, not silently dropped
    // (fastify's default would strip it and run the call without it).
    ajv: { customOptions: { removeAdditional: false } },
    // A socket that sends no complete request (or WebSocket upgrade) in time is closed (408): idle
    // sockets would otherwise hold descriptors. Node checks every connectionsCheckingInterval.
    http: serverOptions,
    // X-Forwarded-* are believed from the listed proxies only (req.ip, req.protocol, req.host).
    trustProxy: s.http.trustProxy.length > 0 ? s.http.trustProxy : false,
    // https.createServer ignores `http`: the same deadlines go with the certificate, and the TLS handshake
    // must finish within the request deadline as well (the HTTP clock starts only after it).
    ...(d.https ? { https: { ...d.https, ...serverOptions, handshakeTimeout: s.http.headersTimeoutMs } } : {}),
  });
  // The app's own lines (plugins' `app.log`, fastify's listen and close lines) go where the requests' go.
  app.log = log;
  registerProblemHandlers(app);
  registerBoundedJsonParser(app);
  // /openapi.json and /docs: the routes noted from here on, the document and its UI loaded on their first request.
  registerOpenApiDocs(app, d.version);

  await app.register(healthRoutes, { ready: d.ready });
  await app.register(rootRoute, { version: d.version });
  // With metrics.port set, /metrics lives on its own listener (gateway.ts) and not here.
  if (s.metrics.port === undefined) await app.register(metricsRoute, { metrics: d.metrics, keys: metricsKeys(d.apiKeys, s.metrics.key) });
  const firmware = new FirmwareService({
    settings: s.ota,
    imagesDir: s.firmwareDir,
    log: d.log.child({ component: 'firmware' }),
    metrics: d.metrics,
    ...(d.deviceKnown ? { isKnown: d.deviceKnown } : {}),
  });
  const offForgotten = d.onDeviceForgotten?.((id) => firmware.forgetReport(id));
  if (offForgotten) app.addHook('onClose', async () => offForgotten());
  const tenants = d.deviceTenants;
  const ota = {
    settings: s,
    deviceSecret: d.deviceSecret,
    mqttPort: d.mqttPort,
    mqttTlsPort: d.mqttTlsPort ?? (() => undefined),
    metrics: d.metrics,
    enrollment: d.enrollment,
    firmware,
    tenants,
  };
  await app.register(otaRoutes, { ...ota, ...(d.deviceReports ? { onReport: d.deviceReports } : {}) });
  await app.register(firmwareRoutes, { firmware, maxPerAddress: s.ota.downloadsPerAddress, maxTotal: s.ota.maxDownloads });
  // Devices authenticate with their vision token, not an API key.
  if (d.vision) await app.register(visionExplainRoute, d.vision);
  await app.register(async (v1) => {
    requireApiKey(v1, d.apiKeys, d.tenantOf);
    scopeDeviceRoutes(v1, tenants ?? NO_TENANTS);
    v1.addHook('onRoute', (route) => {
      route.schema = { ...route.schema, security: [{ apiKey: [] }] };
    });
    await v1.register(deviceRoutes, { registry: d.registry, firmwareVersion: (id) => firmware.reportedVersion(id), ...(tenants ? { tenancy: tenants } : {}) });
    if (d.deviceSettings) await v1.register(deviceSettingsRoutes, { ...d.deviceSettings, tenants });
    if (d.vision) await v1.register(photoRoutes, { store: d.vision.store });
    await v1.register(firmwareOfferRoute, { firmware, http: s.http });
    const { maxStreams, maxStreamsPerKey, maxStreamsPerTenant, maxBufferedBytes, writeTimeoutMs } = s.events;
    const streamTenants = { apiKeys: d.apiKeys, tenantOf: d.tenantOf ?? (() => undefined), maxStreamsPerTenant };
    await v1.register(eventRoutes, {
      bus: d.bus,
      metrics: d.metrics,
      maxStreams,
      maxStreamsPerKey,
      maxBufferedBytes,
      writeTimeoutMs,
      tenancy: tenants,
      streamTenants,
    });
    if (d.eventHistory) await v1.register(eventHistoryRoutes, d.eventHistory);
    // A claim for a recorded device counts for a tenant rule only under the client id the device connects with.
    const connectsAs = (id: string) => d.registry.get(id)?.clientId;
    await v1.register(enrollmentRoutes, { enrollment: d.enrollment, tenants, connectsAs });
    if (d.hub) await v1.register(toolRoutes, { hub: d.hub, hubEnabled: d.hubEnabled ?? false });
    if (d.mcpEndpoints) await v1.register(mcpEndpointRoutes, { ...d.mcpEndpoints, publicUrl: s.http.publicUrl });
    if (d.assistant) {
      const o = { assistant: d.assistant, maxMessageBytes: s.assistant.maxMessageBytes, metrics: d.metrics, maxUnreadBytes: maxBufferedBytes, writeTimeoutMs };
      await v1.register(assistantRoutes, o);
    }
    if (d.history) await v1.register(historyRoutes, { history: d.history });
    await registerFleet(v1, d);
  });
  if (s.console.enabled) await app.register(consoleRoutes, { dir: s.console.dir, publicUrl: s.http.publicUrl });
  if (d.hub && s.mcpEndpoint.enabled) {
    const hub = d.hub;
    await app.register(async (scope) => {
      // The endpoint closes its sessions in its own preClose hook, when the app closes.
      await registerMcpEndpoint(scope, {
        hub,
        apiKeys: d.apiKeys,
        tenantOf: d.tenantOf ?? (() => undefined),
        log: d.log,
        metrics: d.metrics,
        allowedOrigins: s.mcpEndpoint.allowedOrigins,
        allowedHosts: mcpAllowedHosts(s.http, s.mcpEndpoint.allowedHosts),
        maxSessions: s.mcpEndpoint.maxSessions,
        maxSessionsPerKey: s.mcpEndpoint.maxSessionsPerKey,
        maxSessionsPerTenant: s.mcpEndpoint.maxSessionsPerTenant,
        sessionIdleMs: s.mcpEndpoint.sessionIdleMs,
        unreadBudgetBytes: s.mcpEndpoint.unreadBudgetBytes,
        version: d.version,
        bodyLimitBytes: s.http.bodyLimitBytes,
        publicUrl: s.http.publicUrl,
      });
    });
  }
  return app;
}

/** Who may scrape /metrics: every API key, plus the metrics key when one is set. */
export function metricsKeys(apiKeys: () => readonly string[], metricsKey: string | undefined): () => readonly string[] {
  return metricsKey === undefined ? apiKeys : () => [...apiKeys(), metricsKey];
}

/** Queued calls (scoped to the caller's devices), fleet jobs and schedules (operator keys only). */
async function registerFleet(v1: FastifyInstance, d: ApiDeps): Promise<void> {
  if (d.fleet) await v1.register(fleetRoutes, { ...d.fleet, tenancy: d.deviceTenants });
  const scheduler = d.scheduler;
  if (!scheduler) return;
  await v1.register(async (scope) => {
    operatorOnly(scope, 'schedules');
    await scope.register(scheduleRoutes, { scheduler });
  });
}
