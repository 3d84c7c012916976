import type {
  CallToolResult,
  CompleteRequest,
  CompleteResult,
  GetPromptResult,
  LoggingLevel,
  LoggingMessageNotificationParams,
  Prompt,
  ReadResourceResult,
  Resource,
  ResourceTemplateType as ResourceTemplate,
  Tool,
} from '@modelcontextprotocol/client';
import type { Logger } from 'pino';
import { GatewayError } from '../../errors.js';
import type { FleetJobsPort } from '../builtin.js';
import type { ServerConfig } from '../config.js';
import { shownServerName } from '../names.js';
import type { Tokens } from '../credentials.js';
import type { SchemaLimits } from '../../schemas/untrusted-schema.js';
import type { SchemaValidators } from '../../schemas/validators.js';
import type { UnreadTotal } from '../unread-total.js';

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
  /** A result counts its text once (content or its structured twin, the larger); see result-cap.ts. */
  maxResultBytes: number;
  maxTools: number;
  /** Bytes of one server's tools as kept (their JSON); past it the list is cut (tool-list.ts). */
  maxToolBytes: number;
  allowPrivateNetwork: boolean;
  /** Asked of every server with the logging capability; their log notifications are passed to /mcp sessions. */
  logLevel?: LoggingLevel;
  /** Log messages per second passed on per server (token bucket, burst of as many). */
  logRatePerSecond: number;
  /** One server's announcements of change reach sessions at most once per this (change-throttle.ts; unset: 1 s). */
  changeWindowMs?: number;
  clientInfo: { name: string; version: string };
  /** Hosted servers' tool schemas are untrusted: bounded at load, compiled only by the shared safe validators. */
  schemaLimits: SchemaLimits;
  validators: SchemaValidators;
  /** What every hosted server and tool process together may leave unread (hub/unread-total.ts). Unset: each peer's own bound only. */
  unreadTotal?: UnreadTotal | undefined;
  /** Bytes a second read from each stdio server (a server's own `read_bytes_per_second` wins). Unset: no bound. */
  stdioReadBytesPerSecond?: number | undefined;
}

export interface Progress {
  progress: number;
  total?: number | undefined;
  message?: string | undefined;
}

/**
 * Requests a hosted server may make of its client while it serves a call: passed on to the caller.
 * Not `roots/list`: servers keep the answer for their whole session (server-everything caches it; the
 * filesystem server replaces its allowed directories with it), and the session is shared by every caller,
 * so one client's roots would reach the others. The hub declares no `roots` capability upstream.
 */
export const PEER_METHODS = ['sampling/createMessage', 'elicitation/create'] as const;
export type PeerMethod = (typeof PEER_METHODS)[number];

/** The `/mcp` client a call came from: it alone may answer what the server asks while serving that call. */
export interface Peer {
  /** Callers are told apart by identity (one per /mcp session or stateless request). */
  readonly key: object;
  supports(method: PeerMethod): boolean;
  request(method: PeerMethod, params: Record<string, unknown>, signal: AbortSignal): Promise<Record<string, unknown>>;
}

/** What an AbortSignal offers a listener (an AbortSignal is one). */
export interface Abortable {
  readonly aborted: boolean;
  readonly reason: unknown;
  addEventListener(type: 'abort', fn: () => void): void;
  removeEventListener(type: 'abort', fn: () => void): void;
}

export interface CallContext {
  tokens?: Tokens | undefined;
  timeoutMs?: number | undefined;
  /** The caller gave up (its request was cancelled): the upstream is sent notifications/cancelled. */
  signal?: AbortSignal | undefined;
  /** The same stop without an AbortSignal (hub/in-flight.ts), for work that listens to it directly. */
  stop?: Abortable | undefined;
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
  /** The server said its resources or prompts changed (`notifications/resources/list_changed`, `prompts/list_changed`). */
  onListsChanged?: () => void;
  /** A message over the size limit was skipped (counted by the hub). */
  onOversized?: () => void;
  /** The server left more than the bound unread of what the gateway writes it (counted and logged by the hub). */
  onUnread?: (transport: 'stdio' | 'websocket') => void;
  /** A stdio server sent more than its read budget: its output is not read for a while (counted and logged by the hub). */
  onReadPaused?: () => void;
  onLog?: (params: LoggingMessageNotificationParams) => void;
  onResourceUpdated?: (uri: string) => void;
  /** A response (or progress) for a request no one waits for: late, repeated or made up (counted and logged by the hub). */
  onUnknownResponse?: () => void;
  /** A request from the server (sampling, elicitation): the hub finds the one caller that may answer. */
  onPeerRequest?: (method: PeerMethod, params: Record<string, unknown>, signal: AbortSignal) => Promise<Record<string, unknown>>;
  /** A tool was left out because its schema is over the bounds (a metric). */
  onSchemaRefused?: (reason: string) => void;
  /**
   * The bytes this server's tools may take when it lists them next (unset: `maxToolBytes`): the tool processes of one
   * MCP endpoint share that bound (endpoint.ts).
   */
  toolBytesBudget?: () => number;
  /** The server's tool list was cut by a bound (a metric). */
  onToolsCut?: (reason: 'tools' | 'bytes' | 'pages') => void;
  /** The fleet's jobs, for the `fleet_start_job` builtin (plugged in after the hub is made). */
  fleetJobs?: () => FleetJobsPort | undefined;
}

