import { normalizeDeviceId } from '@voxgate/protocol';
import {
  ProtocolError,
  ProtocolErrorCode,
  type CallToolResult,
  type CompleteRequest,
  type CompleteResult,
  type GetPromptResult,
  type LoggingMessageNotificationParams,
  type Prompt,
  type ReadResourceResult,
  type Resource,
  type ResourceTemplateType,
  type Tool,
} from '@modelcontextprotocol/client';
import type { Logger } from 'pino';
import type { ToolCatalog } from '../devices/catalog.js';
import type { DeviceRegistry } from '../devices/registry.js';
import { GatewayError } from '../errors.js';
import type { EventBus } from '../events/bus.js';
import type { Metrics } from '../metrics.js';
import type { ServerConfig } from './config.js';
import type { Tokens } from './credentials.js';
import { buildNamespace, deviceToolRaw, serverToolRaw, TOOL_NAME, type ToolTarget } from './names.js';
import { rewriteToolReferences } from '../devices/tool-references.js';
import { createUpstream, McpUpstream, type CallContext, type HubSettings, type Peer, type PeerMethod, type ServerStatus, type Upstream } from './upstream.js';
import { invalidArguments } from '../schemas/validators.js';

export type DeviceToolMode = 'per_device' | 'generic' | 'both';


/** A caller: its tenant (from its API key), if any. */
export interface Caller {
  tenant?: string | undefined;
}

/** One tool in the provider-neutral list: what an LLM sees, plus where it goes. */
export interface HubTool {
  name: string;
  description: string;
  inputSchema: Record<string, unknown>;
  /** A hosted server's own fields, passed on unchanged. */
  title?: string;
  outputSchema?: Record<string, unknown>;
  annotations?: Record<string, unknown>;
  source: { kind: 'server'; server: string; tool: string } | { kind: 'device'; deviceId: string; tool: string } | { kind: 'generic' };
  /** The server's `response_instruction`, for the assistant to add after this tool ran. */
  responseInstruction?: string;
  /** Listed in its server's `auto_context_tool`. */
  autoContext?: boolean;
}

export interface HubPrompt extends Prompt {
  server: string;
  /** The server's own prompt name. */
  prompt: string;
}
export interface HubResource extends Resource {
  server: string;
}
export interface HubResourceTemplate extends ResourceTemplateType {
  server: string;
}
export type LogListener = (server: string, params: LoggingMessageNotificationParams) => void;
export type ResourceUpdatedListener = (server: string, uri: string) => void;

export interface Instructions {
  system: Array<{ server: string; instruction: string }>;
  responseInstructions: Record<string, string>;
  autoContextTools: string[];
}

export interface HubDeps {
  log: Logger;
  metrics: Metrics;
  registry: DeviceRegistry;
  bus: EventBus;
  servers: ServerConfig[];
  /** Upstream servers are hosted (MCP_ENABLED and a config). Device tools work either way. */
  enabled: boolean;
  settings: HubSettings;
  deviceTools: DeviceToolMode;
  deviceCallTimeoutMs: number;
  /** Devices one devices_list result names at most. */
  devicesListMax: number;
}

const GENERIC_TOOLS: Record<'devices_list' | 'device_call', Omit<HubTool, 'name' | 'source'>> = {
  devices_list: {
    description: 'Lists the voice devices connected to the gateway, with the tools each one offers. Call it before device_call.',
    inputSchema: { type: 'object', properties: { online_only: { type: 'boolean', description: 'Only devices online now (default true)' } }, additionalProperties: false },
    annotations: { readOnlyHint: true },
  },
  device_call: {
    description: 'Calls a tool on one device. Get device ids and tool names from devices_list.',
    inputSchema: {
      type: 'object',
      properties: {
        device_id: { type: 'string', maxLength: 64, description: 'Device id (MAC address) from devices_list' },
        tool: { type: 'string', maxLength: 256, description: "The device's tool name, e.g. self.audio_speaker.set_volume" },
        arguments: { type: 'object', description: "The tool's arguments", additionalProperties: true },
      },
      required: ['device_id', 'tool'],
      additionalProperties: false,
    },
  },
};

/**
 * The hub: every upstream MCP server, plus the devices, as one namespace of tools. Servers start in
 * parallel; one that fails is skipped (its state and error are kept). Listeners hear when the namespace
 * changes (a device came, went or changed its tools; a server's tools changed).
 */
