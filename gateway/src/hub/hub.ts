import type { CallToolResult, CompleteRequest, CompleteResult, GetPromptResult, ReadResourceResult } from '@modelcontextprotocol/client';
import type { Logger } from 'pino';
import { GatewayError } from '../errors.js';
import { canSee } from '../principal.js';
import type { EventBus } from '../events/bus.js';
import type { Metrics } from '../metrics.js';
import { ThrottledLog } from '../throttle/throttled-log.js';
import { KeyedTokenBucket } from '../throttle/token-bucket.js';
import type { FleetJobsPort } from './builtin.js';
import { CallRunner } from './call-runner.js';
import { callTarget } from './call-target.js';
import { ResourceUpdates, ServerChangeThrottles } from './change-throttle.js';
import type { ServerConfig } from './config.js';
import { DeviceTools } from './device-tools.js';
import { CallsInFlight } from './in-flight.js';
import type { ToolTarget } from './names.js';
import { ToolNamespace, visibleTo } from './namespace.js';
import { peerRefusalLog, routePeerRequest } from './peer-requests.js';
import { ServerLists } from './server-lists.js';
import type {
  Caller,
  DeviceToolMode,
  DeviceVisibility,
  HubDevices,
  HubPrompt,
  HubResource,
  HubResourceTemplate,
  HubTool,
  Instructions,
  LogListener,
  ResourceUpdatedListener,
} from './types.js';
import type { CallContext, HubSettings, ServerStatus, Upstream } from './upstream/base.js';
import { createUpstream } from './upstream/create.js';
import { TickSignal } from './tick-signal.js';

export type {
  Caller,
  DeviceToolMode,
  HubPrompt,
  HubResource,
  HubResourceTemplate,
  HubTool,
  Instructions,
  LogListener,
  ResourceUpdatedListener,
} from './types.js';

export interface HubDeps {
  log: Logger;
  metrics: Metrics;
  registry: HubDevices;
  bus: Pick<EventBus, 'subscribe'>;
  servers: ServerConfig[];
  /** Upstream servers are hosted (MCP_ENABLED and a config). Device tools work either way. */
  enabled: boolean;
  settings: HubSettings;
  deviceTools: DeviceToolMode;
  deviceCallTimeoutMs: number;
  /** Devices one devices_list result names at most. */
  devicesListMax: number;
  /** Each device's tenant (devices/tenants.ts). Absent: no device has one, so only operator callers see devices. */
  deviceTenancy?: DeviceTenancyPort | undefined;
}

/** What the hub asks of device tenancy: a device's tenant, and word when any device's tenant changed. */
export interface DeviceTenancyPort {
  tenantOf(deviceId: string): string | undefined;
  /** A tenant's device ids, sorted (devices/tenants.ts): `devices_list` for a tenant reads these, not the fleet. */
  devicesOf?(tenant: string): readonly string[];
  onChange?(fn: () => void): () => void;
}

/**
 * The hub: every upstream MCP server, plus the devices, as one namespace of tools. Servers start in
 * parallel; one that fails is skipped (its state and error are kept). Listeners hear when the namespace
 * changes (a device came, went or changed its tools; a server's tools changed).
 */
export class McpHub {
  readonly upstreams = new Map<string, Upstream>();
  private readonly namespace: ToolNamespace;
  private readonly lists: ServerLists;
  private readonly devices: DeviceTools;
  private readonly calls = new CallsInFlight();
  private readonly runner: CallRunner;
  /** A token bucket per server for the log messages passed on to /mcp sessions: a chatty server can't flood every session. */
  private readonly logRate: KeyedTokenBucket;
  /** Every tool list may have changed (a device, a server, tenancy): one notification per tick. */
  private readonly toolsChanged: TickSignal;
  private readonly logListeners = new Set<LogListener>();
  private readonly updateListeners = new Set<ResourceUpdatedListener>();
  private offBus: (() => boolean) | undefined;
  private offRemote: (() => void) | undefined;
  private offTenancy: (() => void) | undefined;
  /** The one tenant rule (principal.ts) applied to devices: every device tool, listing and call asks it. */
  private readonly sees: DeviceVisibility;
  /** The hosted servers' resources, resource templates or prompts may have changed. */
  private readonly listsChanged: TickSignal;
  private readonly changeThrottles: ServerChangeThrottles;
  /** Requests from servers refused (peer-requests.ts): counted each, logged a few per server. */
  private readonly peerRefusals: ThrottledLog;
  /** Responses of servers to requests no one made: counted each, a line per server a minute. */
  private readonly unknownResponses: ThrottledLog;
  /** Servers past the unread bound: counted each time, a line per server a minute. */
  private readonly unread: ThrottledLog;
  /** stdio servers past their read budget: counted each time, a line per server a minute. */
  private readonly readPaused: ThrottledLog;
  private readonly resourceUpdates: ResourceUpdates;
  private closed = false;
  private fleetJobs: FleetJobsPort | undefined;

