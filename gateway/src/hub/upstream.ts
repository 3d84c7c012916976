import { AsyncLocalStorage } from 'node:async_hooks';
import {
  Client,
  ProtocolError,
  ProtocolErrorCode,
  SSEClientTransport,
  StreamableHTTPClientTransport,
  type CallToolResult,
  type CompleteRequest,
  type CompleteResult,
  type LoggingLevel,
  type LoggingMessageNotificationParams,
  type ResourceTemplateType as ResourceTemplate,
  type GetPromptResult,
  type Prompt,
  type ReadResourceResult,
  type Resource,
  type Tool,
  type Transport,
} from '@modelcontextprotocol/client';
import type { Logger } from 'pino';
import { GatewayError } from '../errors.js';
import { builtinTool } from './builtin.js';
import type { ServerConfig } from './config.js';
import { fillHeaders, placeholders, type Tokens } from './credentials.js';
import { callOpenApi, toolsFromOpenApi, type OpenApiTool } from './openapi.js';
import { guardedFetch } from './ssrf.js';
import { ChildStdioTransport, RESULT_TOO_LARGE } from './stdio-transport.js';
import { guardToolSchemas, type SchemaLimits } from '../schemas/untrusted-schema.js';
import type { SchemaValidators } from '../schemas/validators.js';

export type ServerState = 'starting' | 'ready' | 'failed' | 'restarting' | 'stopped' | 'disabled';

export interface HubSettings {
  connectTimeoutMs: number;
  callTimeoutMs: number;
  killGraceMs: number;
  maxRestarts: number;
  restartBaseDelayMs: number;
  restartMaxDelayMs: number;
  /** A server up this long has its restart count reset. */
  restartResetMs: number;
  maxResultBytes: number;
  maxMessageBytes: number;
  maxTools: number;
  allowPrivateNetwork: boolean;
  /** Asked of every server with the logging capability; their log notifications are passed to /mcp sessions. */
  logLevel?: LoggingLevel;
  /** Log messages per second passed on per server (token bucket, burst of as many). */
  logRatePerSecond: number;
  clientInfo: { name: string; version: string };
  /** Hosted servers' tool schemas are untrusted: bounded at load, compiled only by the shared safe validators. */
  schemaLimits: SchemaLimits;
  validators: SchemaValidators;
}

export interface Progress {
  progress: number;
  total?: number | undefined;
  message?: string | undefined;
}

/** Requests a hosted server may make of its client while it serves a call: passed on to the caller. */
export const PEER_METHODS = ['sampling/createMessage', 'elicitation/create', 'roots/list'] as const;
export type PeerMethod = (typeof PEER_METHODS)[number];

/** The `/mcp` client a call came from: it alone may answer what the server asks while serving that call. */
export interface Peer {
  /** Callers are told apart by identity (one per /mcp session or stateless request). */
  readonly key: object;
  supports(method: PeerMethod): boolean;
  request(method: PeerMethod, params: Record<string, unknown>, signal: AbortSignal): Promise<Record<string, unknown>>;
}

export interface CallContext {
  tokens?: Tokens | undefined;
  timeoutMs?: number | undefined;
  /** The caller gave up (its request was cancelled): the upstream is sent notifications/cancelled. */
  signal?: AbortSignal | undefined;
  /** Set when the caller asked for progress (a progress token): the upstream's progress, for it alone. */
  onProgress?: ((p: Progress) => void) | undefined;
  peer?: Peer | undefined;
}

export interface ServerStatus {
  name: string;
  type: ServerConfig['type'];
  state: ServerState;
  lastError: string | null;
  toolCount: number;
  tools: string[];
  restarts: number;
  pid: number | null;
  since: string;
  serverInfo: { name: string; version: string } | null;
  capabilities: { tools: boolean; resources: boolean; prompts: boolean };
  tenants: string[] | null;
  systemInstruction: string | null;
}

