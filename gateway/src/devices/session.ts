import { randomBytes, randomUUID } from 'node:crypto';
import {
  CallToolResultSchema,
  InitializeResultSchema,
  ToolsListResultSchema,
  buildGoodbye,
  buildInitializeParams,
  buildNoVoiceUdpHello,
  buildServerHello,
  checkJsonBounds,
  classifyRpc,
  describeIssues,
  encodeMcpFrame,
  normalizeDeviceContent,
  normalizeRpcError,
  parseDeviceFrame,
  rpcNotification,
  rpcRequest,
  safeJsonText,
  tryParseJson,
  unparsableReplyId,
  type CallToolResult,
  type DeviceFrame,
  type InitializeResult,
  type JsonLimits,
  type RpcId,
  type Tool,
  type ToolsListResult,
  type VisionCapability,
} from '@voxgate/protocol';
import type { Logger } from 'pino';
import { GatewayError } from '../errors.js';
import type { EventBus } from '../events/bus.js';
import type { Metrics } from '../metrics.js';
import { guardToolSchemas, type SchemaLimits } from '../schemas/untrusted-schema.js';
import { invalidArguments, type SchemaValidators } from '../schemas/validators.js';
import { ToolCatalog, type CatalogTool } from './catalog.js';
import { int32Problems } from './int32.js';
import { CLOSE_NO_HELLO, type DeviceLink } from './link.js';
import { ToolsPageCache, type CachedPage } from './tools-page-cache.js';
import type { VoiceHook } from './voice-hook.js';

export interface SessionSettings {
  requestTimeoutMs: number;
  maxToolPages: number;
  maxTools: number;
  defaultCallTimeoutMs: number;
  maxCallTimeoutMs: number;
  queueLimit: number;
  concurrency: number;
  clientInfo: { name: string; version: string };
  /** Depth and size bounds of every frame, checked before it is parsed. */
  frameLimits: JsonLimits;
  /** Bounds of each tool schema in the catalog; a tool over them is left out. */
  schemaLimits: SchemaLimits;
  /** Setup (initialize, each tools/list page) is retried while the link is up: first wait, doubling up to the max. */
  setupRetryMinMs: number;
  setupRetryMaxMs: number;
  /** Failures other than timeouts (a malformed reply, a device error) tolerated per setup step before giving up. */
  setupMaxErrors: number;
  /** Re-send initialize with a fresh vision token this often (before the token expires); unset: never. */
  visionRefreshMs?: number | undefined;
}

/** What setup is doing while it retries a busy device (a long tool, a voice-session wait, a Wi-Fi blip). */
export interface SetupProgress {
  step: string;
  attempt: number;
  lastError: string;
  retryAt: number;
}

export interface SessionDeps {
  deviceId: string;
  clientId: string;
  link: DeviceLink;
  log: Logger;
  bus: EventBus;
  metrics: Metrics;
  settings: SessionSettings;
  /** This gateway's tools/list page cache, shared by its sessions. */
  pages: ToolsPageCache;
  /** Compiled argument validators, shared by schema content. */
  validators: SchemaValidators;
  /** Minted per (re)initialize: the vision token expires. */
  vision: () => VisionCapability | undefined;
  /** The catalog hash this device had before (a previous connection), to tell a changed catalog. */
  previousHash: () => string | undefined;
  onReady: (session: DeviceSession) => void;
  onClosed: (session: DeviceSession) => void;
  /** The voice relay, when voice.mode is "relay": it answers hellos and carries the voice session. */
  voice?: VoiceHook;
}

export type SessionState = 'awaiting_hello' | 'initializing' | 'ready' | 'failed' | 'closed';

export interface CallOutcome extends CallToolResult {
  durationMs: number;
}

interface Pending {
  method: string;
  resolve: (result: unknown) => void;
  reject: (err: GatewayError) => void;
  timer: NodeJS.Timeout;
  sentAt: number;
}

interface Job {
  start: () => void;
  reject: (err: GatewayError) => void;
  timer: NodeJS.Timeout;
}

/**
 * One connection's MCP client for one device: answers its hello, initializes it, walks its tool list,
 * runs calls one at a time (by default) with timeouts, and turns everything else it sends into events.
 */
