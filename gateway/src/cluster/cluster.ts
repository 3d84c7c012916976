import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { Kvm } from '@nats-io/kv';
import { connect, credsAuthenticator, type NatsConnection } from '@nats-io/transport-node';
import type { Registry } from 'prom-client';
import type { Logger } from 'pino';
import type { ClusterConfig } from './config.js';
import type { RemoteDevices } from '../devices/directory.js';
import { CLOSE_REPLACED } from '../devices/link.js';
import type { DeviceRegistry } from '../devices/registry.js';
import { GatewayError } from '../errors.js';
import type { EventBus, ReplaySource } from '../events/bus.js';
import type { EventLog } from '../events/history.js';
import { withoutUserInfo } from '../nats/servers.js';
import { ThrottledLog } from '../throttle/throttled-log.js';
import { openEventStream } from './event-stream.js';
import { createClusterMetrics, type ClusterMetrics } from './metrics.js';
import { serveForwardedCalls } from './call-server.js';
import { relayEvents } from './event-relay.js';
import { Forwarder } from './forwarder.js';
import { ClusterPresence } from './presence.js';
import { remoteDevices } from './remote-devices.js';

export interface ClusterConnectDeps {
  log: Logger;
  metricsRegistry: Registry;
  /** At most this many events are replayed to a client resuming with `Last-Event-ID` (the bus's own ring size). */
  replayLimit: number;
  /** events.history's bounds: the event stream's, unless cluster.events sets its own. */
  history: { maxEvents: number; maxBytes: number; maxAgeMs: number };
}

/** NATS reached and the event stream open: what the event bus replays from, before the instance joins. */
export interface ClusterConnection {
  readonly instanceId: string;
  readonly config: ClusterConfig;
  /** Resolves a `Last-Event-ID` from the cluster's event stream; nothing once the connection is closed. */
  readonly replay: ReplaySource;
  /** The cluster's event history: the event stream every instance writes, read for `GET /v1/events/history`. */
  readonly history: EventLog;
  /** Close NATS (when the instance never joined; a joined cluster closes it itself). */
  close(): Promise<void>;
}

interface Connected extends ClusterConnection {
  nc: NatsConnection;
  log: Logger;
  metrics: ClusterMetrics;
}

export interface ClusterDeps {
  calls: { defaultTimeoutMs: number; maxTimeoutMs: number };
  registry: DeviceRegistry;
  bus: EventBus;
  /** `devices.catalogBudgetBytes`: bounds the other instances' catalogs kept here too (remote-catalogs.ts). */
  catalogBudgetBytes: number;
}

export interface Cluster {
  instanceId: string;
  /** The devices the other instances hold: the root attaches them to its device directory. */
  devices: RemoteDevices;
  close(): Promise<void>;
}

/** Reach NATS and open the event stream (it exists before the first event is published, so it holds every one). */
export async function connectCluster(config: ClusterConfig, d: ClusterConnectDeps): Promise<ClusterConnection> {
  const instanceId = config.instanceId ?? `gw-${randomBytes(4).toString('hex')}`;
  const log = d.log.child({ component: 'cluster', instance: instanceId });
  const metrics = createClusterMetrics(d.metricsRegistry);
  const creds = config.nats.credsFile;
  const servers = config.nats.servers.map(withoutUserInfo);
  const nc = await connect({
    servers: config.nats.servers,
    name: `voxgate-${instanceId}`,
    maxReconnectAttempts: -1,
    ...(creds ? { authenticator: credsAuthenticator(readFileSync(creds)) } : {}),
  }).catch((e: unknown) => {
    throw new Error(`cluster: cannot reach NATS at ${servers.join(', ')}: ${e instanceof Error ? e.message : String(e)}`);
  });
  const close = async () => {
    if (!nc.isClosed()) await nc.close();
  };
  try {
    const stream = await openEventStream(nc, config, { replayLimit: d.replayLimit, history: d.history }, log);
    const replay: ReplaySource = {
      replay: async (lastId) => {
        if (nc.isClosed()) return undefined;
        try {
          const r = await stream.replay(lastId);
          metrics.replays.inc({ outcome: r ? 'replayed' : 'not_found' });
          return r;
        } catch (err) {
          metrics.replays.inc({ outcome: 'failed' });
          log.warn({ err }, 'Last-Event-ID lookup in the cluster event stream failed; the client gets resync');
          return undefined;
        }
      },
    };
    const history: EventLog = {
      // Every instance already publishes its events into the stream (startCluster): nothing to append or flush here.
      append: () => undefined,
      read: async (q) => {
        if (nc.isClosed()) throw new GatewayError('SHUTTING_DOWN', 'the gateway is shutting down');
        return stream.read(q);
      },
      replay: replay.replay,
      close: () => undefined,
    };
    const connected: Connected = { instanceId, config, replay, history, close, nc, log, metrics };
    return connected;
  } catch (e) {
    await close();
    throw e;
  }
}