export interface UpstreamDeps {
  log: Logger;
  settings: HubSettings;
  /** Called when this server's tool list changed (connected, relisted, lost). */
  onToolsChanged: () => void;
  onStateChange?: (state: ServerState) => void;
  /** A message over the size limit was skipped (counted by the hub). */
  onOversized?: () => void;
  onLog?: (params: LoggingMessageNotificationParams) => void;
  onResourceUpdated?: (uri: string) => void;
  /** A request from the server (sampling, elicitation, roots): the hub finds the one caller that may answer. */
  onPeerRequest?: (method: PeerMethod, params: Record<string, unknown>, signal: AbortSignal) => Promise<Record<string, unknown>>;
  /** A tool was left out because its schema is over the bounds (a metric). */
  onSchemaRefused?: (reason: string) => void;
}

/** What the hub needs of every kind of server. */
export abstract class Upstream {
  state: ServerState = 'starting';
  lastError: string | undefined;
  protected allTools: Tool[] = [];
  protected since = Date.now();
  restarts = 0;

  constructor(
    readonly config: ServerConfig,
    protected readonly d: UpstreamDeps,
  ) {}

  /** The tools callers may see (ready servers only): `allowed_tools` applied, capped. */
  get tools(): readonly Tool[] {
    return this.state === 'ready' ? this.knownTools : [];
  }

  /**
   * The last tools this server listed, whatever its state: their names keep resolving while it restarts
   * or is down, so a call answers "not available right now" instead of "no tool named".
   */
  get knownTools(): readonly Tool[] {
    if (this.state === 'stopped' || this.state === 'disabled') return [];
    const allowed = this.config.allowedTools;
    const list = allowed ? this.allTools.filter((t) => allowed.includes(t.name)) : this.allTools;
    return list.slice(0, this.d.settings.maxTools);
  }

  hasTool(name: string): boolean {
    return this.knownTools.some((t) => t.name === name);
  }

  /** The inputSchema of a tool this server offers (already bounded and sanitized at load). */
  inputSchemaOf(name: string): Record<string, unknown> | undefined {
    return this.knownTools.find((t) => t.name === name)?.inputSchema as Record<string, unknown> | undefined;
  }

  abstract start(): Promise<void>;
  abstract call(tool: string, args: Record<string, unknown>, ctx: CallContext): Promise<CallToolResult>;
  abstract close(): Promise<void>;
  listResources(_ctx: CallContext): Promise<Resource[]> {
    return Promise.resolve([]);
  }
  readResource(uri: string, _ctx: CallContext): Promise<ReadResourceResult> {
    return Promise.reject(new GatewayError('NOT_FOUND', `server "${this.config.name}" has no resource ${uri}`));
  }
  listPrompts(_ctx: CallContext): Promise<Prompt[]> {
    return Promise.resolve([]);
  }
  getPrompt(name: string, _args: Record<string, string>, _ctx: CallContext): Promise<GetPromptResult> {
    return Promise.reject(new GatewayError('NOT_FOUND', `server "${this.config.name}" has no prompt "${name}"`));
  }
  listResourceTemplates(_ctx: CallContext): Promise<ResourceTemplate[]> {
    return Promise.resolve([]);
  }
  complete(_params: CompleteRequest['params'], _ctx: CallContext): Promise<CompleteResult> {
    return Promise.resolve({ completion: { values: [] } });
  }
  subscribe(uri: string): Promise<void> {
    return Promise.reject(new GatewayError('NOT_FOUND', `server "${this.config.name}" offers no subscription to ${uri.slice(0, 200)}`));
  }
  unsubscribe(_uri: string): Promise<void> {
    return Promise.resolve();
  }
  protected capabilities(): ServerStatus['capabilities'] {
    return { tools: true, resources: false, prompts: false };
  }
  protected pid(): number | null {
    return null;
  }
  protected serverInfo(): ServerStatus['serverInfo'] {
    return null;
  }

