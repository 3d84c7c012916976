/**
 * The parts of the composition root that keep state (gateway.ts wires them): the event bus with its
 * history, the device registry with its lasting records, enrollments, queued calls and jobs, schedules,
 * and the fleet published to remote MCP endpoints; and the MQTT broker's options.
 */
import { normalizeDeviceId } from '@voxgate/protocol';
import type { Logger } from 'pino';
import { principalOf } from './api/auth.js';
import { JobBody, jobRequest } from './api/jobs.js';
import type { ClusterConnection } from './cluster/cluster.js';
import type { Config } from './config.js';
import { createRegistry } from './devices/create.js';
import { FleetDirectory, type DeviceDirectory } from './devices/directory.js';
import { DeviceRecords } from './devices/records.js';
import { deviceForgetter } from './devices/forget.js';
import { CLOSE_REVOKED } from './devices/link.js';
import { openEnrollment } from './enrollment/open.js';
import type { DeviceTenants } from './devices/tenants.js';
import type { DeviceSettingsDeps } from './api/device-settings.js';
import type { Enrollment } from './enrollment/enrollment.js';
import type { DeviceRegistry } from './devices/registry.js';
import { GatewayError } from './errors.js';
import { EventBus } from './events/bus.js';
import { type EventLog } from './events/history.js';
import { SqliteEventLog } from './events/history-sqlite.js';
import { KeyGrants } from './fleet/key-grants.js';
import { RegistrySelector } from './fleet/registry-selector.js';
import { Scheduler, type ScheduleTargets } from './fleet/schedules.js';
import { startFleet, type Fleet } from './fleet/start.js';
import type { McpHub } from './hub/hub.js';
import type { MqttLinkOptions } from './links/mqtt.js';
import type { TlsCertificates } from './tls/certificates.js';
import { GATEWAY_VERSION } from './version.js';
import type { Lifecycle } from './lifecycle.js';
import type { Metrics } from './metrics.js';
import type { SchemaValidators } from './schemas/validators.js';
import { SqliteStore } from './store/sqlite-store.js';
import type { Store } from './store/store.js';
import { maxUnreadBytes } from './links/unread-bound.js';
import type { visionOffer } from './vision/start.js';
import type { Voice } from './voice/start.js';

/**
 * The event bus, and the history it resumes from (events/history*.ts): events kept in the store, or the
 * cluster's event stream, so Last-Event-ID resumes across restarts. The history closes (its last batch
 * written) before the store, after every device.
 */
export function openEvents(
  config: Config,
  store: Store,
  clusterLink: ClusterConnection | undefined,
  log: Logger,
  metrics: Metrics,
  life: Lifecycle,
  tenancy?: Pick<DeviceTenants, 'tenantOf'>,
) {
  const eventLog = openEventLog(config, store, clusterLink, log, metrics);
  const bus = new EventBus({
    bufferSize: config.events.bufferSize,
    metrics,
    log: log.child({ component: 'events' }),
    deviceRate: { ratePerSecond: config.events.devicePerSecond, burst: config.events.deviceBurst },
    replaySource: eventLog ?? clusterLink?.replay,
    // Each event records its device's tenant as it is published: a tenant's key reads only what was published under it
    // (api/device-scope.ts eventVisibility), and the event counts against that tenant's retention share (events/retention.ts).
    ...(tenancy ? { tenantOf: (id: string) => tenancy.tenantOf(id) } : {}),
  });
  if (eventLog) {
    const unsubscribe = bus.subscribe((e) => eventLog.append(e));
    life.defer('event history', () => {
      unsubscribe();
      return eventLog.close();
    });
  }
  return { bus, eventLog };
}

/**
 * History: the event log this gateway keeps. With the cluster on, the event stream every instance writes;
 * else a table beside the documents in the embedded store's database (it lends its one handle).
 */
function openEventLog(config: Config, store: Store, cluster: ClusterConnection | undefined, log: Logger, metrics: Metrics): EventLog | undefined {
  if (!config.events.history.enabled) return undefined;
  if (cluster) return cluster.history;
  if (!(store instanceof SqliteStore)) return undefined;
  return store.share((db) => new SqliteEventLog(db, SqliteEventLog.options(config.events, log.child({ component: 'event-history' }), metrics)));
}