export class DeviceSession {
  readonly sessionId = randomUUID();
  readonly connectedAt = Date.now();
  lastSeenAt = Date.now();
  state: SessionState;
  initialize?: InitializeResult;
  catalog?: ToolCatalog;
  initError?: string;
  closeReason?: string;
  /** Set while a setup step is being retried; cleared once the device is ready. */
  setup?: SetupProgress | undefined;

  private nextId = 1;
  private readonly pending = new Map<number, Pending>();
  private active = 0;
  private readonly waiting: Job[] = [];
  private readyWaiters: Array<{ resolve: () => void; reject: (e: GatewayError) => void }> = [];
  private helloTimer: NodeJS.Timeout | undefined;
  /** Ends a setup retry's backoff early when the link closes. */
  private retryWait: { timer: NodeJS.Timeout; wake: () => void } | undefined;
  private visionTimer: NodeJS.Timeout | undefined;
  private relisting = false;
  private badInputs = 0;
  /** The tools/list reply being awaited: its frame prefix, and the page once taken from the fast path. */
  private pageExpect: { id: number; after: string; hit?: CachedPage } | undefined;

  constructor(
    private readonly d: SessionDeps,
    /** WebSocket devices start with a hello; MQTT devices are initialized at once. */
    expectHello: boolean,
  ) {
    this.state = expectHello ? 'awaiting_hello' : 'initializing';
  }

  get deviceId(): string {
    return this.d.deviceId;
  }
  get clientId(): string {
    return this.d.clientId;
  }
  get link(): DeviceLink {
    return this.d.link;
  }
  get pendingCount(): number {
    return this.pending.size + this.waiting.length;
  }

  /** Begin: wait for the hello (WebSocket) or initialize right away (MQTT). */
  start(): void {
    if (this.state === 'initializing') void this.runInit();
    else
      this.helloTimer = setTimeout(() => {
        this.d.log.warn('no hello from the device; closing');
        this.d.link.close(CLOSE_NO_HELLO, 'expected a hello');
      }, this.d.settings.requestTimeoutMs);
  }

  /** One text frame from the link. Never throws: bad input is counted, logged, and dropped. */
  onText(text: string): void {
    this.lastSeenAt = Date.now();
    if (this.pageExpect && this.takePage(text)) return;
    const parsed = parseDeviceFrame(text, this.d.settings.frameLimits);
    if (!parsed.ok) {
      this.d.metrics.framesRejected.inc({ reason: parsed.reason });
      this.logBadInput('warn', { reason: parsed.reason, detail: parsed.detail, bytes: text.length }, 'frame rejected');
      // Text that cannot be read (not JSON, too large, too deep) still says which request it answers; a
      // readable frame with a bad envelope is dropped like any other refused frame.
      if (parsed.reason === 'not_json' || parsed.reason === 'too_large' || parsed.reason === 'too_deep') this.refuseReply(text, parsed.reason, parsed.detail);
      return;
    }
    if (parsed.value.repaired) this.d.metrics.framesRejected.inc({ reason: 'repaired' });
    const frame = parsed.value.frame;
    this.d.metrics.framesIn.inc({ transport: this.d.link.transport, kind: frame.type === 'mcp' ? 'mcp' : 'other' });
    switch (frame.type) {
      case 'mcp':
        this.onMcp(frame['payload'] as Record<string, unknown>);
        return;
      case 'hello':
        this.onHello(frame);
        return;
      default:
        if (this.d.voice?.onJson(this, frame, text)) return;
        this.d.bus.publish('device.message', this.d.deviceId, { message: capForEvent(frame, text.length) });
    }
  }

  /**
   * The awaited tools/list reply in the reference layout: from the page cache when another device sent
   * the same text, else validated from that text alone and cached. Anything else (or a page that does
   * not stand alone as a valid page) returns false and takes the ordinary path, which judges it.
   */
  private takePage(text: string): boolean {
    const expect = this.pageExpect!;
    const pageText = ToolsPageCache.pageText(text, expect.after);
    if (pageText === undefined) return false;
    let page = this.d.pages.get(pageText);
    if (page) this.d.metrics.toolsPages.inc({ source: 'cache' });
    else {
      if (!checkJsonBounds(text, this.d.settings.frameLimits).ok) return false;
      // The entry is the validated parse of its own key text, so it is the same whoever fills it.
      const parsed = tryParseJson(pageText);
      const valid = parsed.ok ? this.validatePage(parsed.value) : undefined;
      if (!valid?.ok) return false;
      page = this.d.pages.store(pageText, valid.page);
      this.d.metrics.toolsPages.inc({ source: 'parsed' });
    }
    this.d.metrics.framesIn.inc({ transport: this.d.link.transport, kind: 'mcp' });
    const hit = page;
    expect.hit = hit;
    this.settle(expect.id, (p) => p.resolve(hit));
    return true;
  }