  status(): ServerStatus {
    return {
      name: this.config.name,
      type: this.config.type,
      state: this.state,
      lastError: this.lastError ?? null,
      toolCount: this.tools.length,
      tools: this.tools.map((t) => t.name),
      restarts: this.restarts,
      pid: this.pid(),
      since: new Date(this.since).toISOString(),
      serverInfo: this.serverInfo(),
      capabilities: this.capabilities(),
      tenants: this.config.tenants ?? null,
      systemInstruction: this.config.systemInstruction ?? null,
    };
  }

  protected setState(state: ServerState, error?: string): void {
    const changed = this.state !== state;
    this.state = state;
    this.since = Date.now();
    if (error !== undefined) this.lastError = error;
    if (changed) this.d.onStateChange?.(state);
  }

  protected timeout(ctx: CallContext): number {
    return Math.min(ctx.timeoutMs ?? this.config.timeoutMs ?? this.d.settings.callTimeoutMs, this.config.timeoutMs ?? Number.MAX_SAFE_INTEGER, 3_600_000);
  }
}

/** Tools implemented in the gateway (current time, calculator). */
export class BuiltinUpstream extends Upstream {
  private readonly impls = new Map(this.config.builtinTools.map((t) => [t.name as string, builtinTool(t.name, t.description)]));

  start(): Promise<void> {
    this.allTools = [...this.impls.values()].map((b) => b.tool);
    this.setState('ready');
    this.d.onToolsChanged();
    return Promise.resolve();
  }
  call(tool: string, args: Record<string, unknown>): Promise<CallToolResult> {
    const b = this.impls.get(tool);
    if (!b) return Promise.reject(new GatewayError('TOOL_NOT_FOUND', `server "${this.config.name}" has no tool "${tool}"`));
    return Promise.resolve(b.run(args));
  }
  close(): Promise<void> {
    this.setState('stopped');
    return Promise.resolve();
  }
}

/** An OpenAPI document: one tool per operation, each call an HTTP request through the SSRF guard. */
export class OpenApiUpstream extends Upstream {
  private ops = new Map<string, OpenApiTool>();

  start(): Promise<void> {
    try {
      const tools = toolsFromOpenApi(this.config.openapiSpec!);
      this.ops = new Map(tools.map((t) => [t.tool.name, t]));
      this.allTools = tools.map((t) => t.tool);
      this.setState('ready');
      this.d.onToolsChanged();
    } catch (e) {
      this.setState('failed', (e as Error).message);
      return Promise.reject(e);
    }
    return Promise.resolve();
  }
  async call(tool: string, args: Record<string, unknown>, ctx: CallContext): Promise<CallToolResult> {
    const op = this.ops.get(tool);
    if (!op) throw new GatewayError('TOOL_NOT_FOUND', `server "${this.config.name}" has no tool "${tool}"`);
    const headers = fillHeaders(this.config.headersTemplate, ctx.tokens, this.config.name);
    return callOpenApi(op, args, {
      baseUrl: this.config.openapiBaseUrl!,
      headers,
      timeoutMs: this.timeout(ctx),
      maxResponseBytes: this.d.settings.maxResultBytes,
      allowPrivateNetwork: this.config.allowPrivateNetwork ?? this.d.settings.allowPrivateNetwork,
      ...(ctx.signal ? { signal: ctx.signal } : {}),
    });
  }
  close(): Promise<void> {
    this.setState('stopped');
    return Promise.resolve();
  }
}

/** Headers for the HTTP request being made right now on behalf of one call (its caller's tokens). */
const callHeaders = new AsyncLocalStorage<Record<string, string>>();

/** A real MCP server over stdio, Streamable HTTP or SSE, through the SDK v2 `Client`. */
export class McpUpstream extends Upstream {
  private client: Client | undefined;
  private transport: Transport | undefined;
  private stopping = false;
  private restartTimer: NodeJS.Timeout | undefined;
  private stableTimer: NodeJS.Timeout | undefined;
  private readonly stderrTail: string[] = [];
  private generation = 0;
  private reinitializing: Promise<void> | undefined;
  /** Resource URIs subscribed upstream (for any number of /mcp sessions; the hub counts them). */
  private readonly subscriptions = new Set<string>();

