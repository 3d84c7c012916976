import type { FastifyInstance } from 'fastify';
import type { Logger } from 'pino';
import type { Assistant } from './assistant/assistant.js';
import type { Cluster } from './cluster/cluster.js';
import type { Config } from './config.js';
import type { DeviceDirectory } from './devices/directory.js';
import type { DeviceRegistry } from './devices/registry.js';
import type { DeviceTenants } from './devices/tenants.js';
import type { Enrollment } from './enrollment/enrollment.js';
import type { EventBus } from './events/bus.js';
import type { Fleet } from './fleet/start.js';
import type { McpEndpoints } from './hub/endpoints.js';
import type { McpHub } from './hub/hub.js';
import type { MqttLink } from './links/mqtt.js';
import type { Metrics } from './metrics.js';
import type { Store } from './store/store.js';
import type { TlsCertificates } from './tls/certificates.js';
import type { Voice } from './voice/start.js';

/** A started gateway, as `startGateway` (gateway.ts) returns it: its parts, its ports, and `close`. */
export interface Gateway {
  /** Where callers find devices: the registry, and with the cluster on, the other instances' devices. */
  directory: DeviceDirectory;
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
  /** MCP endpoint tokens (tool processes that dial in), when mcp.endpoints.enabled. */
  mcpEndpoints: McpEndpoints | undefined;
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
  /** Reread the TLS files (SIGUSR2); false when there is no TLS or the new files do not load (the old certificate stays). */
  reloadTls(): boolean;
  /** This instance's part of the cluster, when `cluster.enabled`. */
  cluster: Cluster | undefined;
  /** Queued calls and fleet jobs. */
  fleet: Fleet;
  /** Which tenant each device belongs to (what a tenant's API key may see). */
  deviceTenants: DeviceTenants;
  close(): Promise<void>;
}