/**
 * This instance's part of the cluster: it writes the presence of the devices it holds, answers calls other
 * instances forward to it, forwards calls for devices it does not hold, and relays events both ways.
 */
export async function startCluster(connection: ClusterConnection, deps: ClusterDeps): Promise<Cluster> {
  const { nc, instanceId, log, metrics, config } = connection as Connected;
  const d = { ...deps, config };
  const kv = await new Kvm(nc).create(d.config.bucket, { history: 1, maxValueSize: d.config.maxMessageBytes });
  // Whatever can publish on the NATS account can send junk: one warning per minute, the counters say how much.
  const refused = new ThrottledLog(log, 'warn', { linesPerWindow: 1, windowMs: 60_000 });
  const refusedLog = (obj: Record<string, unknown>, msg: string) => void refused.write(obj, msg);
  const changeListeners = new Set<() => void>();
  const forwarder = new Forwarder({ nc, metrics, maxMessageBytes: d.config.maxMessageBytes, dead: (owner: string) => presence.dead(owner) });
  const presence = new ClusterPresence({
    kv,
    instanceId,
    heartbeatMs: d.config.heartbeatMs,
    catalogBudgetBytes: d.catalogBudgetBytes,
    log,
    onTakenOver: (deviceId) => {
      const s = d.registry.find(deviceId);
      if (!s) return;
      metrics.takeovers.inc();
      log.info({ deviceId }, 'the device connected to another instance; closing the connection here');
      s.failAll(new GatewayError('DEVICE_OFFLINE', `device ${deviceId} reconnected to another instance; the call was on the replaced connection`));
      s.close(CLOSE_REPLACED, 'replaced by a newer connection');
    },
    onRemoteChange: () => {
      for (const fn of changeListeners) fn();
    },
    onInstanceDead: (id) => {
      metrics.instancesLost.inc();
      forwarder.lost(id, `the gateway instance holding the device (${id}) is gone`);
    },
  });
  await presence.start();
  void (async () => {
    for await (const st of nc.status()) {
      if (st.type === 'disconnect') {
        log.warn('lost the NATS connection: calls forwarded to other instances fail as offline until it is back');
        forwarder.disconnected();
      } else if (st.type === 'reconnect') forwarder.reconnected();
    }
  })().catch((err: unknown) => log.warn({ err }, 'NATS status watch ended'));

  const relay = relayEvents({
    nc,
    instanceId,
    bus: d.bus,
    registry: d.registry,
    presence,
    metrics,
    maxMessageBytes: d.config.maxMessageBytes,
    refused: refusedLog,
  });
  const callsSub = serveForwardedCalls({ nc, instanceId, registry: d.registry, metrics, maxMessageBytes: d.config.maxMessageBytes, log, refused: refusedLog });
  const devices = remoteDevices({ nc, presence, forwarder, calls: d.calls, changeListeners });
  log.info({ servers: d.config.nats.servers.map(withoutUserInfo), bucket: d.config.bucket }, 'joined the cluster');

  return {
    instanceId,
    devices,
    close: async () => {
      relay.close();
      forwarder.close();
      callsSub.unsubscribe();
      // Bounded: with NATS unreachable, the last presence writes and the drain must not hold shutdown.
      const grace = 2 * d.config.heartbeatMs;
      await within(presence.stop(), grace);
      await within(
        nc.drain().catch(() => undefined),
        grace,
      );
      if (!nc.isClosed()) await nc.close();
    },
  };
}

function within(p: Promise<unknown>, ms: number): Promise<unknown> {
  return Promise.race([p, new Promise((resolve) => setTimeout(resolve, ms).unref())]);
}
