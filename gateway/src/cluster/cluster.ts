import { randomBytes } from 'node:crypto';
import { CallToolResultSchema } from '@voxgate/protocol';
import { readFileSync } from 'node:fs';
import { Kvm } from '@nats-io/kv';
import { connect, credsAuthenticator, RequestError, TimeoutError, type Msg, type NatsConnection } from '@nats-io/transport-node';
import type { Registry } from 'prom-client';
import type { Logger } from 'pino';
import type { ClusterConfig } from './config.js';
import { CLOSE_REPLACED } from '../devices/link.js';
import { clampTimeout } from '../devices/call-queue.js';
import type { CatalogTool } from '../devices/catalog.js';
import type { CallOutcome, DeviceHandle } from '../devices/device-handle.js';
import type { DevicePresence, RemoteDevices } from '../devices/directory.js';
import type { DeviceRegistry } from '../devices/registry.js';
import type { SessionState } from '../devices/settings.js';
import { GatewayError } from '../errors.js';
import type { EventBus, GatewayEvent, ReplaySource } from '../events/bus.js';
import { withoutUserInfo } from '../nats/servers.js';
import { ThrottledLog } from '../throttle/throttled-log.js';
import { openEventStream } from './event-stream.js';
import { createClusterMetrics, type ClusterMetrics } from './metrics.js';
import { ClusterPresence, type SeenPresence } from './presence.js';
import { callSubject, eventSubject, EVENTS_WILDCARD, ForwardedCall, ForwardedReply, RelayedEvent } from './wire.js';

export interface ClusterConnectDeps {
  log: Logger;
  metricsRegistry: Registry;
  /** At most this many events are replayed to a client resuming with `Last-Event-ID` (the bus's own ring size). */
  replayLimit: number;
}

/** NATS reached and the event stream open: what the event bus replays from, before the instance joins. */
export interface ClusterConnection {
  readonly instanceId: string;
  readonly config: ClusterConfig;
  /** Resolves a `Last-Event-ID` from the cluster's event stream; nothing once the connection is closed. */
  readonly replay: ReplaySource;
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
}

export interface Cluster {
  instanceId: string;
  /** The devices the other instances hold: the root attaches them to its device directory. */
  devices: RemoteDevices;
  close(): Promise<void>;
}

const decoder = new TextDecoder();
/** Beyond the call's own timeout, how long the forwarding side waits for the owner's DEVICE_TIMEOUT answer. */
const FORWARD_MARGIN_MS = 2_000;
/**
 * While calls wait on an instance, how often NATS is asked whether it still listens on its subject: a killed
 * process loses its subscription at once (its socket closes), long before 3 missed heartbeats.
 */
