import {
  Client,
  ProtocolError,
  ProtocolErrorCode,
  type CallToolResult,
  type CompleteRequest,
  type CompleteResult,
  type GetPromptResult,
  type Prompt,
  type ReadResourceResult,
  type Resource,
  type ResourceTemplateType as ResourceTemplate,
  type Tool,
  type Transport,
} from '@modelcontextprotocol/client';
import { GatewayError } from '../../errors.js';
import { fillHeaders } from '../credentials.js';
import { ChildStdioTransport } from '../stdio-transport.js';
import { speedUpToolsCall, wireCodecOf } from '../tools-call-check.js';
import { callOnLane, openLane, OutputChecks, progressRelay } from './call-tool.js';
import { PEER_METHODS, Upstream, type CallContext, type ServerStatus } from './base.js';
import { classifyFailure, describeCallFailure, describeFailure, sessionMayBeLost, tooLargeText, type FailureContext, type UpstreamFailure } from './failure.js';
import { overCap } from './result-cap.js';
import { boundedTools, oneAtATime, walkTools } from './tool-list.js';
import type { ToolCallLane } from './tool-lane.js';
import { makeTransport, upstreamHooks, withHeaders, type TransportHooks } from './transports.js';

/** How the SDK's Protocol words a message for no request it waits for (its `_onresponse`, `_onprogress`). */
const UNKNOWN_ID = /^Received a (?:response for an unknown message ID|progress notification for an unknown token)/;

/** A real MCP server over stdio, Streamable HTTP, SSE or WebSocket, through the SDK v2 `Client`. */
export class McpUpstream extends Upstream {
  protected client: Client | undefined;
  private transport: Transport | undefined;
  private stopping = false;
  private restartTimer: NodeJS.Timeout | undefined;
  private stableTimer: NodeJS.Timeout | undefined;
  private readonly stderrTail: string[] = [];
  private generation = 0;
  private reinitializing: Promise<void> | undefined;
  /** Resource URIs subscribed upstream (for any number of /mcp sessions; the hub counts them). */
  private readonly subscriptions = new Set<string>();
  /** The gateway's own tools/call lane (stdio, 2025 era) of the client it was opened for (call-tool.ts). */
  private lane: { client: Client; lane: ToolCallLane } | undefined;
  private readonly outputs = new OutputChecks(this.d.settings.validators);

  async start(): Promise<void> {
    if (this.stopping) return;
    const gen = ++this.generation;
    const transport = this.createTransport(upstreamHooks(this.d, this.stderrTail));
    const client = this.makeClient(gen);
    this.client = client;
    this.transport = transport;
    const ms = this.d.settings.connectTimeoutMs;
    let timer: NodeJS.Timeout | undefined;
    try {
      const deadline = new Promise<never>((_r, reject) => (timer = setTimeout(() => reject(new Error(`no answer to initialize within ${ms} ms`)), ms)));
      await Promise.race([this.initialize(client, transport, gen), deadline]);
    } catch (e) {
      if (gen !== this.generation || this.stopping) return;
      const msg = this.describe(e);
      this.generation++;
      await client.close().catch(() => undefined);
      await transport.close().catch(() => undefined);
      this.setState('failed', msg);
      throw new Error(msg);
    } finally {
      clearTimeout(timer);
    }
    if (gen !== this.generation || this.stopping) return;
    const lane = openLane(client, transport, (e) => this.d.log.debug({ err: e.message }, 'upstream tool-call lane error'));
    this.lane = lane ? { client, lane } : undefined;
    this.becameReady(client);
  }

  /** The transport of a new connection (an endpoint's is the socket a tool process opened). */
  protected createTransport(hooks: TransportHooks): Transport {
    return makeTransport(this.config, this.d.settings, hooks);
  }

  /** Servers the gateway dials itself: a failed one is tried again by the next request. */
  private get dialsOut(): boolean {
    return this.config.type === 'http' || this.config.type === 'sse' || this.config.type === 'websocket';
  }