  async start(): Promise<void> {
    if (this.stopping) return;
    const gen = ++this.generation;
    const d = this.d;
    const transport = this.makeTransport();
    const client = new Client(d.settings.clientInfo, {
      // Passed on to the /mcp client whose call is running (refused clearly when it cannot answer).
      capabilities: { sampling: {}, elicitation: { form: {}, url: {} }, roots: {} },
      // outputSchema validation: linear-time regexes and one bounded cache, not the SDK's own ajv.
      jsonSchemaValidator: d.settings.validators,
      listChanged: {
        tools: {
          onChanged: (err, tools) => {
            if (gen !== this.generation) return;
            if (err) return d.log.warn({ err: err.message }, 'relisting tools after list_changed failed');
            if (tools) {
              this.allTools = this.boundedTools(tools);
              d.log.info({ tools: tools.length }, 'upstream tools changed');
              d.onToolsChanged();
            }
          },
        },
      },
    });
    this.client = client;
    this.transport = transport;
    client.onerror = (e) => d.log.debug({ err: e.message }, 'upstream transport error');
    client.setNotificationHandler('notifications/message', (n) => {
      if (gen === this.generation) d.onLog?.(n.params);
    });
    client.setNotificationHandler('notifications/resources/updated', (n) => {
      if (gen === this.generation && typeof n.params.uri === 'string') d.onResourceUpdated?.(n.params.uri);
    });
    for (const method of PEER_METHODS)
      client.setRequestHandler(method, async (req, ctx) => {
        if (!d.onPeerRequest) throw new ProtocolError(ProtocolErrorCode.MethodNotFound, `${method} is not available through this gateway`);
        // The SDK checks the answer against the method's result schema before it goes back upstream.
        return (await d.onPeerRequest(method, (req.params ?? {}) as Record<string, unknown>, ctx.mcpReq.signal)) as never;
      });
    client.onclose = () => {
      // Only a connection that was up is "lost"; a failure while connecting is reported by start().
      if (gen !== this.generation || this.stopping || this.state !== 'ready') return;
      this.onLost();
    };
    let timer: NodeJS.Timeout | undefined;
    try {
      const timeout = new Promise<never>((_r, reject) => {
        timer = setTimeout(() => reject(new Error(`no answer to initialize within ${d.settings.connectTimeoutMs} ms`)), d.settings.connectTimeoutMs);
      });
      await Promise.race([
        (async () => {
          await client.connect(transport);
          const listed = client.getServerCapabilities()?.tools ? (await client.listTools()).tools : [];
          if (gen === this.generation) this.allTools = this.boundedTools(listed);
        })(),
        timeout,
      ]);
    } catch (e) {
      clearTimeout(timer);
      if (gen !== this.generation || this.stopping) return;
      const msg = this.describe(e);
      this.generation++;
      await client.close().catch(() => undefined);
      await transport.close().catch(() => undefined);
      this.setState('failed', msg);
      throw new Error(msg);
    }
    clearTimeout(timer);
    if (gen !== this.generation || this.stopping) return;
    this.setState('ready');
    this.lastError = undefined;
    if (this.restarts > 0) {
      clearTimeout(this.stableTimer);
      this.stableTimer = setTimeout(() => (this.restarts = 0), d.settings.restartResetMs);
      this.stableTimer.unref();
    }
    const caps = client.getServerCapabilities();
    if (caps?.logging && d.settings.logLevel) void client.setLoggingLevel(d.settings.logLevel).catch((e: unknown) => d.log.debug({ err: (e as Error).message }, 'logging/setLevel refused'));
    // A new session (restart, re-initialize) has no subscriptions: renew ours.
    if (caps?.resources?.subscribe) for (const uri of this.subscriptions) void client.subscribeResource({ uri }).catch(() => undefined);
    d.log.info({ tools: this.allTools.length, server: client.getServerVersion() }, 'upstream MCP server ready');
    d.onToolsChanged();
  }