export class McpHub {
  readonly upstreams = new Map<string, Upstream>();
  private readonly listeners = new Set<() => void>();
  private version = 0;
  private ns: { version: number; map: Map<string, ToolTarget>; byTarget: Map<string, string> } | undefined;
  private offBus: (() => boolean) | undefined;
  private offRemote: (() => boolean) | undefined;
  private notifyScheduled = false;
  private closed = false;
  /** Calls in flight, so that shutdown can answer each one (SHUTTING_DOWN) and tell its upstream to cancel. */
  private readonly inflight = new Set<InFlight>();
  private readonly logListeners = new Set<LogListener>();
  private readonly updateListeners = new Set<ResourceUpdatedListener>();
  /** Upstream resource subscriptions, counted over /mcp sessions: `server\0uri` -> sessions. */
  private readonly subscribed = new Map<string, number>();
  private draining = false;

  constructor(private readonly d: HubDeps) {
    if (d.enabled)
      for (const cfg of d.servers) {
        const log = d.log.child({ component: 'hub', server: cfg.name, type: cfg.type });
        this.upstreams.set(
          cfg.name,
          createUpstream(cfg, {
            log,
            settings: d.settings,
            onToolsChanged: () => this.changed(),
            onStateChange: (state) => d.metrics.hubServerStates.inc({ state }),
            onOversized: () => d.metrics.hubOversized.inc(),
            onLog: (params) => {
              if (this.logAllowed(cfg.name)) this.emit(this.logListeners, (l) => l(cfg.name, params));
              else d.metrics.hubLogsDropped.inc();
            },
            onResourceUpdated: (uri) => this.emit(this.updateListeners, (l) => l(cfg.name, uri)),
            onPeerRequest: (method, params, signal) => this.peerRequest(cfg.name, method, params, signal),
            onSchemaRefused: (reason) => d.metrics.schemasRefused.inc({ source: 'server', reason }),
          }),
        );
      }
    this.offBus = d.bus.subscribe((e) => {
      if (e.type === 'device.ready' || e.type === 'device.tools_changed' || e.type === 'device.offline') this.changed();
    });
    this.offRemote = d.registry.onRemoteChange(() => this.changed());
  }

  /** Connect every server at once; resolves when each has connected or failed. Never rejects. */
  async start(): Promise<void> {
    const list = [...this.upstreams.values()].filter((u) => {
      if (u.config.disabled) u.state = 'disabled';
      return !u.config.disabled;
    });
    const results = await Promise.allSettled(list.map((u) => u.start()));
    results.forEach((r, i) => {
      const u = list[i]!;
      if (r.status === 'rejected') {
        this.d.metrics.hubConnects.inc({ outcome: 'failed' });
        this.d.log.warn({ server: u.config.name, type: u.config.type, err: u.lastError }, 'MCP server failed to start; skipped');
      } else this.d.metrics.hubConnects.inc({ outcome: 'ok' });
    });
    const ready = list.filter((u) => u.state === 'ready').length;
    if (list.length) this.d.log.info({ servers: list.length, ready }, 'MCP hub started');
  }

  onToolsChanged(fn: () => void): () => void {
    this.listeners.add(fn);
    return () => this.listeners.delete(fn);
  }

  /** Coalesce bursts (a fleet reconnecting) into one notification per tick. */
  private changed(): void {
    this.version++;
    if (this.notifyScheduled || this.closed) return;
    this.notifyScheduled = true;
    setImmediate(() => {
      this.notifyScheduled = false;
      for (const l of this.listeners) {
        try {
          l();
        } catch (err) {
          this.d.log.error({ err }, 'tools-changed listener failed');
        }
      }
    });
  }

  visible(u: Upstream, caller: Caller): boolean {
    const t = u.config.tenants;
    return !t || (caller.tenant !== undefined && t.includes(caller.tenant));
  }

  /** Every server's status (the caller's tenant only). */
  servers(caller: Caller): ServerStatus[] {
    return [...this.upstreams.values()].filter((u) => this.visible(u, caller)).map((u) => u.status());
  }