  get settings(): HubSettings {
    return this.d.settings;
  }

  constructor(private readonly d: HubDeps) {
    this.toolsChanged = new TickSignal(d.log, 'tools-changed');
    this.listsChanged = new TickSignal(d.log, 'lists-changed');
    this.changeThrottles = new ServerChangeThrottles(d.log, d.metrics.hubChangesHeld, d.settings.changeWindowMs);
    this.peerRefusals = peerRefusalLog(d.log);
    this.unknownResponses = new ThrottledLog(d.log, 'warn', { linesPerWindow: 1, windowMs: 60_000, maxKeys: 1024 });
    this.unread = new ThrottledLog(d.log, 'warn', { linesPerWindow: 1, windowMs: 60_000, maxKeys: 1024 });
    this.readPaused = new ThrottledLog(d.log, 'warn', { linesPerWindow: 1, windowMs: 60_000, maxKeys: 1024 });
    const logRate = d.settings.logRatePerSecond;
    this.logRate = new KeyedTokenBucket({ ratePerSecond: logRate, burst: logRate }, { maxKeys: 1024, now: () => performance.now() });
    if (d.enabled) for (const cfg of d.servers) this.upstreams.set(cfg.name, this.upstreamFor(cfg));
    const tenancy = d.deviceTenancy;
    this.sees = (caller, deviceId) => canSee(caller, tenancy?.tenantOf(deviceId));
    this.namespace = new ToolNamespace(this.upstreams, d.registry, d.deviceTools, this.sees);
    this.lists = new ServerLists(this.upstreams, d.log);
    this.resourceUpdates = new ResourceUpdates(
      this.changeThrottles,
      (server, uri) => this.lists.isSubscribed(server, uri),
      (server, uri) => this.emit(this.updateListeners, (l) => l(server, uri)),
    );
    const devicesOf = tenancy?.devicesOf?.bind(tenancy);
    this.devices = new DeviceTools({ ...d, sees: this.sees, ...(devicesOf ? { devicesOf } : {}) });
    this.runner = new CallRunner({ ...d, upstreams: this.upstreams, namespace: this.namespace, devices: this.devices, calls: this.calls });
    this.offBus = d.bus.subscribe((e) => {
      if (e.type === 'device.ready' || e.type === 'device.tools_changed' || e.type === 'device.offline') this.changed();
    });
    this.offRemote = d.registry.onChange(() => this.changed());
    // A device moved to another tenant: every caller's tool list changes.
    this.offTenancy = d.deviceTenancy?.onChange?.(() => this.changed());
  }

  /** The fleet's jobs, for the `fleet_start_job` builtin: the fleet is made after the hub. */
  useFleetJobs(port: FleetJobsPort): void {
    this.fleetJobs = port;
  }

  private upstreamFor(cfg: ServerConfig): Upstream {
    const d = this.d;
    // What one server announces reaches every /mcp session: at most once a second per server (change-throttle.ts).
    const toolsChanged = this.changeThrottles.for(cfg.name, () => this.toolsChanged.fire());
    const listsChanged = this.changeThrottles.for(cfg.name, () => this.listsChanged.fire());
    return createUpstream(cfg, {
      fleetJobs: () => this.fleetJobs,
      log: d.log.child({ component: 'hub', server: cfg.name, type: cfg.type }),
      settings: d.settings,
      onToolsChanged: () => {
        this.namespace.invalidate();
        toolsChanged();
      },
      // A server that comes, goes or restarts changes what resources/list and prompts/list answer.
      onStateChange: (state) => {
        d.metrics.hubServerStates.inc({ state });
        listsChanged();
      },
      onListsChanged: listsChanged,
      onOversized: () => d.metrics.hubOversized.inc(),
      onUnread: (transport) => {
        d.metrics.hubUnread.inc({ transport });
        const msg =
          transport === 'stdio'
            ? 'MCP server is not reading its stdin: messages to it refused (its calls fail) until it reads'
            : 'MCP server stopped reading what it is sent; its WebSocket cut';
        this.unread.write({ server: cfg.name, transport }, msg, cfg.name);
      },
      onReadPaused: () => {
        d.metrics.readsPaused.inc({ transport: 'mcp_stdio', budget: 'server' });
        const fields = { server: cfg.name, readBytesPerSecond: cfg.readBytesPerSecond ?? d.settings.stdioReadBytesPerSecond };
        this.readPaused.write(fields, 'MCP server sends more than its read budget (mcp.stdioReadBytesPerSecond); reading its output paused', cfg.name);
      },
      onLog: (params) => {
        if (this.logRate.take(cfg.name).ok) this.emit(this.logListeners, (l) => l(cfg.name, params));
        else d.metrics.hubLogsDropped.inc();
      },
      onResourceUpdated: (uri) => this.resourceUpdates.updated(cfg.name, uri),
      // A tool process answering ids never asked: the SDK drops each; counted as the endpoint's other frames it refuses.
      onUnknownResponse: () => {
        d.metrics.framesRejected.inc({ reason: 'unknown_id' });
        const msg = 'MCP server sent responses to requests nobody made (late, repeated or made up); dropped';
        this.unknownResponses.write({ server: cfg.name }, msg, cfg.name);
      },
      onPeerRequest: (method, params, signal) =>
        routePeerRequest({ calls: this.calls, metrics: d.metrics, refusals: this.peerRefusals }, cfg.name, method, params, signal),
      onSchemaRefused: (reason) => d.metrics.schemasRefused.inc({ source: 'server', reason }),
      onToolsCut: (reason) => d.metrics.hubToolListsCut.inc({ reason }),
    });
  }