  /** Tools whose schemas are over the bounds are left out (logged); the rest keep sanitized schemas. */
  private boundedTools(tools: Tool[]): Tool[] {
    const kept: Tool[] = [];
    for (const t of tools) {
      const schemas = guardToolSchemas(t.inputSchema, t.outputSchema, this.d.settings.schemaLimits);
      if (!schemas.ok) {
        this.d.onSchemaRefused?.(schemas.reason);
        this.d.log.warn({ tool: t.name, reason: schemas.reason, detail: schemas.detail }, 'upstream tool schema over the bounds; tool left out');
        continue;
      }
      const tool: Tool = { ...t, inputSchema: schemas.inputSchema as Tool['inputSchema'] };
      if (schemas.outputSchema) tool.outputSchema = schemas.outputSchema as NonNullable<Tool['outputSchema']>;
      kept.push(tool);
    }
    return kept;
  }

  private makeTransport(): Transport {
    const c = this.config;
    const s = this.d.settings;
    if (c.type === 'stdio') {
      return new ChildStdioTransport({
        command: c.command!,
        args: c.args,
        env: c.env,
        ...(c.cwd ? { cwd: c.cwd } : {}),
        killGraceMs: s.killGraceMs,
        maxMessageBytes: s.maxMessageBytes,
        onOversized: ({ bytes, id }) => {
          this.d.onOversized?.();
          this.d.log.warn({ bytes, limit: s.maxMessageBytes, answersRequest: id !== undefined }, 'upstream message over the size limit skipped; the server stays connected');
        },
        onStderr: (line) => {
          this.stderrTail.push(line);
          if (this.stderrTail.length > 20) this.stderrTail.shift();
          this.d.log.debug({ stderr: line }, 'upstream stderr');
        },
      });
    }
    const allowPrivate = c.allowPrivateNetwork ?? s.allowPrivateNetwork;
    // Headers: the template filled with the current call's tokens, or (no call: connect, listing) the
    // headers whose placeholders need no token.
    const fetchFn = guardedFetch(allowPrivate, () => callHeaders.getStore() ?? fillHeaders(c.headersTemplate, undefined, c.name, true));
    const url = new URL(c.url!);
    return c.type === 'sse' ? new SSEClientTransport(url, { fetch: fetchFn }) : new StreamableHTTPClientTransport(url, { fetch: fetchFn });
  }

  /** The connection dropped (the process exited): restart stdio servers with backoff, up to the limit. */
  private onLost(): void {
    const exit = this.transport instanceof ChildStdioTransport ? this.transport.exitInfo : undefined;
    const tail = this.stderrTail.at(-1);
    const why = `connection lost${exit ? ` (exit ${exit.code ?? exit.signal})` : ''}${tail ? `: ${tail}` : ''}`;
    this.generation++;
    this.client = undefined;
    this.d.log.warn({ exit }, `upstream MCP server ${why}`);
    if (this.config.type !== 'stdio' || this.restarts >= this.d.settings.maxRestarts) {
      this.setState('failed', this.config.type === 'stdio' ? `${why}; gave up after ${this.restarts} restarts` : why);
      this.d.onToolsChanged();
      return;
    }
    const delay = Math.min(this.d.settings.restartBaseDelayMs * 2 ** this.restarts, this.d.settings.restartMaxDelayMs);
    this.restarts++;
    this.setState('restarting', why);
    this.d.onToolsChanged();
    this.restartTimer = setTimeout(() => {
      this.start().catch((e: unknown) => {
        this.d.log.warn({ err: (e as Error).message, attempt: this.restarts }, 'upstream restart failed');
        if (!this.stopping && this.restarts < this.d.settings.maxRestarts) this.onLost();
      });
    }, delay);
  }