  private namespace() {
    if (this.ns?.version === this.version) return this.ns;
    const entries: Array<{ raw: string; target: ToolTarget }> = [];
    for (const u of this.upstreams.values())
      for (const t of u.knownTools) entries.push({ raw: serverToolRaw(u.config.name, t.name), target: { kind: 'server', server: u.config.name, tool: t.name } });
    if (this.d.deviceTools !== 'generic')
      for (const s of this.readyDevices()) {
        if ((s.state !== undefined && s.state !== 'ready') || !s.catalog) continue;
        for (const t of s.catalog.tools) if (!t.userOnly) entries.push({ raw: deviceToolRaw(s.deviceId, t.name), target: { kind: 'device', deviceId: s.deviceId, tool: t.name } });
      }
    if (this.d.deviceTools !== 'per_device') {
      entries.push({ raw: 'devices_list', target: { kind: 'generic', tool: 'devices_list' } });
      entries.push({ raw: 'device_call', target: { kind: 'generic', tool: 'device_call' } });
    }
    const map = buildNamespace(entries);
    const byTarget = new Map<string, string>();
    for (const [name, t] of map) byTarget.set(targetKey(t), name);
    this.ns = { version: this.version, map, byTarget };
    return this.ns;
  }

  /** Local sessions, plus (cluster) the ready devices of the other instances. */
  private readyDevices(): Array<{ deviceId: string; catalog?: ToolCatalog | undefined; state?: string }> {
    const remote = this.d.registry.remoteReady();
    const local = this.d.registry.sessions();
    return remote.length === 0 ? local : [...local, ...remote];
  }

  /** The provider-neutral tool list for this caller: servers' tools, device tools, generic device tools. */
  tools(caller: Caller): HubTool[] {
    const ns = this.namespace();
    const out: HubTool[] = [];
    for (const u of this.upstreams.values()) {
      if (!this.visible(u, caller)) continue;
      for (const t of u.tools) {
        const name = ns.byTarget.get(targetKey({ kind: 'server', server: u.config.name, tool: t.name }));
        if (!name) continue;
        const entry: HubTool = { name, description: t.description ?? '', inputSchema: t.inputSchema as Record<string, unknown>, source: { kind: 'server', server: u.config.name, tool: t.name } };
        if (t.annotations) entry.annotations = t.annotations as Record<string, unknown>;
        if (typeof t.title === 'string') entry.title = t.title;
        if (t.outputSchema) entry.outputSchema = t.outputSchema as Record<string, unknown>;
        if (u.config.responseInstruction) entry.responseInstruction = u.config.responseInstruction;
        if (u.config.autoContextTools.includes(t.name)) entry.autoContext = true;
        out.push(entry);
      }
    }
    if (this.d.deviceTools !== 'generic')
      for (const s of this.readyDevices()) {
        if ((s.state !== undefined && s.state !== 'ready') || !s.catalog) continue;
        for (const t of s.catalog.tools) {
          if (t.userOnly) continue;
          const name = ns.byTarget.get(targetKey({ kind: 'device', deviceId: s.deviceId, tool: t.name }));
          if (!name) continue;
          // The firmware's own tool names inside descriptions become the names callers can call.
          const description = rewriteToolReferences(t.description, (tool) => ns.byTarget.get(targetKey({ kind: 'device', deviceId: s.deviceId, tool })));
          const entry: HubTool = { name, description: `[device ${s.deviceId}] ${description}`, inputSchema: t.inputSchema, source: { kind: 'device', deviceId: s.deviceId, tool: t.name } };
          if (t.annotations) entry.annotations = t.annotations;
          out.push(entry);
        }
      }
    if (this.d.deviceTools !== 'per_device')
      for (const [name, def] of Object.entries(GENERIC_TOOLS)) out.push({ name, ...def, source: { kind: 'generic' } });
    return out;
  }

  /** Resolve a namespaced name to its target, for this caller; TOOL_NOT_FOUND otherwise. */
  resolve(name: string, caller: Caller): ToolTarget {
    if (!TOOL_NAME.test(name)) throw new GatewayError('TOOL_NOT_FOUND', `"${name.slice(0, 80)}" is not a tool name`, { tool: name.slice(0, 80) });
    const t = this.namespace().map.get(name);
    if (!t) throw new GatewayError('TOOL_NOT_FOUND', `no tool named "${name}"; list them with GET /v1/tools or tools/list`, { tool: name });
    if (t.kind === 'server' && !this.visible(this.upstreams.get(t.server)!, caller))
      throw new GatewayError('TOOL_NOT_FOUND', `no tool named "${name}"; list them with GET /v1/tools or tools/list`, { tool: name });
    return t;
  }