const PROBE_MS = 500;
const PING = JSON.stringify({ op: 'ping' });

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
    const stream = await openEventStream(nc, config, d.replayLimit, log);
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
    const connected: Connected = { instanceId, config, replay, close, nc, log, metrics };
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
  /** Forwarded calls waiting for an instance's answer, so they fail at once when it is found gone. */
  const waiting = new Map<string, Set<(e: GatewayError) => void>>();
  const changeListeners = new Set<() => void>();
  /** Every call waiting on `owner` fails now with DEVICE_OFFLINE: the answer can no longer come. */
  const lost = (owner: string, why: string) => {
    const set = waiting.get(owner);
    waiting.delete(owner);
    for (const fail of set ?? []) fail(new GatewayError('DEVICE_OFFLINE', why));
  };
  /** False while the NATS connection is down: a request cannot reach anyone, an answer cannot come back. */
  let connected = true;
  const probes = new Map<string, NodeJS.Timeout>();
  const presence = new ClusterPresence({
    kv,
    instanceId,
    heartbeatMs: d.config.heartbeatMs,
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
      lost(id, `the gateway instance holding the device (${id}) is gone`);
    },
  });
  await presence.start();
  void (async () => {
    for await (const st of nc.status()) {
      if (st.type === 'disconnect') {
        connected = false;
        log.warn('lost the NATS connection: calls forwarded to other instances fail as offline until it is back');
        for (const owner of [...waiting.keys()]) lost(owner, `the gateway instance holding the device (${owner}) cannot be reached: this instance lost its NATS connection`);
      } else if (st.type === 'reconnect') connected = true;
    }
  })().catch((err: unknown) => log.warn({ err }, 'NATS status watch ended'));

  // Presence and events of the devices this instance holds. Events relayed from NATS are not sent back.
  let relaying = false;
  const offBus = d.bus.subscribe((e) => {
    if (relaying) return;
    writePresence(e);
    const body = JSON.stringify({ origin: instanceId, type: e.type, deviceId: e.deviceId, data: e.data, id: e.id, at: e.at });
    if (Buffer.byteLength(body) > d.config.maxMessageBytes) return void metrics.eventsRefused.inc();
    nc.publish(eventSubject(e.deviceId, e.type), body);
  });
  const eventsSub = nc.subscribe(EVENTS_WILDCARD, {
    callback: (err, msg) => {
      if (err) return;
      const e = parseMessage(msg, RelayedEvent, d.config.maxMessageBytes);
      if (!e) {
        metrics.eventsRefused.inc();
        return refusedLog({ subject: msg.subject.slice(0, 200), bytes: msg.data.length }, 'malformed event from NATS refused (one line per minute)');
      }
      if (e.origin === instanceId || staleOffline(e.type, e.deviceId, e.origin)) return;
      relaying = true;
      try {
        d.bus.publish(e.type, e.deviceId, e.data, e.id !== undefined && e.at !== undefined ? { id: e.id, at: e.at } : undefined);
      } finally {
        relaying = false;
      }
    },
  });

  /** The old instance's "offline" after a takeover: the device is online elsewhere (here, or at another instance). */
  function staleOffline(type: string, deviceId: string, origin: string): boolean {
    if (type !== 'device.offline') return false;
    if (d.registry.find(deviceId)) return true;
    const p = presence.remote(deviceId);
    return p !== undefined && p.entry.instance !== origin && p.entry.state !== 'offline';
  }

  function writePresence(e: GatewayEvent): void {
    if (e.type !== 'device.online' && e.type !== 'device.ready' && e.type !== 'device.offline' && e.type !== 'device.tools_changed') return;
    const summary = d.registry.get(e.deviceId);
    if (!summary) return;
    const s = d.registry.find(e.deviceId);
    const base = { instance: instanceId, transport: summary.transport, clientId: summary.clientId, connectedAt: summary.connectedAt, toolCount: summary.toolCount };
    if (e.type === 'device.online') void presence.write(e.deviceId, { ...base, state: 'online' }, true);
    else if (e.type === 'device.offline') void presence.write(e.deviceId, { ...base, state: 'offline', ...(summary.toolsHash ? { catalogHash: summary.toolsHash } : {}) }, false);
    else if (s?.catalog)
      void presence.write(e.deviceId, { ...base, state: 'ready', catalogHash: s.catalog.hash, toolCount: s.catalog.size, ...(summary.server ? { server: summary.server } : {}) }, false, s.catalog);
  }

  // Calls other instances forward here: only a live local session answers (never forwarded again).
  const callsSub = nc.subscribe(callSubject(instanceId), {
    callback: (err, msg) => {
      if (err) return;
      // Another instance checking this one is alive (see probe): answered, not counted as a call.
      if (msg.data.length === PING.length && decoder.decode(msg.data) === PING) return void respond(msg, JSON.stringify({ ok: true, result: null }));
      void serve(msg).then(
        (reply) => {
          metrics.served.inc({ outcome: reply.ok ? 'ok' : reply.code });
          let body = JSON.stringify(reply);
          if (Buffer.byteLength(body) > d.config.maxMessageBytes) body = JSON.stringify({ ok: false, code: 'DEVICE_ERROR', message: 'the result is too large to forward between instances', extra: {} });
          respond(msg, body);
        },
      );
    },
  });

  function respond(msg: Msg, body: string): void {
    try {
      msg.respond(body);
    } catch (err) {
      log.warn({ err }, 'could not answer a forwarded call (NATS connection closing)');
    }
  }

  async function serve(msg: Msg): Promise<ForwardedReply> {
    try {
      const c = parseMessage(msg, ForwardedCall, d.config.maxMessageBytes);
      if (!c) {
        refusedLog({ subject: msg.subject, bytes: msg.data.length }, 'malformed forwarded call refused (one line per minute)');
        throw new GatewayError('INVALID_REQUEST', 'malformed forwarded call');
      }
      if (c.op === 'ping') return { ok: true, result: null };
      const s = d.registry.find(c.deviceId);
      // Presence said this instance holds it, but it does not (any more): offline, as seen from the caller.
      if (!s) throw new GatewayError('DEVICE_OFFLINE', `device ${c.deviceId} is offline (no longer connected to gateway instance ${instanceId})`);
      if (c.op === 'call') return { ok: true, result: await s.call(c.name, c.args, c.timeoutMs === undefined ? {} : { timeoutMs: c.timeoutMs }) };
      if (c.op === 'rpc') return { ok: true, result: await s.rpc(c.name, c.args, c.timeoutMs === undefined ? {} : { timeoutMs: c.timeoutMs }) };
      s.notify(c.name, c.args);
      return { ok: true, result: null };
    } catch (e) {
      if (e instanceof GatewayError) return { ok: false, code: e.code, message: e.message, extra: e.extra };
      log.error({ err: e }, 'forwarded call failed');
      return { ok: false, code: 'INTERNAL', message: 'internal error on the instance holding the device', extra: {} };
    }
  }

  /** While calls wait on `owner`: nobody left listening on its subject means it is gone (presence hears too). */
  function probe(owner: string): void {
    if (probes.has(owner)) return;
    const timer = setInterval(() => {
      if (!waiting.has(owner)) {
        clearInterval(timer);
        probes.delete(owner);
        return;
      }
      nc.request(callSubject(owner), PING, { timeout: PROBE_MS }).catch((e: unknown) => {
        if (!(e instanceof RequestError && e.isNoResponders())) return; // slow or busy: the call's own timeout decides
        lost(owner, `the gateway instance holding the device (${owner}) is gone`);
        presence.dead(owner);
      });
    }, PROBE_MS);
    timer.unref();
    probes.set(owner, timer);
  }

  async function forward(owner: string, call: Exclude<ForwardedCall, { op: 'ping' }>, timeoutMs: number): Promise<unknown> {
    if (!connected) {
      metrics.forwarded.inc({ outcome: 'DEVICE_OFFLINE' });
      throw new GatewayError('DEVICE_OFFLINE', `device ${call.deviceId} cannot be reached: this gateway instance lost its NATS connection`);
    }
    let fail!: (e: GatewayError) => void;
    const gone = new Promise<never>((_, reject) => (fail = reject));
    let set = waiting.get(owner);
    if (!set) waiting.set(owner, (set = new Set()));
    set.add(fail);
    probe(owner);
    try {
      const msg = await Promise.race([nc.request(callSubject(owner), JSON.stringify(call), { timeout: timeoutMs + FORWARD_MARGIN_MS }), gone]);
      const reply = parseMessage(msg, ForwardedReply, d.config.maxMessageBytes);
      if (!reply) throw new GatewayError('DEVICE_ERROR', 'the instance holding the device sent a malformed answer');
      if (!reply.ok) throw new GatewayError(reply.code, reply.message, reply.extra);
      metrics.forwarded.inc({ outcome: 'ok' });
      return reply.result;
    } catch (e) {
      const err = forwardError(e, call.deviceId, owner);
      // Nobody subscribes to the owner's subject: it is gone (no need to wait for its missed heartbeats).
      if (e instanceof RequestError && e.isNoResponders()) presence.dead(owner);
      metrics.forwarded.inc({ outcome: err.code });
      throw err;
    } finally {
      set.delete(fail);
      if (set.size === 0 && waiting.get(owner) === set) waiting.delete(owner);
    }
  }

  const clamp = (t: number | undefined) => clampTimeout(t, d.calls);

  function handle(deviceId: string, p: SeenPresence): DeviceHandle {
    const owner = p.entry.instance;
    const catalog = p.entry.state === 'ready' ? presence.catalog(p.entry.catalogHash) : undefined;
    const state: SessionState = catalog ? 'ready' : 'initializing';
    return {
      deviceId,
      state,
      catalog,
      setup: undefined,
      findTool: (name: string): CatalogTool | undefined => catalog?.get(name),
      call: async (name: string, args: Record<string, unknown>, opts: { timeoutMs?: number } = {}) => {
        const result = await forward(owner, { op: 'call', deviceId, name, args, ...(opts.timeoutMs === undefined ? {} : { timeoutMs: opts.timeoutMs }) }, clamp(opts.timeoutMs));
        const parsed = CallToolResultSchema.safeParse(result);
        if (!parsed.success) throw new GatewayError('DEVICE_ERROR', `the instance holding device ${deviceId} sent a malformed tools/call result`);
        const { durationMs } = result as { durationMs?: unknown };
        return { ...parsed.data, durationMs: typeof durationMs === 'number' ? durationMs : 0 } as CallOutcome;
      },
      rpc: (method: string, params: Record<string, unknown> | undefined, opts: { timeoutMs?: number } = {}) =>
        forward(owner, { op: 'rpc', deviceId, name: method, ...(params ? { args: params } : {}), ...(opts.timeoutMs === undefined ? {} : { timeoutMs: opts.timeoutMs }) }, clamp(opts.timeoutMs)),
      notify: (method: string, params: Record<string, unknown> | undefined) => {
        try {
          nc.publish(callSubject(owner), JSON.stringify({ op: 'notify', deviceId, name: method, ...(params ? { args: params } : {}) }));
        } catch {
          throw new GatewayError('DEVICE_OFFLINE', `device ${deviceId} could not be reached through gateway instance ${owner}`);
        }
      },
    };
  }

  /** A device online on another live instance. */
  const remote = (deviceId: string): SeenPresence | undefined => {
    const p = presence.remote(deviceId);
    return p && p.entry.state !== 'offline' && presence.alive(p.entry.instance) ? p : undefined;
  };
  const devices: RemoteDevices = {
    find: (deviceId) => {
      const p = remote(deviceId);
      return p && handle(deviceId, p);
    },
    knows: (deviceId) => presence.remote(deviceId) !== undefined,
    ready: () => presence.readyRemote(),
    ids: () => presence.ids(),
    summary: (deviceId) => {
      const p = presence.remote(deviceId);
      return p && summarize(deviceId, p, remote(deviceId) !== undefined);
    },
    onChange: (fn) => {
      changeListeners.add(fn);
      return () => changeListeners.delete(fn);
    },
  };
  log.info({ servers: d.config.nats.servers.map(withoutUserInfo), bucket: d.config.bucket }, 'joined the cluster');

  return {
    instanceId,
    devices,
    close: async () => {
      offBus();
      for (const t of probes.values()) clearInterval(t);
      probes.clear();
      callsSub.unsubscribe();
      eventsSub.unsubscribe();
      // Bounded: with NATS unreachable, the last presence writes and the drain must not hold shutdown.
      const grace = 2 * d.config.heartbeatMs;
      await within(presence.stop(), grace);
      await within(nc.drain().catch(() => undefined), grace);
      if (!nc.isClosed()) await nc.close();
    },
  };
}