  /** Connect every server at once; resolves when each has connected or failed. Never rejects. */
  async start(): Promise<void> {
    const list: Upstream[] = [];
    for (const u of this.upstreams.values()) {
      if (u.config.disabled) u.disable();
      else list.push(u);
    }
    const results = await Promise.allSettled(list.map((u) => u.start()));
    results.forEach((r, i) => {
      const u = list[i]!;
      if (r.status === 'rejected') {
        this.d.metrics.hubConnects.inc({ outcome: 'failed' });
        this.d.log.warn({ server: u.config.name, type: u.config.type, err: u.lastError }, 'MCP server failed to start; skipped');
      } else this.d.metrics.hubConnects.inc({ outcome: 'ok' });
    });
    const ready = list.filter((u) => u.state === 'ready').length;
    if (list.length && !this.closed) this.d.log.info({ servers: list.length, ready }, 'MCP hub started');
  }

  /**
   * Add a server at run time (an MCP endpoint a tool process dials into): its tools join the namespace
   * as soon as it is ready. The name must be free; the caller starts it.
   */
  addServer(cfg: ServerConfig): Upstream {
    if (this.closed) throw new GatewayError('SHUTTING_DOWN', 'the hub is closed');
    if (this.upstreams.has(cfg.name)) throw new GatewayError('INVALID_REQUEST', `a server named "${cfg.name}" exists`);
    const u = this.upstreamFor(cfg);
    this.upstreams.set(cfg.name, u);
    this.changed();
    return u;
  }

  /** Remove a server added at run time; its connection is closed and its tools leave the namespace. */
  async removeServer(name: string): Promise<void> {
    const u = this.upstreams.get(name);
    if (!u) return;
    this.upstreams.delete(name);
    this.changed();
    await u.close();
  }

  onToolsChanged(fn: () => void): () => void {
    return this.toolsChanged.on(fn);
  }

  /**
   * Listeners told when the hosted servers' resources, resource templates or prompts may have changed: a server
   * became ready or stopped being ready, or said so itself. (Devices have none: their comings and goings do not count.)
   */
  onListsChanged(fn: () => void): () => void {
    return this.listsChanged.on(fn);
  }

  /** The namespace is stale at once; listeners hear of it once per tick (a fleet reconnecting is one notification). */
  private changed(): void {
    this.namespace.invalidate();
    this.toolsChanged.fire();
  }

  visible(u: Upstream, caller: Caller): boolean {
    return visibleTo(u, caller);
  }

  /** Every server's status (the caller's tenant only). */
  servers(caller: Caller): ServerStatus[] {
    return [...this.upstreams.values()].filter((u) => visibleTo(u, caller)).map((u) => u.status());
  }

  /** The provider-neutral tool list for this caller: servers' tools, device tools, generic device tools. */
  tools(caller: Caller): HubTool[] {
    return this.namespace.tools(caller);
  }

  /** Resolve a namespaced name to its target, for this caller; TOOL_NOT_FOUND otherwise. */
  resolve(name: string, caller: Caller): ToolTarget {
    return this.namespace.resolve(name, caller);
  }

  /**
   * The tool a call of `name` with `args` reaches, as it stands now, for deciding on it before running it
   * (a person's confirmation); undefined when there is nothing to reach (call-target.ts).
   */
  callTarget(name: string, args: Record<string, unknown>, caller: Caller): HubTool | undefined {
    return callTarget({ upstreams: this.upstreams, namespace: this.namespace, devices: this.devices }, name, args, caller);
  }