  /**
   * Call a namespaced tool. Unknown names and bad arguments are errors (TOOL_NOT_FOUND, INVALID_ARGUMENTS,
   * MISSING_TOKEN); everything that happens past that point (a server down, a timeout, an auth failure,
   * a device offline) is a result with `isError: true` and a sentence an LLM can pass on.
   */
  async call(name: string, args: Record<string, unknown>, ctx: CallContext & Caller): Promise<CallToolResult & { durationMs: number }> {
    const started = performance.now();
    const target = this.resolve(name, ctx);
    const kind = target.kind;
    let result: CallToolResult;
    try {
      result = await this.tracked(ctx, target.kind === 'server' ? target.server : undefined, (signal) => this.dispatch(target, args, { ...ctx, signal }));
    } catch (e) {
      if (e instanceof GatewayError && ['TOOL_NOT_FOUND', 'INVALID_ARGUMENTS', 'MISSING_TOKEN', 'INVALID_REQUEST'].includes(e.code)) {
        this.d.metrics.hubCalls.inc({ kind, outcome: e.code.toLowerCase() });
        throw e;
      }
      result = errorResult(e);
    }
    const durationMs = Math.round((performance.now() - started) * 100) / 100;
    this.d.metrics.hubCalls.inc({ kind, outcome: result.isError ? 'tool_error' : 'ok' });
    this.d.log.info({ tool: name, kind, server: target.kind === 'server' ? target.server : undefined, deviceId: target.kind === 'device' ? target.deviceId : undefined, isError: Boolean(result.isError), ms: durationMs }, 'tool call');
    return { ...result, durationMs };
  }

  /** Run `work` with a signal that the caller's signal or shutdown aborts; shutdown also settles it at once. */
  private async tracked<T>(ctx: CallContext, server: string | undefined, work: (signal: AbortSignal) => Promise<T>): Promise<T> {
    if (this.draining) throw shuttingDown();
    const abort = new AbortController();
    const onCallerAbort = () => abort.abort(ctx.signal?.reason);
    ctx.signal?.addEventListener('abort', onCallerAbort, { once: true });
    let stop!: (e: Error) => void;
    const stopped = new Promise<never>((_resolve, reject) => (stop = reject));
    const entry: InFlight = { stop: () => (stop(shuttingDown()), abort.abort(shuttingDown())), done: Promise.resolve(), server, peer: ctx.peer };
    const run = Promise.race([work(abort.signal), stopped]);
    entry.done = run.then(
      () => undefined,
      () => undefined,
    );
    this.inflight.add(entry);
    try {
      return await run;
    } finally {
      this.inflight.delete(entry);
      ctx.signal?.removeEventListener('abort', onCallerAbort);
    }
  }

  /**
   * First step of shutdown: every call in flight, and every call from now on, answers a SHUTTING_DOWN
   * error result (upstreams get notifications/cancelled). Resolves once those answers are handed to the
   * callers' handlers, so they are written before connections close.
   */
  async drain(): Promise<void> {
    this.draining = true;
    const list = [...this.inflight];
    for (const c of list) c.stop();
    await Promise.all(list.map((c) => c.done));
    // One macrotask turn: the HTTP and /mcp handlers write their responses in the microtasks after settling.
    await new Promise<void>((resolve) => setImmediate(resolve));
  }

