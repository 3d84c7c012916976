import type {
  CallToolResult,
  CompleteRequest,
  CompleteResult,
  GetPromptResult,
  Prompt,
  ReadResourceResult,
  Resource,
  ResourceTemplateType as ResourceTemplate,
  Tool,
} from '@modelcontextprotocol/client';
import { GatewayError } from '../../errors.js';
import { Upstream, type CallContext, type ServerStatus } from './base.js';
import { EndpointConnection } from './endpoint-connection.js';
import { WS_CLOSE, type WebSocketTransport } from './ws-transport.js';

const WAITING = 'no tool process connected; waiting for one to dial in';

/**
 * An MCP endpoint (xiaozhi's "MCP接入点"): the tool processes (78/mcp-calculator's mcp_pipe.py and its ports) that
 * dialed in with one token, served as one server of the hub. Each connection is its own MCP session
 * (endpoint-connection.ts); the endpoint offers the tools of all of them, and a call goes to the connection that
 * listed the tool.
 *
 * Several connections with one token are several tool processes: `python mcp_pipe.py` without an argument starts
 * every server of its mcp_config.json, each on its own connection to the one MCP_ENDPOINT. A connection whose every
 * tool a newer one lists too is that process reconnecting (a network change; its old socket may be half-open): it is
 * closed at once (4000, replaced). Where two processes list one tool name, the newer connection's is called.
 * The number at once is bounded where sockets are accepted (`mcp.endpoints.maxConnectionsPerToken`).
 */
export class EndpointUpstream extends Upstream {
  /** Ready connections, oldest first. */
  private members: EndpointConnection[] = [];
  /** Connections initializing. */
  private readonly joining = new Set<EndpointConnection>();
  /** Which connection a tool name calls (the newest listing it). */
  private owners = new Map<string, EndpointConnection>();
  private serial = 0;
  private closed = false;
  pingIntervalMs = 30_000;

  start(): Promise<void> {
    if (this.members.length === 0 && !this.closed) this.setState('failed', WAITING);
    return Promise.resolve();
  }

  /** A tool process dialed in with this endpoint's token. Resolves when it is ready or has failed. */
  async attach(t: WebSocketTransport): Promise<void> {
    if (this.closed) return t.closeWith(WS_CLOSE.revoked, 'endpoint removed');
    const id = ++this.serial;
    const c: EndpointConnection = new EndpointConnection(t, this.config, {
      ...this.d,
      log: this.d.log.child({ connection: id }),
      // Its tools and its state are the endpoint's to tell: recomputed from every connection.
      onToolsChanged: () => this.changed(c),
      onStateChange: () => undefined,
      // One endpoint's processes together keep at most mcp.maxToolBytesPerServer of tools.
      toolBytesBudget: () => Math.max(0, this.d.settings.maxToolBytes - this.toolBytesBesides(c)),
    });
    c.pingIntervalMs = this.pingIntervalMs;
    this.joining.add(c);
    try {
      await c.open();
    } catch {
      if (this.members.length === 0 && !this.closed) this.setState('failed', c.lastError ?? WAITING);
      return; // its socket went with the reason open() gave it
    } finally {
      this.joining.delete(c);
    }
    if (this.closed) return c.closeWith(WS_CLOSE.revoked, 'endpoint removed');
    if (this.members.length > 0) this.restarts++;
    this.members.push(c);
    this.replaceShadowed(c);
    this.changed(c);
  }

  /**
   * Bytes of the tools the other connections keep, but those of an older one whose process names itself as `c` does
   * (its serverInfo, known once initialize is answered): likely `c` reconnecting, to be replaced once `c` lists them
   * all, or once the two together are over the bound (`evictOverBudget`).
   */
  private toolBytesBesides(c: EndpointConnection): number {
    const name = c.status().serverInfo?.name;
    const mine = this.members.indexOf(c);
    let bytes = 0;
    this.members.forEach((m, i) => {
      const olderTwin = name !== undefined && m.status().serverInfo?.name === name && (mine === -1 || i < mine);
      if (m !== c && !olderTwin) bytes += m.toolBytes;
    });
    return bytes;
  }

  /**
   * `c` listed into the share of older connections named as it is (toolBytesBesides): when the endpoint's tools are
   * over mcp.maxToolBytesPerServer with them, they go, oldest first (4000, replaced), as a reconnecting process's old
   * socket does. Without this, processes on one token naming themselves alike and listing tools apart each kept a
   * whole share: eight sockets, eight times the bound (red team 10).
   */
  private evictOverBudget(c: EndpointConnection): void {
    const name = c.status().serverInfo?.name;
    let total = this.members.reduce((n, m) => n + m.toolBytes, 0);
    for (const old of this.members.slice(0, Math.max(0, this.members.indexOf(c)))) {
      if (total <= this.d.settings.maxToolBytes) return;
      if (name === undefined || old.status().serverInfo?.name !== name) continue;
      total -= old.toolBytes;
      this.members = this.members.filter((m) => m !== old);
      void old.closeWith(WS_CLOSE.replaced, 'replaced by a newer connection with the same token and name: together over the tool bound');
    }
  }

  /** Older connections whose every tool `c` lists too: the same process reconnected. */
  private replaceShadowed(c: EndpointConnection): void {
    const names = new Set(c.knownTools.map((t) => t.name));
    for (const old of this.members) {
      if (old === c) continue;
      const tools = old.knownTools;
      if (tools.length > 0 && tools.every((t) => names.has(t.name))) {
        this.members = this.members.filter((m) => m !== old);
        void old.closeWith(WS_CLOSE.replaced, 'replaced by a newer connection with the same token');
      }
    }
  }

