import { randomUUID } from 'node:crypto';
import { classifyRpc, encodeMcpFrame, parseDeviceFrame, type DeviceFrame, type InitializeResult, type VisionCapability } from '@voxgate/protocol';
import type { Logger } from 'pino';
import { GatewayError } from '../errors.js';
import type { EventBus } from '../events/bus.js';
import { boundLog } from '../log.js';
import type { Metrics } from '../metrics.js';
import type { SchemaValidators } from '../schemas/validators.js';
import { BadInputLog } from './bad-input-log.js';
import { CallQueue, type CallQueueDeps } from './call-queue.js';
import type { CatalogTool, ToolCatalog } from './catalog.js';
import { DeviceClient, type DeviceClientDeps } from './device-client.js';
import type { CallOutcome, DeviceHandle } from './device-handle.js';
import { capForEvent } from './event-data.js';
import { publishCatalogIncomplete, publishReady, publishToolsChanged } from './device-events.js';
import { CLOSE_NO_HELLO, type DeviceLink } from './link.js';
import { frameCost, sessionReadBudget, type ReadBudget } from './read-budget.js';
import { RpcChannel, type RpcChannelDeps } from './rpc-channel.js';
import type { SessionDevice, SessionHost, SessionShared } from './session-shared.js';
import type { SessionSettings, SessionState, SetupProgress } from './settings.js';
import { DeviceSetup, type ListedTools, type SetupDeps } from './setup.js';
import type { ToolsPageCache } from './tools-page-cache.js';
import type { VoiceDevice, VoiceHook } from './voice-hook.js';

export type { CallOutcome } from './device-handle.js';
export type { SessionSettings, SessionState, SetupProgress } from './settings.js';

/**
 * One connection's MCP client for one device: dispatches its frames (replies to the RPC channel, hellos
 * and voice to the voice hook, the rest to events), runs setup, and offers calls through its queue.
 *
 * The session is its parts' context: the channel, the queue, setup and the client read what they need
 * from it (their deps interfaces), so a device costs one object and its parts, not a deps object and
 * closures per part (~700 B per device in a heap snapshot, docs/performance.md).
 */
export class DeviceSession implements DeviceHandle, VoiceDevice, RpcChannelDeps, CallQueueDeps, SetupDeps, DeviceClientDeps {
  readonly sessionId = randomUUID();
  readonly connectedAt = Date.now();
  /** Moved by any traffic from the device, keepalives included (the links set it; records.ts writes it, throttled). */
  lastSeenAt = Date.now();
  state: SessionState;
  initialize?: InitializeResult;
  catalog?: ToolCatalog;
  /** The catalog this session holds against the gateway's budget (catalog-budget.ts writes it). */
  heldCatalog: ToolCatalog | undefined = undefined;
  /** Set when the device refused part of its catalog for good: the catalog holds the pages before it. */
  catalogWarning?: string;
  initError?: string;
  closeReason?: string;

  readonly deviceId: string;
  readonly clientId: string;
  readonly epoch: number | undefined;
  readonly channel: RpcChannel;
  private readonly link: DeviceLink;
  private readonly shared: SessionShared;
  // Made on first use: most devices of a fleet never log a line, queue a call or have a caller (~190 B per device).
  private ownLog: Logger | undefined;
  private callQueue: CallQueue | undefined;
  private deviceClient: DeviceClient | undefined;
  /** Dropped once the device is ready with nothing scheduled; made again for a relist (~64 B per ready device). */
  private setupSteps: DeviceSetup | undefined;
  private badInputLog: BadInputLog | undefined;
  private helloTimer: NodeJS.Timeout | undefined;
  /** Made on the first unsolicited frame: most devices send a few an hour. */
  private readBudget: ReadBudget | undefined;

  constructor(
    shared: SessionShared,
    d: SessionDevice,
    /** WebSocket devices start with a hello; MQTT devices are initialized at once. */
    expectHello: boolean,
  ) {
    this.state = expectHello ? 'awaiting_hello' : 'initializing';
    this.deviceId = d.deviceId;
    this.clientId = d.clientId;
    this.epoch = d.epoch;
    this.link = d.link;
    this.shared = shared;
    this.channel = new RpcChannel(this);
  }

  get bus(): EventBus {
    return this.shared.bus;
  }
  get metrics(): Metrics {
    return this.shared.metrics;
  }
  get settings(): SessionSettings {
    return this.shared.settings;
  }
  get pages(): ToolsPageCache {
    return this.shared.pages;
  }
  get validators(): SchemaValidators {
    return this.shared.validators;
  }
  private get host(): SessionHost {
    return this.shared.host;
  }
  private get voice(): VoiceHook {
    return this.shared.voice;
  }