  private async dispatch(t: ToolTarget, args: Record<string, unknown>, ctx: CallContext): Promise<CallToolResult> {
    if (t.kind === 'server') {
      const u = this.upstreams.get(t.server)!;
      if (!u.hasTool(t.tool)) throw new GatewayError('TOOL_NOT_FOUND', `server "${t.server}" no longer offers "${t.tool}"`);
      // Checked here as for device tools (422), with the same linear-time validators: the server is spared
      // arguments its own schema refuses, and the caller learns which argument is wrong.
      const schema = u.inputSchemaOf(t.tool);
      const problems = schema && this.d.settings.validators.check(schema, args);
      if (problems) throw invalidArguments(t.tool, problems);
      return u.call(t.tool, args, ctx);
    }
    if (t.kind === 'device') return this.callDevice(t.deviceId, t.tool, args, ctx);
    if (t.tool === 'devices_list') {
      const onlineOnly = args['online_only'] !== false;
      // One page: a fleet of thousands must not become one tool result (an LLM's context, a /mcp message).
      const page = this.d.registry.page(onlineOnly ? { online: true } : {}, { limit: this.d.devicesListMax, after: undefined });
      const devices = page.devices
        .map((d) => {
          const session = d.online ? this.safeHandle(d.id) : undefined;
          const tools = session?.catalog?.tools.filter((x) => !x.userOnly).map((x) => ({ name: x.name, description: x.description, inputSchema: x.inputSchema })) ?? [];
          return { device_id: d.id, online: d.online, state: d.state, board: d.server?.name ?? null, tools };
        });
      const listed = page.next === undefined ? { devices } : { devices, truncated: true, note: `only the first ${this.d.devicesListMax} devices are listed; call device_call with any device id` };
      return { content: [{ type: 'text', text: JSON.stringify(listed) }], structuredContent: listed };
    }
    const deviceId = args['device_id'];
    const tool = args['tool'];
    const a = args['arguments'] ?? {};
    if (typeof deviceId !== 'string' || typeof tool !== 'string' || typeof a !== 'object' || a === null || Array.isArray(a))
      throw new GatewayError('INVALID_ARGUMENTS', 'device_call needs {"device_id": string, "tool": string, "arguments": object}');
    // Any MAC spelling names the device; anything else is looked up as given (and not found).
    return this.callDevice(normalizeDeviceId(deviceId) ?? deviceId, tool, a as Record<string, unknown>, ctx);
  }

  /** The device's local session, or (cluster) the handle of the instance holding it, whose catalog is known here. */
  private safeHandle(id: string) {
    try {
      return this.d.registry.device(id);
    } catch {
      return undefined;
    }
  }

  private async callDevice(deviceId: string, tool: string, args: Record<string, unknown>, ctx: CallContext): Promise<CallToolResult> {
    const session = this.d.registry.device(deviceId);
    if (session.findTool(tool)?.userOnly) throw new GatewayError('TOOL_NOT_FOUND', `"${tool}" on device ${deviceId} is for people only, not for an LLM`);
    const out = await session.call(tool, args, { timeoutMs: ctx.timeoutMs ?? this.d.deviceCallTimeoutMs });
    const { durationMs: _d, ...result } = out;
    return result as CallToolResult;
  }

  /** Resources of every visible server that has them. A server that fails is skipped (logged). */
  async resources(caller: Caller & CallContext): Promise<HubResource[]> {
    const out: HubResource[] = [];
    await Promise.all(
      [...this.upstreams.values()]
        .filter((u) => this.visible(u, caller))
        .map(async (u) => {
          try {
            for (const r of await u.listResources(caller)) out.push({ ...r, server: u.config.name });
          } catch (e) {
            this.d.log.warn({ server: u.config.name, err: (e as Error).message }, 'resources/list failed');
          }
        }),
    );
    return out.sort((a, b) => (a.server + a.uri < b.server + b.uri ? -1 : 1));
  }

  async readResource(uri: string, server: string | undefined, caller: Caller & CallContext): Promise<ReadResourceResult & { server: string }> {
    let u = server ? this.upstreams.get(server) : undefined;
    if (server && (!u || !this.visible(u, caller))) throw new GatewayError('SERVER_NOT_FOUND', `no MCP server "${server}"`);
    u ??= await this.ownerOf(uri, caller);
    return { ...(await u.readResource(uri, caller)), server: u.config.name };
  }

  async prompts(caller: Caller & CallContext): Promise<HubPrompt[]> {
    const lists = await Promise.all(
      [...this.upstreams.values()]
        .filter((u) => this.visible(u, caller))
        .map(async (u) => {
          try {
            return (await u.listPrompts(caller)).map((p) => ({ server: u.config.name, p }));
          } catch (e) {
            this.d.log.warn({ server: u.config.name, err: (e as Error).message }, 'prompts/list failed');
            return [];
          }
        }),
    );
    const flat = lists.flat();
    const ns = buildNamespace(flat.map(({ server, p }) => ({ raw: serverToolRaw(server, p.name), target: { kind: 'server', server, tool: p.name } })));
    const byTarget = new Map([...ns].map(([name, t]) => [targetKey(t), name]));
    return flat.map(({ server, p }) => ({ ...p, name: byTarget.get(targetKey({ kind: 'server', server, tool: p.name }))!, server, prompt: p.name }));
  }