  async call(tool: string, args: Record<string, unknown>, ctx: CallContext): Promise<CallToolResult> {
    // A remote server that failed may be back: a call tries it again, at most once per restartBaseDelayMs.
    if (this.state === 'failed' && this.config.type !== 'stdio' && !this.stopping && Date.now() - this.since >= this.d.settings.restartBaseDelayMs)
      await this.reinitialize(this.client);
    if (!this.client || this.state !== 'ready')
      return unavailable(`The tool server "${this.config.name}" is not available right now (${this.state}${this.lastError ? `: ${this.lastError}` : ''}).`);
    const headers = this.config.type === 'stdio' ? {} : fillHeaders(this.config.headersTemplate, ctx.tokens, this.config.name);
    const timeout = this.timeout(ctx);
    try {
      const r = await this.withSession((client) =>
        callHeaders.run(headers, () =>
          client.callTool(
            { name: tool, arguments: args },
            {
              timeout,
              ...(ctx.signal ? { signal: ctx.signal } : {}),
              // Our own progress token goes upstream; the SDK maps its notifications back to this call only.
              // (The timeout stays the call's bound: progress does not extend it.)
              ...(ctx.onProgress ? { onprogress: progressRelay(ctx.onProgress) } : {}),
            },
          ),
        ),
      );
      return r as CallToolResult;
    } catch (e) {
      return unavailable(this.describeCallError(e, timeout));
    }
  }

  /**
   * Run `fn` on the current client. A Streamable HTTP server that answers 404 to our session id has lost
   * it (it restarted): as the spec requires, initialize a new session, then run `fn` once more.
   */
  private async withSession<T>(fn: (client: Client) => Promise<T>): Promise<T> {
    const client = this.client;
    if (!client) throw new GatewayError('UPSTREAM_UNAVAILABLE', `server "${this.config.name}" is not connected`);
    try {
      return await fn(client);
    } catch (e) {
      if (!this.sessionLost(e)) throw e;
      await this.reinitialize(client);
      const fresh = this.client as Client | undefined;
      if (!fresh || this.state !== 'ready') throw e;
      return fn(fresh);
    }
  }

  /** HTTP 404 to our session id (the server restarted), or the server unreachable: re-initialize to learn which. */
  private sessionLost(e: unknown): boolean {
    if (this.config.type === 'stdio') return false;
    const err = e as { status?: number; data?: { status?: number } };
    if (this.config.type === 'http' && (err.status ?? err.data?.status) === 404) return true;
    return e instanceof TypeError && /fetch failed/.test(e.message);
  }

  /** One re-initialize at a time; calls that failed on the same lost session share it. */
  private reinitialize(lost: Client | undefined): Promise<void> {
    if (this.client !== lost) return this.reinitializing ?? Promise.resolve();
    this.reinitializing ??= (async () => {
      this.d.log.warn('upstream MCP server forgot our session (HTTP 404) or is unreachable: initializing a new one');
      this.generation++; // the old client's close is not a "lost connection"
      this.client = undefined;
      this.setState('restarting', 'the server lost our session (HTTP 404) or is unreachable; initializing a new one');
      await lost?.close().catch(() => undefined);
      await this.start().catch((e: unknown) => this.d.log.warn({ err: (e as Error).message }, 'upstream re-initialize failed'));
    })().finally(() => (this.reinitializing = undefined));
    return this.reinitializing;
  }