  /** A tools/list result, validated; tools whose schemas are over the bounds are left out (logged, counted). */
  private validatePage(raw: unknown): { ok: true; page: ToolsListResult } | { ok: false; detail: string } {
    const r = ToolsListResultSchema.safeParse(raw);
    if (!r.success) return { ok: false, detail: describeIssues(r.error.issues) };
    const tools: Tool[] = [];
    for (const tool of r.data.tools) {
      const schemas = guardToolSchemas(tool.inputSchema, tool.outputSchema, this.d.settings.schemaLimits);
      if (!schemas.ok) {
        this.d.metrics.schemasRefused.inc({ source: 'device', reason: schemas.reason });
        this.d.log.warn({ tool: tool.name, reason: schemas.reason, detail: schemas.detail }, 'tool schema over the bounds; tool left out of the catalog');
        continue;
      }
      const kept: Tool = { ...tool, inputSchema: schemas.inputSchema };
      if (schemas.outputSchema) kept.outputSchema = schemas.outputSchema;
      tools.push(kept);
    }
    return { ok: true, page: { ...r.data, tools } };
  }

  /**
   * Bad input from this device, logged within a budget: the first lines, then one line per thousand, so a
   * hostile device cannot flood the log (the metrics count every frame).
   */
  private logBadInput(level: 'warn' | 'debug', obj: Record<string, unknown>, msg: string): void {
    const n = ++this.badInputs;
    if (n <= BAD_INPUT_LOG_LINES || n % 1000 === 0) this.d.log[level]({ ...obj, badInputs: n }, msg);
  }

  /**
   * A frame refused at the parse boundary (not JSON even after repair, too large, too deep) may still
   * answer a request: the firmware writes the envelope and `"id":N` first, so the start of the text says
   * which. That request fails now with DEVICE_ERROR (and, for text that is not JSON, the raw text) instead
   * of waiting out its timeout.
   */
  private refuseReply(text: string, reason: string, detail: string): void {
    const id = unparsableReplyId(text.length > REPLY_HEAD ? text.slice(0, REPLY_HEAD) : text);
    if (id === undefined || !this.pending.has(id)) return;
    const raw = text.length > MAX_RAW_REPLY ? `${text.slice(0, MAX_RAW_REPLY)}…` : text;
    const message = reason === 'not_json' ? `device sent a reply that is not JSON: ${raw}` : `device reply refused (${reason}): ${detail}`;
    this.settle(id, (p) => p.reject(new GatewayError('DEVICE_ERROR', message, { method: p.method, reason, ...(reason === 'not_json' ? { unparsable: true } : {}) })));
  }

  /**
   * The link refused a message over its size limit without reading it all; the request it answers (read
   * from the start of the message) fails now with a clear error, instead of waiting out its timeout or
   * losing the connection.
   */
  onOversizedMessage(bytes: number, limit: number, head: string): void {
    this.lastSeenAt = Date.now();
    const id = unparsableReplyId(head);
    const detail = `device reply of ${bytes} bytes exceeds the ${limit}-byte limit (mqtt.maxPacketBytes); it was refused`;
    this.d.log.warn({ bytes, limit, id }, 'device message over the size limit refused');
    if (id === undefined || !this.pending.has(id)) return;
    this.settle(id, (p) => p.reject(new GatewayError('DEVICE_ERROR', detail, { method: p.method, bytes, limit })));
  }

  /** The link is gone: fail everything waiting, at once. */
  onClosed(reason: string): void {
    if (this.state === 'closed') return;
    this.state = 'closed';
    this.closeReason = reason;
    clearTimeout(this.helloTimer);
    clearTimeout(this.visionTimer);
    if (this.retryWait) {
      clearTimeout(this.retryWait.timer);
      this.retryWait.wake();
    }
    this.d.voice?.onClosed(this);
    this.failAll(new GatewayError('DEVICE_OFFLINE', `device ${this.d.deviceId} disconnected (${reason})`));
    this.d.onClosed(this);
  }