/** The device registry and its lasting records (issue 23): every device ever admitted, listed offline until it dials back. */
export async function openDevices(
  config: Config,
  d: {
    voice: Voice;
    log: Logger;
    bus: EventBus;
    metrics: Metrics;
    vision: ReturnType<typeof visionOffer>;
    validators: SchemaValidators;
    store: Store;
    life: Lifecycle;
  },
) {
  const { log, metrics, vision } = d;
  const records = new DeviceRecords({
    log: log.child({ component: 'device-records' }),
    lastSeenWriteMs: config.devices.lastSeenWriteMs,
    onWrite: (outcome) => metrics.deviceRecordWrites.inc({ outcome }),
  });
  const registry = createRegistry(
    { voice: d.voice.hook, log, bus: d.bus, metrics, vision: vision.capability, validators: d.validators, records },
    { ...config, visionRefreshMs: vision.refreshMs },
  );
  // Callers find devices here: this instance's registry, and the cluster's devices once it has joined.
  const directory = new FleetDirectory(registry, records);
  await records.attach(d.store);
  registry.restoreRecords();
  records.startLastSeenSweep(() => registry.sessions());
  // Deferred after the store: runs before it closes, once the devices' final last-seen writes are queued.
  d.life.defer('device records', () => records.close());
  return { records, registry, directory };
}

/** Queued calls and fleet jobs (fleet/): delivered to devices ready on THIS instance; closed before the store. */
export async function openFleet(
  config: Config,
  d: {
    store: Store;
    bus: EventBus;
    log: Logger;
    registry: DeviceRegistry;
    directory: DeviceDirectory;
    hub: McpHub;
    life: Lifecycle;
    tenancy?: Pick<DeviceTenants, 'tenantOf'> | undefined;
    /** The API keys configured (config or the secrets file): lasting work of any other key is settled, not run. */
    apiKeys: readonly string[];
    metrics: Metrics;
  },
): Promise<Fleet> {
  const { registry } = d;
  // Keys are fixed for the life of the process (a restart changes them): their principals are hashed once, here.
  // Read through a Map, not the record: a key named like an Object.prototype member ("toString") has no tenant.
  const tenants = new Map(Object.entries(config.apiKeyTenants));
  const keys = new Map(d.apiKeys.map((k) => [principalOf(k), tenants.get(k)] as const));
  const grants = new KeyGrants(keys, d.log.child({ component: 'fleet' }));
  const fleet = await startFleet(
    {
      store: d.store,
      bus: d.bus,
      log: d.log,
      port: {
        readyHere: (id) => (registry.find(id)?.state === 'ready' ? registry.find(id) : undefined),
        ...(d.tenancy ? { tenantOf: (id: string) => d.tenancy!.tenantOf(id) } : {}),
      },
      selector: new RegistrySelector(d.directory),
      soleSender: !config.cluster.enabled,
      maxCallMs: config.calls.maxTimeoutMs,
      grants,
      onBytesBound: (bound) => d.metrics.queuedCallBytesBound.inc({ bound }),
    },
    config.fleet,
  );
  d.life.defer('fleet', () => fleet.close());
  // The hub's `fleet_start_job` builtin starts jobs as POST /v1/jobs does (same body, same checks, the caller's key).
  d.hub.useFleetJobs({ start: (body, principal) => fleet.jobs.create({ ...jobRequest(JobBody.parse(body)), principal }) });
  return fleet;
}

/**
 * Schedules (fleet/schedules.ts): kept in the store, fired once per run across the cluster. What they start
 * goes through the ScheduleTargets port.
 */