  private async initialize(client: Client, transport: Transport, gen: number): Promise<void> {
    await client.connect(transport);
    const listed = client.getServerCapabilities()?.tools ? await this.listTools(client) : { tools: [], bytes: 0 };
    if (gen === this.generation) this.keepTools(listed);
  }

  /** Bytes of the tools kept (their JSON, as tool-list.ts counts them). */
  toolBytes = 0;

  private keepTools(listed: { tools: Tool[]; bytes: number }): void {
    this.allTools = listed.tools;
    this.toolBytes = listed.bytes;
  }

  /** The server's tools, within mcp.maxToolsPerServer and mcp.maxToolBytesPerServer (tool-list.ts). */
  private async listTools(client: Client): Promise<{ tools: Tool[]; bytes: number }> {
    const s = this.d.settings;
    const maxBytes = this.d.toolBytesBudget?.() ?? s.maxToolBytes;
    const bounds = { maxTools: s.maxTools, maxBytes, allowed: this.config.allowedTools, timeoutMs: s.connectTimeoutMs };
    const lines = { written: 0, held: 0 };
    const { tools, bytes, cut } = await walkTools(client, bounds, (page) => boundedTools(page, this.d, lines));
    if (lines.held > 0) this.d.log.warn({ more: lines.held }, 'more upstream tool schemas over the bounds; those tools left out');
    if (cut) {
      this.d.onToolsCut?.(cut);
      this.d.log.warn({ kept: tools.length, cut, maxTools: s.maxTools, maxBytes }, 'upstream tool list over a bound; the rest left out');
    }
    return { tools, bytes };
  }

  /** After list_changed: this client's tools again (an old client's answer is dropped). */
  private async relist(client: Client, gen: number): Promise<void> {
    try {
      const listed = await this.listTools(client);
      if (gen !== this.generation) return;
      this.keepTools(listed);
      const tools = listed.tools;
      this.d.log.info({ tools: tools.length }, 'upstream tools changed');
      this.d.onToolsChanged();
    } catch (err) {
      this.d.log.warn({ err: (err as Error).message }, 'relisting tools after list_changed failed');
    }
  }