  async getPrompt(name: string, args: Record<string, string>, caller: Caller & CallContext): Promise<GetPromptResult & { server: string }> {
    const p = (await this.prompts(caller)).find((x) => x.name === name);
    if (!p) throw new GatewayError('NOT_FOUND', `no prompt named "${name.slice(0, 100)}"`);
    return { ...(await this.upstreams.get(p.server)!.getPrompt(p.prompt, args, caller)), server: p.server };
  }

  /** For the assistant: system instructions, per-tool response instructions, auto-context tools. */
  instructions(caller: Caller): Instructions {
    const system: Instructions['system'] = [];
    for (const u of this.upstreams.values()) {
      if (!this.visible(u, caller)) continue;
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

  /** Resource templates of every visible server that has them. A server that fails is skipped (logged). */
  async resourceTemplates(caller: Caller & CallContext): Promise<HubResourceTemplate[]> {
    const out: HubResourceTemplate[] = [];
    await Promise.all(
      [...this.upstreams.values()]
        .filter((u) => this.visible(u, caller))
        .map(async (u) => {
          try {
            for (const t of await u.listResourceTemplates(caller)) out.push({ ...t, server: u.config.name });
          } catch (e) {
            this.d.log.warn({ server: u.config.name, err: (e as Error).message }, 'resources/templates/list failed');
          }
        }),
    );
    return out.sort((a, b) => (a.server + a.uriTemplate < b.server + b.uriTemplate ? -1 : 1));
  }

  /**
   * The server that owns a resource URI: one that lists it, else the one whose template's literal prefix
   * (the text before its first `{`) is the longest start of the URI. Templates are upstream data: matched
   * by prefix, never compiled into a regular expression.
   */
  private async ownerOf(uri: string, caller: Caller & CallContext): Promise<Upstream> {
    const listed = (await this.resources(caller)).find((r) => r.uri === uri);
    if (listed) return this.upstreams.get(listed.server)!;
    let best: { server: string; len: number } | undefined;
    for (const t of await this.resourceTemplates(caller)) {
      const prefix = t.uriTemplate.split('{')[0]!;
      if (prefix.length > 0 && uri.startsWith(prefix) && (!best || prefix.length > best.len)) best = { server: t.server, len: prefix.length };
    }
    if (!best) throw new GatewayError('NOT_FOUND', `no server lists the resource ${uri.slice(0, 200)} or a template for it; name the server`);
    return this.upstreams.get(best.server)!;
  }

  /** `completion/complete` for a namespaced prompt or a resource template, passed to its server. */
  async complete(params: CompleteRequest['params'], caller: Caller & CallContext): Promise<CompleteResult> {
    const ref = params.ref;
    if (ref.type === 'ref/prompt') {
      const p = (await this.prompts(caller)).find((x) => x.name === ref.name);
      if (!p) throw new GatewayError('NOT_FOUND', `no prompt named "${ref.name.slice(0, 100)}"`);
      return this.upstreams.get(p.server)!.complete({ ...params, ref: { ...ref, name: p.prompt } }, caller);
    }
    const t = (await this.resourceTemplates(caller)).find((x) => x.uriTemplate === ref.uri);
    const u = t ? this.upstreams.get(t.server)! : await this.ownerOf(ref.uri, caller);
    return u.complete(params, caller);
  }

  /** Subscribe (for one more /mcp session) to a resource; returns the owning server's name. */
  async subscribe(uri: string, caller: Caller & CallContext): Promise<string> {
    const u = await this.ownerOf(uri, caller);
    const key = `${u.config.name}\0${uri}`;
    // Counted before the await, so two sessions subscribing at once both hold their count.
    const n = this.subscribed.get(key) ?? 0;
    this.subscribed.set(key, n + 1);
    if (n === 0)
      try {
        await u.subscribe(uri);
      } catch (e) {
        this.subscribed.delete(key);
        throw e;
      }
    return u.config.name;
  }
  async unsubscribe(server: string, uri: string): Promise<void> {
    const key = `${server}\0${uri}`;
    const n = this.subscribed.get(key) ?? 0;
    if (n > 1) return void this.subscribed.set(key, n - 1);
    this.subscribed.delete(key);
    if (n === 1) await this.upstreams.get(server)?.unsubscribe(uri);
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
    return u !== undefined && this.visible(u, caller);
  }

  /** A token bucket per server: a chatty server can't flood every session with its logs. */
  private readonly logBuckets = new Map<string, { tokens: number; at: number }>();
  private logAllowed(server: string): boolean {
    const rate = this.d.settings.logRatePerSecond;
    const now = performance.now();
    const b = this.logBuckets.get(server) ?? { tokens: rate, at: now };
    b.tokens = Math.min(rate, b.tokens + ((now - b.at) / 1000) * rate);
    b.at = now;
    this.logBuckets.set(server, b);
    if (b.tokens < 1) return false;
    b.tokens -= 1;
    return true;
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

  /**
   * A server asks its client something (sampling, elicitation, roots) while it serves calls. Only the
   * caller of a call running on that server may answer, and only when it is the one caller there: with
   * several, the request can't be told apart and goes to nobody (one caller never sees another's).
   */
  private async peerRequest(server: string, method: PeerMethod, params: Record<string, unknown>, signal: AbortSignal): Promise<Record<string, unknown>> {
    const peers = new Set<Peer>();
    const keys = new Set<object>();
    for (const c of this.inflight)
      if (c.server === server && c.peer) {
        peers.add(c.peer);
        keys.add(c.peer.key);
      }
    const refuse = (why: string) => {
      this.d.metrics.hubCalls.inc({ kind: 'peer_request', outcome: 'refused' });
      this.d.log.info({ server, method, why }, 'request from an MCP server refused');
      return new ProtocolError(ProtocolErrorCode.InvalidRequest, `${method} refused by the Voxgate gateway: ${why}`);
    };
    if (keys.size === 0) throw refuse('no MCP client is waiting on a call to this server that could answer it');
    if (keys.size > 1) throw refuse('several clients are calling this server at once and the request does not say for which call it is');
    const peer = [...peers][0]!;
    if (!peer.supports(method)) throw refuse(`the calling MCP client does not support ${method.split('/')[0]}`);
    this.d.metrics.hubCalls.inc({ kind: 'peer_request', outcome: 'forwarded' });
    return peer.request(method, params, signal);
  }

  /** PIDs of running stdio children (for tests and the status page). */
  childPids(): number[] {
    const out: number[] = [];
    for (const u of this.upstreams.values()) if (u instanceof McpUpstream && u.childPid !== undefined) out.push(u.childPid);
    return out;
  }

  /** Close every connection and end every child (TERM, KILL after the grace period). */
  async close(): Promise<void> {
    this.closed = true;
    this.offBus?.();
    this.offRemote?.();
    this.listeners.clear();
    await Promise.allSettled([...this.upstreams.values()].map((u) => u.close()));
  }
}

function targetKey(t: ToolTarget): string {
  return t.kind === 'server' ? `s\0${t.server}\0${t.tool}` : t.kind === 'device' ? `d\0${t.deviceId}\0${t.tool}` : `g\0${t.tool}`;
}

interface InFlight {
  stop(): void;
  done: Promise<void>;
  server: string | undefined;
  peer: Peer | undefined;
}

const shuttingDown = () => new GatewayError('SHUTTING_DOWN', 'The gateway is shutting down; try again when it is back');

function errorResult(e: unknown): CallToolResult {
  const text =
    e instanceof GatewayError
      ? e.code === 'DEVICE_OFFLINE'
        ? `${e.message}. It may be asleep or out of range; try again when it is back online.`
        : e.code === 'DEVICE_TIMEOUT'
          ? `${e.message}. The device did not answer in time.`
          : e.code === 'DEVICE_BUSY'
            ? `${e.message}`
            : e.message
      : `the call failed: ${(e as Error).message ?? String(e)}`;
  const r: CallToolResult = { content: [{ type: 'text', text }], isError: true };
  if (e instanceof GatewayError) r._meta = { 'voxgate/code': e.code };
  return r;
}

export type { Tool, Tokens };