  override async listResources(ctx: CallContext): Promise<Resource[]> {
    const client = this.readyClient('resources');
    if (!client) return [];
    const h = this.config.type === 'stdio' ? {} : fillHeaders(this.config.headersTemplate, ctx.tokens, this.config.name, true);
    return (await this.withSession((c) => callHeaders.run(h, () => c.listResources(undefined, { timeout: this.timeout(ctx) })))).resources;
  }
  override async readResource(uri: string, ctx: CallContext): Promise<ReadResourceResult> {
    const client = this.readyClient('resources');
    if (!client) throw new GatewayError('UPSTREAM_UNAVAILABLE', `server "${this.config.name}" is not ready or has no resources`);
    const h = this.config.type === 'stdio' ? {} : fillHeaders(this.config.headersTemplate, ctx.tokens, this.config.name);
    try {
      return await this.withSession((c) => callHeaders.run(h, () => c.readResource({ uri }, { timeout: this.timeout(ctx) })));
    } catch (e) {
      throw new GatewayError('UPSTREAM_ERROR', `server "${this.config.name}" could not read ${uri}: ${this.describe(e)}`);
    }
  }
  override async listPrompts(ctx: CallContext): Promise<Prompt[]> {
    const client = this.readyClient('prompts');
    if (!client) return [];
    const h = this.config.type === 'stdio' ? {} : fillHeaders(this.config.headersTemplate, ctx.tokens, this.config.name, true);
    return (await this.withSession((c) => callHeaders.run(h, () => c.listPrompts(undefined, { timeout: this.timeout(ctx) })))).prompts;
  }
  override async getPrompt(name: string, args: Record<string, string>, ctx: CallContext): Promise<GetPromptResult> {
    const client = this.readyClient('prompts');
    if (!client) throw new GatewayError('UPSTREAM_UNAVAILABLE', `server "${this.config.name}" is not ready or has no prompts`);
    const h = this.config.type === 'stdio' ? {} : fillHeaders(this.config.headersTemplate, ctx.tokens, this.config.name);
    try {
      return await this.withSession((c) => callHeaders.run(h, () => c.getPrompt({ name, arguments: args }, { timeout: this.timeout(ctx) })));
    } catch (e) {
      throw new GatewayError('UPSTREAM_ERROR', `server "${this.config.name}" could not get prompt "${name}": ${this.describe(e)}`);
    }
  }

  override async listResourceTemplates(ctx: CallContext): Promise<ResourceTemplate[]> {
    const client = this.readyClient('resources');
    if (!client) return [];
    const h = this.config.type === 'stdio' ? {} : fillHeaders(this.config.headersTemplate, ctx.tokens, this.config.name, true);
    return (await this.withSession((c) => callHeaders.run(h, () => c.listResourceTemplates(undefined, { timeout: this.timeout(ctx) })))).resourceTemplates;
  }
  override async complete(params: CompleteRequest['params'], ctx: CallContext): Promise<CompleteResult> {
    if (this.state !== 'ready' || !this.client?.getServerCapabilities()?.completions) return { completion: { values: [] } };
    const h = this.config.type === 'stdio' ? {} : fillHeaders(this.config.headersTemplate, ctx.tokens, this.config.name, true);
    try {
      return await this.withSession((c) => callHeaders.run(h, () => c.complete(params, { timeout: this.timeout(ctx) })));
    } catch (e) {
      throw new GatewayError('UPSTREAM_ERROR', `server "${this.config.name}" could not complete: ${this.describe(e)}`);
    }
  }
  override async subscribe(uri: string): Promise<void> {
    const client = this.readyClient('resources');
    if (!client?.getServerCapabilities()?.resources?.subscribe) throw new GatewayError('NOT_FOUND', `server "${this.config.name}" offers no resource subscriptions`);
    await this.withSession((c) => c.subscribeResource({ uri }, { timeout: this.d.settings.callTimeoutMs }));
    this.subscriptions.add(uri);
  }
  override async unsubscribe(uri: string): Promise<void> {
    if (!this.subscriptions.delete(uri)) return;
    const client = this.readyClient('resources');
    await client?.unsubscribeResource({ uri }, { timeout: this.d.settings.callTimeoutMs }).catch(() => undefined);
  }

  private readyClient(cap: 'resources' | 'prompts'): Client | undefined {
    if (this.state !== 'ready' || !this.client) return undefined;
    return this.client.getServerCapabilities()?.[cap] ? this.client : undefined;
  }