  /** Fail pending and queued calls, e.g. when a newer connection takes over. */
  failAll(err: GatewayError): void {
    for (const [id, p] of this.pending) {
      clearTimeout(p.timer);
      this.pending.delete(id);
      p.reject(err);
    }
    for (const job of this.waiting.splice(0)) {
      clearTimeout(job.timer);
      job.reject(err);
    }
    for (const w of this.readyWaiters.splice(0)) w.reject(err);
  }

  /** Call a tool: checked against the catalog and its schema, queued, timed out. */
  async call(name: string, args: Record<string, unknown>, opts: { timeoutMs?: number } = {}): Promise<CallOutcome> {
    const timeoutMs = this.clampTimeout(opts.timeoutMs);
    const deadline = Date.now() + timeoutMs;
    await this.whenReady(timeoutMs);
    const tool = this.catalog!.get(name);
    if (!tool) {
      this.d.metrics.calls.inc({ outcome: 'tool_not_found' });
      throw new GatewayError('TOOL_NOT_FOUND', `device ${this.d.deviceId} has no tool named "${name}"`, { tool: name });
    }
    const problems = this.d.validators.check(tool.inputSchema, args) ?? int32Problems(tool.inputSchema, args);
    if (problems) {
      this.d.metrics.calls.inc({ outcome: 'invalid_arguments' });
      throw invalidArguments(name, problems);
    }
    return this.enqueue(deadline, async (remaining) => {
      const started = performance.now();
      let result: unknown;
      try {
        result = await this.request('tools/call', { name, arguments: args }, remaining, timeoutMs);
      } catch (e) {
        this.countCall(e, started);
        throw e;
      }
      const parsed = CallToolResultSchema.safeParse(result);
      if (!parsed.success) {
        this.d.metrics.calls.inc({ outcome: 'malformed' });
        throw new GatewayError('DEVICE_ERROR', `device returned a malformed tools/call result: ${describeIssues(parsed.error.issues)}`);
      }
      const durationMs = Math.round((performance.now() - started) * 100) / 100;
      const content = normalizeDeviceContent(parsed.data.content);
      if (content.firmwareImages > 0) this.d.metrics.deviceContent.inc({ kind: 'firmware_image' }, content.firmwareImages);
      if (content.malformed > 0) {
        this.d.metrics.deviceContent.inc({ kind: 'malformed' }, content.malformed);
        this.logBadInput('warn', { tool: name, items: content.malformed }, 'tools/call result had content items that are not valid MCP content; passed on as text');
      }
      this.d.metrics.calls.inc({ outcome: parsed.data.isError ? 'tool_error' : content.malformed > 0 ? 'ok_malformed_content' : 'ok' });
      this.d.metrics.callDuration.observe(durationMs / 1000);
      return { ...parsed.data, content: content.content, durationMs };
    });
  }

  /** A raw JSON-RPC request, for engineers; goes through the same queue as tool calls. */
  async rpc(method: string, params: Record<string, unknown> | undefined, opts: { timeoutMs?: number } = {}): Promise<unknown> {
    const timeoutMs = this.clampTimeout(opts.timeoutMs);
    const deadline = Date.now() + timeoutMs;
    if (this.state === 'closed') throw this.offline();
    return this.enqueue(deadline, (remaining) => this.request(method, params, remaining, timeoutMs));
  }

  /** A JSON-RPC notification, sent at once: it expects no reply, so it holds no place in the call queue. */
  notify(method: string, params: Record<string, unknown> | undefined): void {
    if (this.state === 'closed' || !this.d.link.send(encodeMcpFrame(this.sessionId, rpcNotification(method, params)))) throw this.offline();
  }

  /** Resolves once the catalog is loaded (the voice relay answers its voice server's MCP from it). */
  awaitReady(timeoutMs: number): Promise<void> {
    return this.whenReady(timeoutMs);
  }

  /**
   * A voice server's vision endpoint for this device: re-initialize the device with it, unless the
   * gateway's own vision is configured, which wins. Resolves with which one the device has.
   */
  async applyVision(vision: VisionCapability, timeoutMs: number): Promise<'applied' | 'gateway'> {
    if (this.d.vision()) return 'gateway';
    const deadline = Date.now() + timeoutMs;
    await this.enqueue(deadline, (remaining) => this.request('initialize', buildInitializeParams(this.d.settings.clientInfo, vision), remaining));
    return 'applied';
  }