  /** A connection's tools or state changed: the endpoint's tools, owners and state again. */
  private changed(c: EndpointConnection): void {
    if (this.joining.has(c)) return; // told once it is in (attach)
    if (c.state !== 'ready') this.members = this.members.filter((m) => m !== c);
    if (this.closed) return;
    if (c.state === 'ready') this.evictOverBudget(c);
    const owners = new Map<string, EndpointConnection>();
    const tools: Tool[] = [];
    // Newest first: where two list one name, the newer connection's definition and calls.
    for (let i = this.members.length - 1; i >= 0; i--) {
      const m = this.members[i]!;
      for (const tool of m.knownTools) {
        if (owners.has(tool.name)) continue;
        owners.set(tool.name, m);
        tools.push(tool);
      }
    }
    this.owners = owners;
    this.allTools = tools;
    if (this.members.length > 0) this.setState('ready');
    else this.setState('failed', c.state === 'ready' ? WAITING : (c.lastError ?? WAITING));
    this.d.onToolsChanged();
  }

  override async call(tool: string, args: Record<string, unknown>, ctx: CallContext): Promise<CallToolResult> {
    const owner = this.owners.get(tool);
    if (!owner || owner.state !== 'ready')
      throw new GatewayError(
        'UPSTREAM_UNAVAILABLE',
        `The tool server "${this.config.name}" is not available right now (${this.state}${this.lastError ? `: ${this.lastError}` : ''}).`,
      );
    return owner.call(tool, args, ctx);
  }

  /** The ready connections, newest first. */
  private ready(): EndpointConnection[] {
    return this.members.filter((m) => m.state === 'ready').reverse();
  }

  override async listResources(ctx: CallContext): Promise<Resource[]> {
    return (await Promise.all(this.ready().map((m) => m.listResources(ctx).catch(() => [])))).flat();
  }
  override async listPrompts(ctx: CallContext): Promise<Prompt[]> {
    return (await Promise.all(this.ready().map((m) => m.listPrompts(ctx).catch(() => [])))).flat();
  }
  override async listResourceTemplates(ctx: CallContext): Promise<ResourceTemplate[]> {
    return (await Promise.all(this.ready().map((m) => m.listResourceTemplates(ctx).catch(() => [])))).flat();
  }
  override readResource(uri: string, ctx: CallContext): Promise<ReadResourceResult> {
    return this.firstAnswer((m) => m.readResource(uri, ctx), `has no resource ${uri.slice(0, 200)}`);
  }
  override getPrompt(name: string, args: Record<string, string>, ctx: CallContext): Promise<GetPromptResult> {
    return this.firstAnswer((m) => m.getPrompt(name, args, ctx), `has no prompt "${name.slice(0, 64)}"`);
  }
  override async complete(params: CompleteRequest['params'], ctx: CallContext): Promise<CompleteResult> {
    return this.firstAnswer((m) => m.complete(params, ctx), 'completes nothing').catch(() => ({ completion: { values: [] } }));
  }
  override async subscribe(uri: string): Promise<void> {
    await this.firstAnswer((m) => m.subscribe(uri), `offers no subscription to ${uri.slice(0, 200)}`);
  }
  override async unsubscribe(uri: string): Promise<void> {
    await Promise.all(this.ready().map((m) => m.unsubscribe(uri)));
  }

  /**
   * The first connection's answer, newest first, for a request that names what one of them holds (a resource, a
   * prompt): each is asked in turn until one answers. Their own error when only one is connected.
   */
  private async firstAnswer<T>(ask: (m: EndpointConnection) => Promise<T>, missing: string): Promise<T> {
    const ready = this.ready();
    let last: unknown;
    for (const m of ready) {
      try {
        return await ask(m);
      } catch (e) {
        last = e;
      }
    }
    if (ready.length === 1 && last instanceof GatewayError) throw last;
    throw new GatewayError(
      ready.length === 0 ? 'UPSTREAM_UNAVAILABLE' : 'NOT_FOUND',
      `server "${this.config.name}" ${ready.length === 0 ? 'has no tool process connected' : missing}`,
    );
  }

  protected override capabilities(): ServerStatus['capabilities'] {
    const caps = this.ready().map((m) => m.status().capabilities);
    return { tools: caps.some((c) => c.tools), resources: caps.some((c) => c.resources), prompts: caps.some((c) => c.prompts) };
  }
  /** The newest connection's (each process says its own; /v1/mcp/endpoints lists the tools of all). */
  protected override serverInfo(): ServerStatus['serverInfo'] {
    return this.ready()[0]?.status().serverInfo ?? null;
  }

  /** Connections being served. */
  get connections(): number {
    return this.ready().length;
  }

  /** The token was revoked: every connection is cut with 4001, and the endpoint leaves the hub. */
  async revoke(): Promise<void> {
    await this.closeAll(WS_CLOSE.revoked, 'token revoked');
  }

  override async close(): Promise<void> {
    await this.closeAll(WS_CLOSE.goingAway, 'the gateway closed the endpoint');
  }

  private async closeAll(code: number, reason: string): Promise<void> {
    this.closed = true;
    const all = [...this.members, ...this.joining];
    this.members = [];
    this.owners = new Map();
    this.setState('stopped');
    await Promise.all(all.map((m) => m.closeWith(code, reason)));
  }
}