  /** The session's logger, bound to its device: a child made when the session first logs. */
  get log(): Logger {
    if (this.ownLog) return this.ownLog;
    const bindings =
      this.epoch === undefined
        ? { deviceId: this.deviceId, transport: this.transport }
        : { deviceId: this.deviceId, transport: this.transport, epoch: this.epoch };
    return (this.ownLog = boundLog(this.shared.log, bindings));
  }
  /** Whether a line at `level` would be written: info lines of a healthy device do not make its logger when they would be dropped. */
  logs(level: 'info' | 'debug'): boolean {
    return this.shared.log.isLevelEnabled(level);
  }
  get queue(): CallQueue {
    return (this.callQueue ??= new CallQueue(this));
  }
  private get steps(): DeviceSetup {
    return (this.setupSteps ??= new DeviceSetup(this));
  }
  private get client(): DeviceClient {
    return (this.deviceClient ??= new DeviceClient(this));
  }

  // What the parts read of their context (see the class comment).
  /** Its own view, for the parts that read the session's state (setup, the client). */
  get session(): this {
    return this;
  }
  isClosed(): boolean {
    return this.state === 'closed';
  }
  offline(): GatewayError {
    return this.channel.offline();
  }
  /** Minted per (re)initialize: the vision token expires. */
  vision(): VisionCapability | undefined {
    return this.host.vision(this.deviceId);
  }
  get concurrency(): number {
    return this.settings.concurrency;
  }
  get queueLimit(): number {
    return this.settings.queueLimit;
  }
  /** Made on the first bad frame: a well-behaved device never pays for it. */
  get badInput(): BadInputLog {
    return (this.badInputLog ??= new BadInputLog(this.log, Date.now, this.shared.badInputLines));
  }

  get transport(): 'websocket' | 'mqtt' {
    return this.link.transport;
  }
  get remoteAddress(): string {
    return this.link.remoteAddress;
  }
  get localAddress(): string | undefined {
    return this.link.localAddress;
  }
  get pendingCount(): number {
    return this.channel.pendingCount + (this.callQueue?.waitingCount ?? 0);
  }
  /** Set while a setup step is being retried; cleared once the device is ready. */
  get setup(): SetupProgress | undefined {
    return this.setupSteps?.progress;
  }

  /** Begin: wait for the hello (WebSocket) or initialize right away (MQTT). */
  start(): void {
    if (this.state === 'initializing') void this.runInit();
    else
      this.helloTimer = setTimeout(() => {
        this.log.warn('no hello from the device; closing');
        this.link.close(CLOSE_NO_HELLO, 'expected a hello');
      }, this.settings.requestTimeoutMs);
  }

  /**
   * One text frame from the link. Never throws: bad input is counted, logged, and dropped. Unsolicited frames spend
   * from the device's read budget; while its link is paused, frames wait in it, in order.
   */
  onText(text: string): void {
    this.lastSeenAt = Date.now();
    const budget = this.readBudget;
    if (budget?.paused) return budget.hold(text);
    if (!this.handleText(text)) this.spendRead(frameCost(text.length));
  }

  /** Handle one text frame; true when it answered a request of the gateway's (not counted against the read budget). */
  private handleText(text: string): boolean {
    if (this.channel.takeRaw(text)) return true;
    const parsed = parseDeviceFrame(text, this.settings.frameLimits);
    if (!parsed.ok) {
      this.metrics.framesRejected.inc({ reason: parsed.reason });
      this.badInput.note('warn', { reason: parsed.reason, detail: parsed.detail, bytes: text.length }, 'frame rejected');
      // Text that cannot be read (not JSON, too large, too deep) still says which request it answers; a
      // readable frame with a bad envelope is dropped like any other refused frame.
      const unreadable = parsed.reason === 'not_json' || parsed.reason === 'too_large' || parsed.reason === 'too_deep';
      if (unreadable) this.channel.refuseReply(text, parsed.reason, parsed.detail);
      return false;
    }
    if (parsed.value.repaired) this.metrics.framesRejected.inc({ reason: 'repaired' });
    const frame = parsed.value.frame;
    this.metrics.hot.framesIn[this.link.transport][frame.type === 'mcp' ? 'mcp' : 'other'].inc();
    if (frame.type === 'mcp') return this.onMcp(frame['payload']);
    if (frame.type === 'hello') {
      // The connection's first hello is the one the gateway waits for; later ones are the device's own.
      const awaited = this.state === 'awaiting_hello';
      this.onHello(frame);
      return awaited;
    }
    if (!this.voice.onJson(this, frame, text)) this.bus.publish('device.message', this.deviceId, { message: capForEvent(frame, text.length) });
    return false;
  }