  /** Binary (audio) from the link: the voice relay's, when a voice session holds it. */
  onBinary(data: Buffer): boolean {
    return this.d.voice?.onAudio(this, data) ?? false;
  }

  findTool(name: string): CatalogTool | undefined {
    return this.catalog?.get(name);
  }

  private clampTimeout(t: number | undefined): number {
    return Math.min(t ?? this.d.settings.defaultCallTimeoutMs, this.d.settings.maxCallTimeoutMs);
  }

  private offline(): GatewayError {
    return new GatewayError('DEVICE_OFFLINE', `device ${this.d.deviceId} is offline`);
  }

  private whenReady(timeoutMs: number): Promise<void> {
    if (this.state === 'ready') return Promise.resolve();
    if (this.state === 'closed') return Promise.reject(this.offline());
    if (this.state === 'failed')
      return Promise.reject(new GatewayError('DEVICE_ERROR', `device ${this.d.deviceId} did not complete initialization: ${this.initError}`));
    return new Promise<void>((resolve, reject) => {
      const waiter = {
        resolve: () => {
          clearTimeout(timer);
          resolve();
        },
        reject: (e: GatewayError) => {
          clearTimeout(timer);
          reject(e);
        },
      };
      const timer = setTimeout(() => {
        this.readyWaiters = this.readyWaiters.filter((w) => w !== waiter);
        const retrying = this.setup ? `; setup step ${this.setup.step} is being retried (${this.setup.lastError})` : '';
        reject(new GatewayError('DEVICE_TIMEOUT', `device ${this.d.deviceId} did not finish initializing within ${timeoutMs} ms${retrying}`));
      }, timeoutMs);
      this.readyWaiters.push(waiter);
    });
  }

  /** FIFO with `concurrency` slots; a job's deadline covers its time in the queue too. */
  private enqueue<T>(deadline: number, run: (remainingMs: number) => Promise<T>): Promise<T> {
    if (this.state === 'closed') return Promise.reject(this.offline());
    return new Promise<T>((resolve, reject) => {
      const start = () => {
        this.active++;
        run(Math.max(1, deadline - Date.now()))
          .then(resolve, reject)
          .finally(() => {
            this.active--;
            this.next();
          });
      };
      if (this.active < this.d.settings.concurrency && this.waiting.length === 0) return start();
      if (this.waiting.length >= this.d.settings.queueLimit) {
        this.d.metrics.calls.inc({ outcome: 'busy' });
        return reject(new GatewayError('DEVICE_BUSY', `device ${this.d.deviceId} has ${this.waiting.length} calls waiting; try again later`));
      }
      const job: Job = {
        start: () => {
          clearTimeout(job.timer);
          start();
        },
        reject,
        timer: setTimeout(() => {
          const i = this.waiting.indexOf(job);
          if (i >= 0) this.waiting.splice(i, 1);
          this.d.metrics.calls.inc({ outcome: 'timeout' });
          reject(new GatewayError('DEVICE_TIMEOUT', `call waited in the device queue until its deadline`));
        }, Math.max(1, deadline - Date.now())),
      };
      this.waiting.push(job);
    });
  }

  private next(): void {
    while (this.active < this.d.settings.concurrency && this.waiting.length > 0) this.waiting.shift()!.start();
  }

  private countCall(e: unknown, started: number): void {
    const code = e instanceof GatewayError ? e.code : 'INTERNAL';
    const outcome = code === 'DEVICE_TIMEOUT' ? 'timeout' : code === 'DEVICE_OFFLINE' ? 'offline' : code === 'DEVICE_ERROR' ? 'device_error' : 'failed';
    this.d.metrics.calls.inc({ outcome });
    if (outcome === 'device_error') this.d.metrics.callDuration.observe((performance.now() - started) / 1000);
  }