  private makeClient(gen: number): Client {
    const d = this.d;
    const client: Client = new Client(d.settings.clientInfo, {
      // Passed on to the /mcp client whose call is running (refused clearly when it cannot answer). No
      // `roots`: see PEER_METHODS.
      capabilities: { sampling: {}, elicitation: { form: {}, url: {} } },
      // outputSchema validation: linear-time regexes and one bounded cache, not the SDK's own ajv.
      jsonSchemaValidator: d.settings.validators,
      // Relisted by our own bounded walk (tool-list.ts), not the SDK's aggregate one; the SDK still debounces.
      listChanged: {
        tools: { autoRefresh: false, onChanged: oneAtATime((): Promise<void> => (gen === this.generation ? this.relist(client, gen) : Promise.resolve())) },
      },
    });
    // tools/call results checked by hand where the SDK's zod schema would accept them (the rest still by zod).
    speedUpToolsCall(wireCodecOf(client));
    client.onerror = (e) => {
      // The SDK's verdict on a response (or progress) matching no request it or the tool-call lane waits for.
      if (UNKNOWN_ID.test(e.message)) return d.onUnknownResponse?.();
      d.log.debug({ err: e.message.slice(0, 512) }, 'upstream transport error');
    };
    client.setNotificationHandler('notifications/message', (n) => {
      if (gen === this.generation) d.onLog?.(n.params);
    });
    // Resources and prompts are listed live on each request: a change is only passed on.
    for (const method of ['notifications/resources/list_changed', 'notifications/prompts/list_changed'] as const)
      client.setNotificationHandler(method, () => {
        if (gen === this.generation) d.onListsChanged?.();
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
    return client;
  }

  private becameReady(client: Client): void {
    const d = this.d;
    this.setState('ready');
    this.lastError = undefined;
    if (this.restarts > 0) {
      clearTimeout(this.stableTimer);
      this.stableTimer = setTimeout(() => (this.restarts = 0), d.settings.restartResetMs);
      this.stableTimer.unref();
    }
    const caps = client.getServerCapabilities();
    if (caps?.logging && d.settings.logLevel)
      void client.setLoggingLevel(d.settings.logLevel).catch((e: unknown) => d.log.debug({ err: (e as Error).message }, 'logging/setLevel refused'));
    // A new session (restart, re-initialize) has no subscriptions: renew ours.
    if (caps?.resources?.subscribe) for (const uri of this.subscriptions) void client.subscribeResource({ uri }).catch(() => undefined);
    d.log.info({ tools: this.allTools.length, server: this.serverInfo() }, 'upstream MCP server ready');
    d.onToolsChanged();
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

  /** Call a tool. A failure past the gateway is a GatewayError whose message is the sentence a model reads. */
  async call(tool: string, args: Record<string, unknown>, ctx: CallContext): Promise<CallToolResult> {
    if (this.state === 'failed') await this.reviveIfFailed(); // (no await, no promise, on a ready server's call)
    if (!this.client || this.state !== 'ready')
      throw new GatewayError(
        'UPSTREAM_UNAVAILABLE',
        `The tool server "${this.config.name}" is not available right now (${this.state}${this.lastError ? `: ${this.lastError}` : ''}).`,
      );
    const timeout = this.timeout(ctx);
    // Our own progress token goes upstream; the SDK (or the lane) maps its notifications back to this call only.
    // (The timeout stays the call's bound: progress does not extend it.)
    const onprogress = ctx.onProgress ? progressRelay(ctx.onProgress) : undefined;
    const lane = this.lane?.client === this.client ? this.lane?.lane : undefined;
    let result: CallToolResult;
    try {
      if (lane)
        result = await callOnLane(lane, this.outputs, this.allTools, { name: tool, args, timeoutMs: timeout, signal: ctx.stop ?? ctx.signal, onprogress });
      else {
        // The tool as kept: its outputSchema is what the SDK checks the result against (its own list cache is not written).
        const toolDefinition = this.toolNamed(tool);
        const options = {
          timeout,
          ...(ctx.signal ? { signal: ctx.signal } : {}),
          ...(onprogress ? { onprogress } : {}),
          ...(toolDefinition ? { toolDefinition } : {}),
        };
        result = (await this.withCallHeaders(ctx, (c) => c.callTool({ name: tool, arguments: args }, options))) as CallToolResult;
      }
    } catch (e) {
      if (e instanceof GatewayError && e.code === 'MISSING_TOKEN') throw e;
      const { code, text } = describeCallFailure(e, this.failureContext(), timeout);
      throw new GatewayError(code, text);
    }
    const tooLarge = overCap(result, this.d.settings.maxResultBytes);
    if (tooLarge) {
      this.d.onOversized?.();
      this.d.log.warn({ tool, why: tooLarge }, 'upstream result over mcp.maxResultBytes refused');
      throw new GatewayError('UPSTREAM_ERROR', tooLargeText(this.config.name, tooLarge));
    }
    return result;
  }

  /** A remote server that failed may be back: a request tries it again, at most once per restartBaseDelayMs. */
  private async reviveIfFailed(): Promise<void> {
    if (this.state === 'failed' && this.dialsOut && !this.stopping && Date.now() - this.since >= this.d.settings.restartBaseDelayMs)
      await this.reinitialize(this.client, undefined);
  }

  /**
   * Run `fn` on the session, every HTTP request it makes carrying the headers filled from this caller's
   * tokens (`lenient`: a listing goes out without the headers whose tokens are missing).
   */
  private async withCallHeaders<T>(ctx: CallContext, fn: (client: Client) => Promise<T>, lenient = false): Promise<T> {
    // Only HTTP transports send headers per request. The others run without the async context: once an
    // AsyncLocalStorage is entered, Node 20 runs a hook on every promise the process creates.
    if (this.config.type !== 'http' && this.config.type !== 'sse') return this.withSession(fn);
    const headers = fillHeaders(this.config.headersTemplate, ctx.tokens, this.config.name, lenient);
    return this.withSession((client) => withHeaders(headers, () => fn(client)));
  }

  /**
   * Run `fn` on the current client. A Streamable HTTP server that no longer knows our session (it
   * restarted) answers with an HTTP error or not at all: as the spec requires, initialize a new session,
   * then run `fn` once more.
   */
  private async withSession<T>(fn: (client: Client) => Promise<T>): Promise<T> {
    const client = this.client;
    if (!client) throw new GatewayError('UPSTREAM_UNAVAILABLE', `server "${this.config.name}" is not connected`);
    try {
      return await fn(client);
    } catch (e) {
      if (!this.dialsOut) throw e;
      const f = classifyFailure(e);
      if (!sessionMayBeLost(f)) throw this.noteFailure(client, f, e);
      await this.reinitialize(client, e);
      const fresh = this.client as Client | undefined;
      if (!fresh || this.state !== 'ready') throw e;
      try {
        return await fn(fresh);
      } catch (again) {
        throw this.noteFailure(fresh, classifyFailure(again), again, true);
      }
    }
  }

  /**
   * A server that answers the HTTP request itself with a 5xx (or, on a fresh session, with what a lost
   * session gets) is failing: its status says so, and the next request after restartBaseDelayMs tries it
   * again. A JSON-RPC error, a refusal of credentials or a timeout leaves it ready.
   */
  private noteFailure(client: Client, f: UpstreamFailure, e: unknown, retried = false): unknown {
    const failing = (f.kind === 'http' && f.status >= 500) || (retried && sessionMayBeLost(f));
    if (failing && this.client === client && this.state === 'ready') {
      this.setState('failed', this.describe(e));
      this.d.onToolsChanged();
    }
    return e;
  }

  /** One re-initialize at a time; calls that failed on the same lost session share it. */
  private reinitialize(lost: Client | undefined, cause: unknown): Promise<void> {
    if (this.client !== lost) return this.reinitializing ?? Promise.resolve();
    this.reinitializing ??= (async () => {
      const f = cause === undefined ? undefined : classifyFailure(cause);
      const why = f?.kind === 'http' ? `the server lost our session (HTTP ${f.status})` : f ? 'the server is unreachable' : 'the server failed before';
      this.d.log.warn({ why }, 'upstream MCP server forgot our session or is unreachable: initializing a new one');
      this.generation++; // the old client's close is not a "lost connection"
      this.client = undefined;
      this.setState('restarting', `${why}; initializing a new session`);
      await lost?.close().catch(() => undefined);
      await this.start().catch((e: unknown) => this.d.log.warn({ err: (e as Error).message }, 'upstream re-initialize failed'));
    })().finally(() => (this.reinitializing = undefined));
    return this.reinitializing;
  }

  /** The client when the server is ready and has `cap` (a failed remote server is tried again first). */
  private async readyFor(cap: 'resources' | 'prompts' | 'completions'): Promise<Client | undefined> {
    await this.reviveIfFailed();
    if (this.state !== 'ready' || !this.client) return undefined;
    return this.client.getServerCapabilities()?.[cap] ? this.client : undefined;
  }

  /** A request other than a tool call failed: UPSTREAM_ERROR naming what could not be done. */
  private failed(what: string, e: unknown): GatewayError {
    if (e instanceof GatewayError) return e;
    return new GatewayError('UPSTREAM_ERROR', `server "${this.config.name}" could not ${what}: ${this.describe(e)}`);
  }

  override async listResources(ctx: CallContext): Promise<Resource[]> {
    if (!(await this.readyFor('resources'))) return [];
    return (await this.withCallHeaders(ctx, (c) => c.listResources(undefined, { timeout: this.timeout(ctx) }), true)).resources;
  }
  override async readResource(uri: string, ctx: CallContext): Promise<ReadResourceResult> {
    if (!(await this.readyFor('resources'))) throw new GatewayError('UPSTREAM_UNAVAILABLE', `server "${this.config.name}" is not ready or has no resources`);
    try {
      return await this.withCallHeaders(ctx, (c) => c.readResource({ uri }, { timeout: this.timeout(ctx) }));
    } catch (e) {
      throw this.failed(`read ${uri}`, e);
    }
  }
  override async listPrompts(ctx: CallContext): Promise<Prompt[]> {
    if (!(await this.readyFor('prompts'))) return [];
    return (await this.withCallHeaders(ctx, (c) => c.listPrompts(undefined, { timeout: this.timeout(ctx) }), true)).prompts;
  }
  override async getPrompt(name: string, args: Record<string, string>, ctx: CallContext): Promise<GetPromptResult> {
    if (!(await this.readyFor('prompts'))) throw new GatewayError('UPSTREAM_UNAVAILABLE', `server "${this.config.name}" is not ready or has no prompts`);
    try {
      return await this.withCallHeaders(ctx, (c) => c.getPrompt({ name, arguments: args }, { timeout: this.timeout(ctx) }));
    } catch (e) {
      throw this.failed(`get prompt "${name}"`, e);
    }
  }
  override async listResourceTemplates(ctx: CallContext): Promise<ResourceTemplate[]> {
    if (!(await this.readyFor('resources'))) return [];
    return (await this.withCallHeaders(ctx, (c) => c.listResourceTemplates(undefined, { timeout: this.timeout(ctx) }), true)).resourceTemplates;
  }
  override async complete(params: CompleteRequest['params'], ctx: CallContext): Promise<CompleteResult> {
    if (!(await this.readyFor('completions'))) return { completion: { values: [] } };
    try {
      return await this.withCallHeaders(ctx, (c) => c.complete(params, { timeout: this.timeout(ctx) }), true);
    } catch (e) {
      throw this.failed('complete', e);
    }
  }
  override async subscribe(uri: string): Promise<void> {
    const client = await this.readyFor('resources');
    if (!client?.getServerCapabilities()?.resources?.subscribe)
      throw new GatewayError('NOT_FOUND', `server "${this.config.name}" offers no resource subscriptions`);
    await this.withSession((c) => c.subscribeResource({ uri }, { timeout: this.d.settings.callTimeoutMs }));
    this.subscriptions.add(uri);
  }
  override async unsubscribe(uri: string): Promise<void> {
    if (!this.subscriptions.delete(uri)) return;
    if (this.state !== 'ready') return;
    await this.client?.unsubscribeResource({ uri }, { timeout: this.d.settings.callTimeoutMs }).catch(() => undefined);
  }

  protected override capabilities(): ServerStatus['capabilities'] {
    const caps = this.state === 'ready' ? this.client?.getServerCapabilities() : undefined;
    return { tools: Boolean(caps?.tools), resources: Boolean(caps?.resources), prompts: Boolean(caps?.prompts) };
  }
  protected override pid(): number | null {
    return this.childPid ?? null;
  }
  /** As the server said, cut to 256 characters each: a tool process's 1 MiB name went into a log line per connect. */
  protected override serverInfo(): ServerStatus['serverInfo'] {
    const v = this.client?.getServerVersion();
    return v ? { name: String(v.name).slice(0, 256), version: String(v.version).slice(0, 256) } : null;
  }
  override get childPid(): number | undefined {
    return this.transport instanceof ChildStdioTransport ? this.transport.pid : undefined;
  }

  /**
   * Ends a connect in progress too (its transport is the current one from the first line of start()): no
   * child outlives close(), and close() never waits for an initialize.
   */
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

  private failureContext(): FailureContext {
    return { server: this.config.name, type: this.config.type, command: this.config.command, stderrTail: this.stderrTail.at(-1) };
  }
  private describe(e: unknown): string {
    return describeFailure(e, this.failureContext());
  }
}