  /**
   * Call a namespaced tool. Unknown names and bad arguments are errors (TOOL_NOT_FOUND, INVALID_ARGUMENTS,
   * MISSING_TOKEN); everything that happens past that point (a server down, a timeout, an auth failure,
   * a device offline) is a result with `isError: true` and a sentence an LLM can pass on.
   */
  async call(name: string, args: Record<string, unknown>, ctx: CallContext & Caller): Promise<CallToolResult & { durationMs: number }> {
    const { result, durationMs } = await this.callTimed(name, args, ctx);
    // Not `{ ...result, durationMs }`: in Node 20's V8 a key added after a spread gives the object a map of its own.
    const out = Object.assign({}, result) as CallToolResult & { durationMs: number };
    out.durationMs = durationMs;
    return out;
  }

  /**
   * `call`, with the result as the tool's own object and the duration beside it: for a caller that passes the result
   * on as it is (the /mcp facade), no copy of it is made (issue 21, `mcpc1c`).
   */
  callTimed(name: string, args: Record<string, unknown>, ctx: CallContext & Caller): Promise<{ result: CallToolResult; durationMs: number }> {
    return this.runner.run(name, args, ctx);
  }

  /**
   * First step of shutdown: every call in flight, and every call from now on, answers a SHUTTING_DOWN
   * error result (upstreams get notifications/cancelled).
   */
  drain(): Promise<void> {
    return this.calls.drain();
  }

  resources(caller: Caller & CallContext): Promise<HubResource[]> {
    return this.lists.resources(caller);
  }
  readResource(uri: string, server: string | undefined, caller: Caller & CallContext): Promise<ReadResourceResult & { server: string }> {
    return this.lists.readResource(uri, server, caller);
  }
  prompts(caller: Caller & CallContext): Promise<HubPrompt[]> {
    return this.lists.prompts(caller);
  }
  getPrompt(name: string, args: Record<string, string>, caller: Caller & CallContext): Promise<GetPromptResult & { server: string }> {
    return this.lists.getPrompt(name, args, caller);
  }
  resourceTemplates(caller: Caller & CallContext): Promise<HubResourceTemplate[]> {
    return this.lists.resourceTemplates(caller);
  }
  complete(params: CompleteRequest['params'], caller: Caller & CallContext): Promise<CompleteResult> {
    return this.lists.complete(params, caller);
  }
  /** Subscribe (for one more /mcp session) to a resource; returns the owning server's name. */
  subscribe(uri: string, caller: Caller & CallContext): Promise<string> {
    return this.lists.subscribe(uri, caller);
  }
  unsubscribe(server: string, uri: string): Promise<void> {
    const done = this.lists.unsubscribe(server, uri);
    // The count drops before the upstream is told (server-lists.ts): the last subscription's end is known now.
    if (!this.lists.isSubscribed(server, uri)) this.resourceUpdates.forget(server, uri);
    return done;
  }

  /** For the assistant: system instructions, per-tool response instructions, auto-context tools. */
  instructions(caller: Caller): Instructions {
    const system: Instructions['system'] = [];
    for (const u of this.upstreams.values()) {
      if (!visibleTo(u, caller)) continue;
      if (u.config.systemInstruction) system.push({ server: u.config.name, instruction: u.config.systemInstruction });
    }
    const responseInstructions: Record<string, string> = {};
    const autoContextTools: string[] = [];
    for (const t of this.tools(caller)) {
      if (t.responseInstruction) responseInstructions[t.name] = t.responseInstruction;
      if (t.autoContext) autoContextTools.push(t.name);
    }
    return { system, responseInstructions, autoContextTools };
  }

  onLog(fn: LogListener): () => void {
    this.logListeners.add(fn);
    return () => this.logListeners.delete(fn);
  }
  onResourceUpdated(fn: ResourceUpdatedListener): () => void {
    this.updateListeners.add(fn);
    return () => this.updateListeners.delete(fn);
  }
  /** Whether a caller may see a server (and so its logs and resource updates). */
  serverVisible(server: string, caller: Caller): boolean {
    const u = this.upstreams.get(server);
    return u !== undefined && visibleTo(u, caller);
  }

  private emit<L>(listeners: Set<L>, call: (l: L) => void): void {
    for (const l of listeners) {
      try {
        call(l);
      } catch (err) {
        this.d.log.error({ err }, 'hub listener failed');
      }
    }
  }

  /** PIDs of running stdio children (for tests and the status page). */
  childPids(): number[] {
    const out: number[] = [];
    for (const u of this.upstreams.values()) if (u.childPid !== undefined) out.push(u.childPid);
    return out;
  }

  /**
   * Close every connection and end every child (TERM, KILL after the grace period). Safe while start()
   * is still connecting: a connect in progress is ended, not waited for.
   */
  async close(): Promise<void> {
    this.closed = true;
    this.offBus?.();
    this.offRemote?.();
    this.offTenancy?.();
    this.toolsChanged.close();
    this.listsChanged.close();
    await Promise.allSettled([...this.upstreams.values()].map((u) => u.close()));
  }
}