export async function openSchedules(config: Config, log: Logger, core: { fleet: Fleet; store: Store; bus: EventBus }, life: Lifecycle): Promise<Scheduler> {
  // A scheduled call is a queued call (it waits for an offline device); a scheduled job is a fleet job, checked
  // as POST /v1/jobs checks it. Each carries the schedule's owner, so the key that made the schedule stays
  // answerable for what it started (fleet/key-grants.ts).
  const targets: ScheduleTargets = {
    async startCall(deviceId, tool, args, owner) {
      const id = normalizeDeviceId(deviceId) ?? deviceId;
      const c = await core.fleet.calls.enqueue({ deviceId: id, tool, arguments: args, tenant: owner?.tenant, principal: owner?.principal });
      return { callId: c.id };
    },
    async startJob(body, owner) {
      const parsed = JobBody.safeParse(body);
      if (!parsed.success)
        throw new GatewayError('INVALID_REQUEST', `the scheduled job is not a valid POST /v1/jobs body: ${parsed.error.message.slice(0, 500)}`);
      return { jobId: (await core.fleet.jobs.create({ ...jobRequest(parsed.data), principal: owner?.principal })).id };
    },
  };
  const scheduler = await Scheduler.open({
    store: core.store,
    targets,
    bus: core.bus,
    log,
    config: config.fleet.schedules,
    instanceId: config.cluster.instanceId,
    grants: core.fleet.grants,
  });
  life.defer('schedules', () => scheduler.close());
  return scheduler;
}

/** mcp.publish: the namespace served to remote MCP endpoints (each redials with backoff until closed). */
export async function publishFleet(config: Config, log: Logger, hub: McpHub, life: Lifecycle): Promise<void> {
  if (config.mcp.publish.length === 0) return;
  // Its code (and the MCP SDK behind it) loads only when a target is configured.
  const { FleetPublisher } = await import('./facade/publish.js').catch((e: unknown) => {
    throw new Error(`mcp.publish: the publisher could not be loaded: ${e instanceof Error ? e.message : String(e)}`);
  });
  for (const target of config.mcp.publish) {
    // The token is in the URL: logs name the endpoint by origin and path only.
    const u = new URL(target.url);
    const p = new FleetPublisher(hub, target, { log: log.child({ component: 'mcp-publish', endpoint: `${u.origin}${u.pathname}` }), version: GATEWAY_VERSION });
    p.start();
    life.defer('mcp publish', () => p.close());
  }
}

/** The embedded MQTT broker's options, from mqtt.* and tls.* (links/mqtt.ts). */
export function mqttOptions(
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
    maxUnreadBytes: maxUnreadBytes(config.voice.maxBufferedBytes),
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

/** PATCH /v1/devices/{id} (voice mode, name, room, tags, tenant) and DELETE: forgets the record, voice mode and credentials. */
export function deviceSettings(core: {
  registry: DeviceRegistry;
  directory: DeviceDirectory;
  enrollment: Enrollment | undefined;
  voice: Voice;
  records: DeviceRecords;
  fleet: Fleet;
  deviceTenants: DeviceTenants;
}): DeviceSettingsDeps {
  const { registry, directory, enrollment, voice, records } = core;
  const forget = deviceForgetter({
    registry,
    known: (id) => directory.get(id) !== undefined,
    voiceModes: voice.modes,
    enrollment,
    // Its queued calls are cancelled and its finished ones forgotten with it.
    also: [(id) => core.fleet.calls.forgetDevice(id)],
  });
  return { voiceModes: voice.modes, effectiveVoiceMode: (id) => voice.modeOf(id), records, forget, tenants: core.deviceTenants };
}

/**
 * Enrollment (device auth other than `open`): revoked credentials close the device's connection, and an enrollment
 * dropped past enrollment.maxUnconnected takes the id's tenant with it (red team 9).
 */
export async function enrollmentOf(
  config: Config,
  d: { deviceSecret: string; store: Store; log: Logger; metrics: Metrics; registry: DeviceRegistry; records: DeviceRecords; deviceTenants: DeviceTenants },
): Promise<Enrollment | undefined> {
  if (config.deviceAuth === 'open') return undefined;
  const onRevoked = (deviceId: string) => {
    for (const s of d.registry.sessions()) if (s.deviceId === deviceId) s.close(CLOSE_REVOKED, 'credentials revoked');
  };
  const { store, log, metrics, records } = d;
  const onDropped = (id: string) => d.deviceTenants.gone(id);
  return openEnrollment({ deviceSecret: d.deviceSecret, mqttGroup: config.mqtt.group, store, log, metrics, onRevoked, records, onDropped }, config.enrollment);
}