  protected override capabilities(): ServerStatus['capabilities'] {
    const caps = this.state === 'ready' ? this.client?.getServerCapabilities() : undefined;
    return { tools: Boolean(caps?.tools), resources: Boolean(caps?.resources), prompts: Boolean(caps?.prompts) };
  }
  protected override pid(): number | null {
    return this.transport instanceof ChildStdioTransport ? (this.transport.pid ?? null) : null;
  }
  protected override serverInfo(): ServerStatus['serverInfo'] {
    const v = this.client?.getServerVersion();
    return v ? { name: v.name, version: v.version } : null;
  }
  get instructions(): string | undefined {
    return this.client?.getInstructions();
  }
  get childPid(): number | undefined {
    return this.transport instanceof ChildStdioTransport ? this.transport.pid : undefined;
  }

  async close(): Promise<void> {
    this.stopping = true;
    this.generation++;
    clearTimeout(this.restartTimer);
    clearTimeout(this.stableTimer);
    const client = this.client;
    const transport = this.transport;
    this.client = undefined;
    this.setState('stopped');
    // The client's close() closes the transport; for stdio that is TERM, then KILL after the grace period.
    await client?.close().catch(() => undefined);
    await transport?.close().catch(() => undefined);
  }

  private describe(e: unknown): string {
    const err = e as Error & { code?: unknown; status?: number; data?: { status?: number } };
    const status = err.status ?? err.data?.status;
    if (status === 401 || status === 403) return `the server refused the credentials (HTTP ${status})`;
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return `command not found: ${this.config.command}`;
    const msg = err?.message ?? String(e);
    const tail = this.stderrTail.at(-1);
    return tail && this.config.type === 'stdio' && /closed|not connected/i.test(msg) ? `${msg} (stderr: ${tail})` : msg;
  }

  private describeCallError(e: unknown, timeoutMs: number): string {
    const err = e as Error & { code?: unknown };
    const name = this.config.name;
    if (err.code === 'REQUEST_TIMEOUT' || /timed? ?out/i.test(err.message ?? '')) return `The tool server "${name}" did not answer within ${Math.round(timeoutMs / 1000)} s. Try again later.`;
    if (err.code === 'CONNECTION_CLOSED' || err.code === 'NOT_CONNECTED') return `The tool server "${name}" stopped while handling the request. Try again in a moment.`;
    const d = this.describe(e);
    if (/refused the credentials/.test(d)) return `The tool server "${name}" ${d.replace(/^the server /, '')}: the access token is missing, invalid or expired.`;
    if (err.code === RESULT_TOO_LARGE) return `The tool server "${name}" answered with a result too large to pass on: ${err.message.replace(/^MCP error -?\d+: /, '')}. Ask for less (a narrower query, fewer items).`;
    if (typeof err.code === 'number') return `The tool server "${name}" rejected the call: ${err.message}`;
    return `The tool server "${name}" could not be reached: ${d}`;
  }
}

/** Pass on only the fields a progress notification has, bounded (the upstream is untrusted). */
function progressRelay(to: (p: Progress) => void): (p: { progress: number; total?: number; message?: string }) => void {
  return (p) => {
    if (typeof p.progress !== 'number' || !Number.isFinite(p.progress)) return;
    to({
      progress: p.progress,
      ...(typeof p.total === 'number' && Number.isFinite(p.total) ? { total: p.total } : {}),
      ...(typeof p.message === 'string' ? { message: p.message.slice(0, 1000) } : {}),
    });
  };
}

function unavailable(text: string): CallToolResult {
  return { content: [{ type: 'text', text }], isError: true };
}

export function createUpstream(config: ServerConfig, deps: UpstreamDeps): Upstream {
  if (config.type === 'builtin') return new BuiltinUpstream(config, deps);
  if (config.type === 'openapi') return new OpenApiUpstream(config, deps);
  return new McpUpstream(config, deps);
}

export { placeholders };