/** What the hub needs of every kind of server. */
export abstract class Upstream {
  private current: ServerState = 'starting';
  lastError: string | undefined;
  protected allTools: Tool[] = [];
  protected since = Date.now();
  restarts = 0;

  constructor(
    readonly config: ServerConfig,
    protected readonly d: UpstreamDeps,
  ) {}

  /** Changed only through setState, so that the state metric and `since` follow. */
  get state(): ServerState {
    return this.current;
  }

  /** A server the configuration turns off: never started. */
  disable(): void {
    this.setState('disabled');
  }

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
    return this.known().list;
  }

  hasTool(name: string): boolean {
    return this.state !== 'stopped' && this.state !== 'disabled' && this.known().byName.has(name);
  }

  /** The inputSchema of a tool this server offers (already bounded and sanitized at load). */
  inputSchemaOf(name: string): Record<string, unknown> | undefined {
    return this.toolNamed(name)?.inputSchema as Record<string, unknown> | undefined;
  }

  /** A tool this server offers, as kept (bounded and sanitized at load). */
  protected toolNamed(name: string): Tool | undefined {
    if (this.state === 'stopped' || this.state === 'disabled') return undefined;
    return this.known().byName.get(name);
  }

  /**
   * `allowed_tools` applied and capped, once per listing (not per call: issue 21), with an index by name. A name the
   * server listed twice keeps its first definition, as a device's catalog does: twice in the namespace it made
   * `GET /v1/tools`, `/mcp`'s tools/list and the assistant's tools carry one name twice, which model providers refuse
   * for every caller.
   */
  private known(): { from: Tool[]; list: readonly Tool[]; byName: Map<string, Tool> } {
    if (this.knownCache?.from === this.allTools) return this.knownCache;
    const allowed = this.config.allowedTools;
    const byName = new Map<string, Tool>();
    const repeated = new Set<string>();
    for (const t of this.allTools) {
      if (allowed && !allowed.includes(t.name)) continue;
      if (byName.has(t.name)) repeated.add(t.name);
      else if (byName.size < this.d.settings.maxTools) byName.set(t.name, t);
    }
    if (repeated.size > 0)
      this.d.log.warn(
        { tools: [...repeated].slice(0, 10).map((n) => n.slice(0, 64)), repeated: repeated.size },
        'upstream server listed a tool name more than once; its first definition is kept',
      );
    return (this.knownCache = { from: this.allTools, list: [...byName.values()], byName });
  }
  private knownCache: { from: Tool[]; list: readonly Tool[]; byName: Map<string, Tool> } | undefined;

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
  /** The server's process, when the gateway runs it (stdio). */
  get childPid(): number | undefined {
    return undefined;
  }
  protected serverInfo(): ServerStatus['serverInfo'] {
    return null;
  }

  status(): ServerStatus {
    return {
      // A tenant's server is shown by its own name, not its key in the hub (names.ts serverKey).
      name: shownServerName(this.config.name),
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
    const changed = this.current !== state;
    this.current = state;
    this.since = Date.now();
    if (error !== undefined) this.lastError = error;
    if (changed) this.d.onStateChange?.(state);
  }

  protected timeout(ctx: CallContext): number {
    return Math.min(ctx.timeoutMs ?? this.config.timeoutMs ?? this.d.settings.callTimeoutMs, this.config.timeoutMs ?? Number.MAX_SAFE_INTEGER, 3_600_000);
  }
}