function within(p: Promise<unknown>, ms: number): Promise<unknown> {
  return Promise.race([p, new Promise((resolve) => setTimeout(resolve, ms).unref())]);
}

/** The message's JSON, parsed with the schema; undefined when too large or malformed. */
function parseMessage<T>(msg: Msg, schema: { safeParse(v: unknown): { success: true; data: T } | { success: false } }, maxBytes: number): T | undefined {
  if (msg.data.length > maxBytes) return undefined;
  try {
    const r = schema.safeParse(JSON.parse(decoder.decode(msg.data)));
    return r.success ? r.data : undefined;
  } catch {
    return undefined;
  }
}

/** NATS failures in the caller's terms: nobody listening for the owner means the device is offline. */
function forwardError(e: unknown, deviceId: string, owner: string): GatewayError {
  if (e instanceof GatewayError) return e;
  if (e instanceof RequestError && e.isNoResponders()) return new GatewayError('DEVICE_OFFLINE', `device ${deviceId} is offline (its gateway instance ${owner} is gone)`);
  if (e instanceof TimeoutError || (e instanceof RequestError && e.cause instanceof TimeoutError))
    return new GatewayError('DEVICE_TIMEOUT', `device ${deviceId} did not answer in time (through gateway instance ${owner})`);
  return new GatewayError('DEVICE_OFFLINE', `device ${deviceId} could not be reached through gateway instance ${owner}`);
}

function summarize(deviceId: string, p: SeenPresence, online: boolean): DevicePresence {
  const e = p.entry;
  return {
    id: deviceId,
    clientId: e.clientId,
    transport: e.transport,
    online,
    state: online ? (e.state === 'ready' ? 'ready' : 'initializing') : 'offline',
    connectedAt: e.connectedAt,
    lastSeenAt: e.connectedAt,
    server: e.server ?? null,
    protocolVersion: null,
    toolCount: e.toolCount,
    toolsHash: e.catalogHash ?? null,
    pendingCalls: 0,
  };
}