  /**
   * Binary (audio) from the link: the voice hook's, when a voice session holds it (held in order while reading is
   * paused). Audio no session takes spends from the read budget: with no voice session it is a flood's.
   */
  onBinary(data: Buffer): void {
    this.lastSeenAt = Date.now();
    const budget = this.readBudget;
    if (budget?.paused) return budget.hold(data);
    if (!this.takeAudio(data)) this.spendRead(frameCost(data.length));
  }

  /**
   * A control frame past its link's free few (a WebSocket ping or pong; an MQTT PINGREQ, SUBSCRIBE, UNSUBSCRIBE): each
   * is answered with a write, so a flood of them spends from the read budget as other unsolicited frames do.
   */
  onControl(): void {
    this.lastSeenAt = Date.now();
    this.spendRead(1);
  }

  /** Audio to the voice session that holds it; without one it is counted and dropped. True when taken. */
  private takeAudio(data: Buffer): boolean {
    if (this.voice.onAudio(this, data)) return true;
    this.metrics.audioBytes.inc(data.length);
    return false;
  }

  /** One unsolicited frame handled, costing `cost`: past the budget the link stops reading for a while (read-budget.ts). */
  private spendRead(cost: number): void {
    if (this.state === 'closed') return;
    (this.readBudget ??= sessionReadBudget(
      this,
      this.link,
      (text) => this.handleText(text),
      (data) => this.takeAudio(data),
    )).spend(cost);
  }

  /** The link refused a message over its size limit; the request it answers fails now. */
  onOversizedMessage(bytes: number, limit: number, head: string): void {
    this.lastSeenAt = Date.now();
    this.channel.refuseOversized(bytes, limit, head);
  }

  /** The link is gone: fail everything waiting, at once. */
  onClosed(reason: string): void {
    if (this.state === 'closed') return;
    this.state = 'closed';
    this.closeReason = reason;
    clearTimeout(this.helloTimer);
    this.readBudget?.close();
    this.setupSteps?.close();
    this.voice.onClosed(this);
    this.failAll(() => new GatewayError('DEVICE_OFFLINE', `device ${this.deviceId} disconnected (${reason})`));
    this.host.onClosed(this);
  }

  /**
   * Fail pending and queued calls, e.g. when a newer connection takes over. `err` may be a function that makes it:
   * most sessions end with nothing waiting, and an error (its stack captured) is then made for no one.
   */
  failAll(err: GatewayError | (() => GatewayError)): void {
    if (typeof err === 'function') {
      if (this.pendingCount === 0 && this.callQueue === undefined && this.deviceClient === undefined) return this.channel.releaseTimer();
      err = err();
    }
    this.channel.failAll(err);
    this.callQueue?.failAll(err);
    this.deviceClient?.failReady(err);
  }

  call(name: string, args: Record<string, unknown>, opts: { timeoutMs?: number } = {}): Promise<CallOutcome> {
    return this.client.call(name, args, opts);
  }
  callThen(name: string, args: Record<string, unknown>, opts: { timeoutMs?: number }, done: (out: CallOutcome) => void, failed: (err: unknown) => void): void {
    this.client.callThen(name, args, opts, done, failed);
  }
  rpc(method: string, params: Record<string, unknown> | undefined, opts: { timeoutMs?: number } = {}): Promise<unknown> {
    return this.client.rpc(method, params, opts);
  }
  notify(method: string, params: Record<string, unknown> | undefined): void {
    this.client.notify(method, params);
  }
  /** Resolves once the catalog is loaded (the voice relay answers its voice server's MCP from it). */
  awaitReady(timeoutMs: number): Promise<void> {
    return this.client.whenReady(timeoutMs);
  }
  applyVision(vision: VisionCapability, timeoutMs: number): Promise<'applied' | 'gateway'> {
    return this.client.applyVision(vision, timeoutMs);
  }

  findTool(name: string): CatalogTool | undefined {
    return this.catalog?.get(name);
  }

  send(text: string): boolean {
    return this.link.send(text);
  }
  sendBinary(data: Buffer): boolean {
    return this.link.sendBinary?.(data) ?? false;
  }
  bufferedBytes(): number {
    return this.link.bufferedBytes?.() ?? 0;
  }
  close(code: number, reason: string): void {
    this.link.close(code, reason);
  }