  /**
   * Send a request and await its reply; ids are small positive integers (devices drop string ids).
   * `reportedMs`: the timeout the caller asked for, which the error names (`timeoutMs` may be what is left of it).
   */
  private request(method: string, params: Record<string, unknown> | undefined, timeoutMs: number, reportedMs = timeoutMs): Promise<unknown> {
    if (this.state === 'closed') return Promise.reject(this.offline());
    const id = this.nextId++;
    const payload = rpcRequest(id, method, params);
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        this.pending.delete(id);
        reject(new GatewayError('DEVICE_TIMEOUT', `device ${this.d.deviceId} did not answer ${method} within ${reportedMs} ms`));
      }, timeoutMs);
      this.pending.set(id, { method, resolve, reject, timer, sentAt: Date.now() });
      if (!this.d.link.send(encodeMcpFrame(this.sessionId, payload))) {
        clearTimeout(timer);
        this.pending.delete(id);
        reject(this.offline());
      }
    });
  }

  private onHello(frame: DeviceFrame): void {
    if (this.d.voice) return this.onVoiceHello(this.d.voice, frame);
    if (this.d.link.transport === 'mqtt') {
      // Voice (UDP audio) is not part of this gateway yet: end the device's wait for a server hello at
      // once (a goodbye alone would block its main task, and every MCP reply, for 10 s), then close it.
      const voiceSession = randomUUID();
      this.d.log.info('device asked for a voice session over MQTT; voice is not enabled, answering a no-voice hello and goodbye');
      this.d.link.send(JSON.stringify(buildNoVoiceUdpHello(voiceSession, randomBytes(16), randomBytes(16))));
      this.d.link.send(JSON.stringify(buildGoodbye(voiceSession)));
      return;
    }
    this.d.link.send(JSON.stringify(buildServerHello(this.sessionId)));
    if (this.state !== 'awaiting_hello') return;
    clearTimeout(this.helloTimer);
    this.state = 'initializing';
    void this.runInit();
  }

  /** The relay answers the hello with the voice server's; MCP starts after it, as the firmware needs. */
  private onVoiceHello(voice: VoiceHook, frame: DeviceFrame): void {
    if (this.state === 'awaiting_hello') clearTimeout(this.helloTimer);
    void voice.onHello(this, frame).then((answered) => {
      if (!answered || this.state !== 'awaiting_hello') return;
      this.state = 'initializing';
      void this.runInit();
    });
  }

  private onMcp(payload: Record<string, unknown>): void {
    const c = classifyRpc(payload);
    if (!c.ok) {
      this.d.metrics.framesRejected.inc({ reason: 'bad_jsonrpc' });
      this.logBadInput('warn', { detail: c.detail }, 'mcp payload is not JSON-RPC');
      return;
    }
    const m = c.message;
    switch (m.kind) {
      case 'response':
        return this.settle(m.msg.id, (p) => p.resolve(m.msg.result));
      case 'error': {
        const err = normalizeRpcError(m.msg.error);
        return this.settle(m.msg.id, (p) =>
          p.reject(new GatewayError('DEVICE_ERROR', err.message, { rpcCode: err.code, codeInferred: err.inferredCode, method: p.method })),
        );
      }
      case 'notification':
        this.d.bus.publish('device.notification', this.d.deviceId, { method: m.msg.method, params: capForEvent(m.msg.params ?? {}) });
        if (m.msg.method === 'notifications/tools/list_changed') void this.relist('notification');
        return;
      case 'request':
        // Devices have nothing to ask the gateway; say so rather than leave them waiting.
        this.d.link.send(
          encodeMcpFrame(this.sessionId, { jsonrpc: '2.0', id: m.msg.id, error: { code: -32601, message: `Method not found: ${m.msg.method}` } }),
        );
    }
  }

  private settle(id: RpcId | null, fn: (p: Pending) => void): void {
    const p = typeof id === 'number' ? this.pending.get(id) : undefined;
    if (!p) {
      this.d.metrics.lateReplies.inc();
      this.logBadInput('debug', { id: typeof id === 'string' ? id.slice(0, 64) : id }, 'reply matches no pending request (late or unknown id); dropped');
      return;
    }
    clearTimeout(p.timer);
    this.pending.delete(id as number);
    fn(p);
  }

  private async runInit(): Promise<void> {
    const t0 = Date.now();
    try {
      this.initialize = await this.withSetupRetry('initialize', async () =>
        InitializeResultSchema.parse(
          await this.request('initialize', buildInitializeParams(this.d.settings.clientInfo, this.d.vision()), this.d.settings.requestTimeoutMs),
        ),
      );
      this.catalog = await this.listTools();
    } catch (e) {
      if (this.state === 'closed') return;
      this.state = 'failed';
      this.initError = e instanceof Error ? e.message : String(e);
      this.d.log.warn({ err: this.initError }, 'device initialization failed');
      for (const w of this.readyWaiters.splice(0))
        w.reject(new GatewayError('DEVICE_ERROR', `device ${this.d.deviceId} did not complete initialization: ${this.initError}`));
      return;
    }
    if (this.state === 'closed') return;
    this.state = 'ready';
    this.setup = undefined;
    const previous = this.d.previousHash();
    this.d.log.info({ tools: this.catalog.size, hash: this.catalog.hash, ms: Date.now() - t0, server: this.initialize.serverInfo }, 'device ready');
    this.d.onReady(this);
    this.d.bus.publish('device.ready', this.d.deviceId, {
      toolCount: this.catalog.size,
      hash: this.catalog.hash,
      server: this.initialize.serverInfo,
      protocolVersion: this.initialize.protocolVersion,
    });
    if (previous !== undefined && previous !== this.catalog.hash) this.emitToolsChanged(previous, 'relisted');
    for (const w of this.readyWaiters.splice(0)) w.resolve();
    this.scheduleVisionRefresh(this.d.settings.visionRefreshMs);
  }

  /**
   * The vision token is minted with an expiry, so a long-lived (MQTT) device would lose vision one token
   * lifetime after connecting. The firmware accepts a repeated initialize and takes the new URL and token
   * from it; it goes through the call queue, so it never overlaps a call in flight.
   */
  private scheduleVisionRefresh(afterMs: number | undefined): void {
    if (afterMs === undefined || this.state === 'closed') return;
    clearTimeout(this.visionTimer);
    this.visionTimer = setTimeout(() => void this.refreshVision(), afterMs);
  }

  private async refreshVision(): Promise<void> {
    const vision = this.d.vision();
    if (!vision || this.state === 'closed') return;
    this.d.log.debug('vision token refresh queued');
    const timeoutMs = this.d.settings.requestTimeoutMs;
    try {
      // Queued like a call, with room to wait behind the longest call the device may be running.
      await this.enqueue(Date.now() + this.d.settings.maxCallTimeoutMs + timeoutMs, (remaining) =>
        this.request('initialize', buildInitializeParams(this.d.settings.clientInfo, vision), Math.min(remaining, timeoutMs)),
      );
      this.d.log.debug('vision token refreshed');
      this.scheduleVisionRefresh(this.d.settings.visionRefreshMs);
    } catch (e) {
      if ((this.state as SessionState) === 'closed') return; // closed while queued
      this.d.log.warn({ err: e instanceof Error ? e.message : String(e) }, 'vision token refresh failed; retrying');
      this.scheduleVisionRefresh(this.d.settings.setupRetryMaxMs);
    }
  }

  /** Walk `tools/list` while `nextCursor` is present, guarding against repeated cursors and endless pages. */
  private async listTools(): Promise<ToolCatalog> {
    const tools: Tool[] = [];
    const seen = new Set<string>();
    let cursor: string | undefined;
    const pages: CachedPage[] = [];
    for (let page = 1; ; page++) {
      const params: Record<string, unknown> = { withUserTools: true };
      if (cursor !== undefined) params['cursor'] = cursor;
      // A page that fails is asked for again (same cursor): the pages already fetched are kept.
      const p = await this.withSetupRetry(`tools/list page ${page}`, () => this.requestPage(params, page));
      pages.push(p);
      tools.push(...p.result.tools);
      const next = p.result.nextCursor;
      if (next === undefined || next === '') break;
      if (seen.has(next)) {
        this.d.log.warn({ cursor: next, page }, 'device repeated a tools/list cursor; stopping the walk');
        break;
      }
      if (page >= this.d.settings.maxToolPages) {
        this.d.log.warn({ pages: page }, 'tools/list page cap reached; catalog truncated');
        break;
      }
      if (tools.length >= this.d.settings.maxTools) break;
      seen.add(next);
      cursor = next;
    }
    if (tools.length > this.d.settings.maxTools) {
      this.d.log.warn({ tools: tools.length, cap: this.d.settings.maxTools }, 'tool cap reached; catalog truncated');
      tools.length = this.d.settings.maxTools;
      return ToolCatalog.from(tools);
    }
    return ToolCatalog.fromPages(pages, tools);
  }

  /** One tools/list page, validated, from the page cache when another device already sent the same text. */
  private async requestPage(params: Record<string, unknown>, page: number): Promise<CachedPage> {
    const id = this.nextId;
    const expect: NonNullable<DeviceSession['pageExpect']> = { id, after: ToolsPageCache.expectAfterSessionId(id) };
    this.pageExpect = expect;
    try {
      const raw = await this.request('tools/list', params, this.d.settings.requestTimeoutMs);
      if (expect.hit !== undefined && raw === expect.hit) return expect.hit;
      const r = this.validatePage(raw);
      if (!r.ok) throw new Error(`malformed tools/list page ${page}: ${r.detail}`);
      this.d.metrics.toolsPages.inc({ source: 'parsed' });
      return { serial: 0, result: r.page };
    } finally {
      if (this.pageExpect === expect) this.pageExpect = undefined;
    }
  }

  /**
   * One setup step, retried with backoff while the link is up. The firmware answers only from its main
   * task, so a long tool or a voice-session wait delays a reply past any fixed timeout: timeouts are
   * retried for as long as the device stays connected; other failures up to `setupMaxErrors` times.
   */
  private async withSetupRetry<T>(step: string, run: () => Promise<T>): Promise<T> {
    let errors = 0;
    for (let attempt = 1; ; attempt++) {
      try {
        return await run();
      } catch (e) {
        if (this.state === 'closed') throw e;
        const timedOut = e instanceof GatewayError && e.code === 'DEVICE_TIMEOUT';
        if (!timedOut && ++errors >= this.d.settings.setupMaxErrors) throw e;
        const { setupRetryMinMs: min, setupRetryMaxMs: max } = this.d.settings;
        const waitMs = Math.min(max, min * 2 ** Math.min(attempt - 1, 20));
        const lastError = e instanceof Error ? e.message : String(e);
        if (this.state === 'initializing') this.setup = { step, attempt, lastError, retryAt: Date.now() + waitMs };
        this.d.metrics.setupRetries.inc({ step: step.startsWith('tools/list') ? 'tools_list' : 'initialize' });
        this.d.log.warn({ step, attempt, err: lastError, retryInMs: waitMs }, 'device setup step failed; retrying while the link is up');
        await new Promise<void>((wake) => {
          this.retryWait = { timer: setTimeout(wake, waitMs), wake };
        });
        this.retryWait = undefined;
        if ((this.state as SessionState) === 'closed') throw this.offline(); // closed during the wait
      }
    }
  }

  /** Re-read the catalog after the device says it changed; callers keep using the old one meanwhile. */
  private async relist(reason: string): Promise<void> {
    if (this.state !== 'ready' || this.relisting) return;
    this.relisting = true;
    const before = this.catalog!.hash;
    try {
      const next = await this.listTools();
      if (this.state !== 'ready') return;
      this.catalog = next;
      this.d.onReady(this);
      this.emitToolsChanged(before, reason);
    } catch (e) {
      this.d.log.warn({ err: e instanceof Error ? e.message : String(e) }, 'tools/list after list_changed failed; keeping the old catalog');
    } finally {
      this.relisting = false;
    }
  }

  private emitToolsChanged(previousHash: string, reason: string): void {
    this.d.bus.publish('device.tools_changed', this.d.deviceId, {
      hash: this.catalog!.hash,
      previousHash,
      toolCount: this.catalog!.size,
      reason,
    });
  }
}

/** How much of an unparsable reply a caller is shown. */
/** The id of the request a refused frame answers is read from its start (the firmware writes it first). */
const REPLY_HEAD = 512;
const MAX_RAW_REPLY = 1024;

/** Bad frames from one session logged one by one before the log thins out to one line per thousand. */
const BAD_INPUT_LOG_LINES = 20;

/** Device-sent data in events is bounded: the ring buffer and every subscriber hold it. */
export const MAX_EVENT_DATA_BYTES = 8 * 1024;

function capForEvent(value: unknown, knownBytes?: number): unknown {
  // Frames are depth-bounded before parsing; the guarded stringify is the second line of defence.
  const bytes = knownBytes ?? safeJsonText(value, '').length;
  if (bytes === 0) return { truncated: true, unserializable: true };
  if (bytes <= MAX_EVENT_DATA_BYTES) return value;
  const type = typeof value === 'object' && value !== null && 'type' in value ? (value as { type: unknown }).type : undefined;
  return { truncated: true, bytes, ...(typeof type === 'string' ? { type } : {}) };
}