  /** The voice hook answers the hello; MCP starts once the device has its server hello, as the firmware needs. */
  private onHello(frame: DeviceFrame): void {
    if (this.state === 'awaiting_hello') {
      clearTimeout(this.helloTimer);
      this.helloTimer = undefined; // a cleared Timeout kept is ~170 B per device
    } else if (!this.shared.hellos.take(this.deviceId).ok) {
      this.metrics.framesRejected.inc({ reason: 'hello_rate' });
      return this.badInput.note('warn', { reason: 'hello_rate' }, 'hello over the rate a device may send them; dropped');
    }
    const answered = this.voice.onHello(this, frame);
    if (typeof answered === 'boolean') this.helloAnswered(answered);
    else void answered.then((a) => this.helloAnswered(a));
  }

  private helloAnswered(answered: boolean): void {
    if (!answered || this.state !== 'awaiting_hello') return;
    this.state = 'initializing';
    void this.runInit();
  }

  /** True when the payload answered a pending request. */
  private onMcp(payload: unknown): boolean {
    const c = classifyRpc(payload);
    if (!c.ok) {
      this.metrics.framesRejected.inc({ reason: 'bad_jsonrpc' });
      this.badInput.note('warn', { detail: c.detail }, 'mcp payload is not JSON-RPC');
      return false;
    }
    const m = c.message;
    switch (m.kind) {
      case 'response':
        return this.channel.onResult(m.msg.id, m.msg.result);
      case 'error':
        return this.channel.onError(m.msg.id, m.msg.error);
      case 'notification':
        this.bus.publish('device.notification', this.deviceId, { method: m.msg.method, params: capForEvent(m.msg.params ?? {}) });
        if (m.msg.method === 'notifications/tools/list_changed') void this.relist('notification');
        return false;
      case 'request':
        // Devices have nothing to ask the gateway; say so rather than leave them waiting.
        this.link.send(encodeMcpFrame(this.sessionId, { jsonrpc: '2.0', id: m.msg.id, error: { code: -32601, message: `Method not found: ${m.msg.method}` } }));
        return false;
    }
  }

  private async runInit(): Promise<void> {
    const t0 = Date.now();
    let listed: ListedTools;
    try {
      // Sets this.initialize when the device answers it (the summary shows it while the tools are listed).
      listed = await this.steps.setup();
    } catch (e) {
      if (this.state === 'closed') return;
      this.state = 'failed';
      this.initError = e instanceof Error ? e.message : String(e);
      this.log.warn({ err: this.initError }, 'device initialization failed');
      this.deviceClient?.failReady(this.deviceClient.initFailure());
      return;
    }
    if (this.state === 'closed') return;
    this.state = 'ready';
    this.steps.progress = undefined;
    const previous = this.host.previousHash(this);
    const { catalog } = listed;
    const initialize = this.initialize!; // set by the setup before its walk
    this.catalog = catalog;
    if (this.logs('info')) this.log.info({ tools: catalog.size, hash: catalog.hash, ms: Date.now() - t0, server: initialize.serverInfo }, 'device ready');
    this.noteGap(listed);
    this.host.onReady(this);
    publishReady(this, initialize, catalog);
    publishCatalogIncomplete(this, listed);
    if (previous !== undefined && previous !== catalog.hash) publishToolsChanged(this, catalog, previous, 'relisted');
    this.deviceClient?.openReady();
    this.steps.scheduleVisionRefresh(this.settings.visionRefreshMs);
    if (this.setupSteps?.idle) this.setupSteps = undefined;
    this.channel.releaseTimer();
  }

  /** Re-read the catalog after the device says it changed; callers keep using the old one meanwhile. */
  private async relist(reason: string): Promise<void> {
    if (this.state !== 'ready') return;
    const before = this.catalog!.hash;
    const next = await this.steps.relist();
    if (!next || this.state !== 'ready') return;
    this.catalog = next.catalog;
    this.noteGap(next);
    this.host.onReady(this);
    publishCatalogIncomplete(this, next);
    publishToolsChanged(this, next.catalog, before, reason);
  }

  /** The device refused part of its catalog for good: ready all the same, with a warning operators see. */
  private noteGap(listed: ListedTools): void {
    this.catalogWarning = listed.gap?.warning;
    if (listed.gap) this.metrics.catalogsIncomplete.inc();
  }
}
