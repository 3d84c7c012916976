import { buildInitializeParams, encodeMcpFrame, rpcNotification, type VisionCapability } from '@voxgate/protocol';
import { GatewayError } from '../errors.js';
import type { Metrics } from '../metrics.js';
import type { SchemaValidators } from '../schemas/validators.js';
import type { BadInputLog } from './bad-input-log.js';
import { clampTimeout, type CallQueue, type CallTimeouts, type QueueJob } from './call-queue.js';
import type { ToolCatalog } from './catalog.js';
import type { CallOutcome } from './device-handle.js';
import { ReadyGate } from './ready-gate.js';
import { PendingRequest, type RpcChannel } from './rpc-channel.js';
import type { SessionSettings, SessionState, SetupProgress } from './settings.js';
import { checkToolCall, countFailedCall, readCallResult } from './tool-call.js';

/** What the client reads of its session at each call. */
export interface ClientView {
  readonly state: SessionState;
  readonly catalog?: ToolCatalog | undefined;
  readonly setup?: SetupProgress | undefined;
  readonly initError?: string | undefined;
}

/** What the client needs; the session gives it all itself (one object per device, no deps object per part). */
export interface DeviceClientDeps {
  deviceId: string;
  sessionId: string;
  settings: SessionSettings;
  metrics: Metrics;
  validators: SchemaValidators;
  badInput: BadInputLog;
  channel: RpcChannel;
  queue: CallQueue;
  /** Sends one text frame; false when the link is closed. */
  send: (text: string) => boolean;
  vision: () => VisionCapability | undefined;
  session: ClientView;
}

/**
 * What callers do with a device (the MCP SDK's client role over the channel): tool calls checked against
 * the catalog and queued, raw requests, notifications, and waiting for setup to finish.
 */
export class DeviceClient {
  /** Callers waiting for setup: made when the first one waits (most sessions are ready before anyone calls). */
  private gate: ReadyGate | undefined;
  /** The settings' own object, shared by every session. */
  private readonly timeouts: CallTimeouts;

  /** `d` is also the tool calls' ToolCallDeps (deviceId, metrics, validators, badInput). */
  constructor(private readonly d: DeviceClientDeps) {
    this.timeouts = d.settings.calls;
  }

  /** Call a tool: checked against the catalog and its schema, queued, timed out. */
  call(name: string, args: Record<string, unknown>, opts: { timeoutMs?: number } = {}): Promise<CallOutcome> {
    return new Promise((resolve, reject) => this.callThen(name, args, opts, resolve, reject));
  }

  /** `call` in callback form: `done` or `failed` is called once (`failed` at once when the call is refused). */
  callThen(name: string, args: Record<string, unknown>, opts: { timeoutMs?: number }, done: (out: CallOutcome) => void, failed: (err: unknown) => void): void {
    const timeoutMs = clampTimeout(opts.timeoutMs, this.timeouts);
    const deadline = Date.now() + timeoutMs;
    // Ready (the usual case): straight on, without waiting a turn for an already open gate.
    if (this.d.session.state === 'ready') return this.callReady(name, args, timeoutMs, deadline, done, failed);
    this.whenReady(timeoutMs).then(
      () => this.callReady(name, args, timeoutMs, deadline, done, failed),
      (e: unknown) => tell(failed, e),
    );
  }

  private callReady(
    name: string,
    args: Record<string, unknown>,
    timeoutMs: number,
    deadline: number,
    done: (out: CallOutcome) => void,
    failed: (err: unknown) => void,
  ): void {
    try {
      checkToolCall(this.d, this.d.session.catalog!, name, args);
    } catch (e) {
      return tell(failed, e instanceof Error ? e : new Error(String(e)));
    }
    this.d.queue.submit(new ToolCallJob(this.d, deadline, name, args, timeoutMs, done, failed));
  }

  /** A raw JSON-RPC request, for engineers; goes through the same queue as tool calls. */
  async rpc(method: string, params: Record<string, unknown> | undefined, opts: { timeoutMs?: number } = {}): Promise<unknown> {
    const timeoutMs = clampTimeout(opts.timeoutMs, this.timeouts);
    const deadline = Date.now() + timeoutMs;
    if (this.d.session.state === 'closed') throw this.d.channel.offline();
    return this.d.queue.enqueue(deadline, (remaining) => this.d.channel.request(method, params, remaining, { reportedMs: timeoutMs }));
  }

  /** A JSON-RPC notification, sent at once: it expects no reply, so it holds no place in the call queue. */
  notify(method: string, params: Record<string, unknown> | undefined): void {
    const frame = encodeMcpFrame(this.d.sessionId, rpcNotification(method, params));
    if (this.d.session.state === 'closed' || !this.d.send(frame)) throw this.d.channel.offline();
  }

  /**
   * A voice server's vision endpoint for this device: re-initialize the device with it, unless the
   * gateway's own vision is configured, which wins. Resolves with which one the device has.
   */
  async applyVision(vision: VisionCapability, timeoutMs: number): Promise<'applied' | 'gateway'> {
    if (this.d.vision()) return 'gateway';
    const deadline = Date.now() + timeoutMs;
    const params = buildInitializeParams(this.d.settings.clientInfo, vision);
    await this.d.queue.enqueue(deadline, (remaining) => this.d.channel.request('initialize', params, remaining));
    return 'applied';
  }

  /** Resolves once the catalog is loaded; rejects at once when the device is closed or failed setup. */
  whenReady(timeoutMs: number): Promise<void> {
    const s = this.d.session;
    if (s.state === 'ready') return Promise.resolve();
    if (s.state === 'closed') return Promise.reject(this.d.channel.offline());
    if (s.state === 'failed') return Promise.reject(this.initFailure());
    return (this.gate ??= new ReadyGate()).wait(timeoutMs, () => {
      const retrying = s.setup ? `; setup step ${s.setup.step} is being retried (${s.setup.lastError})` : '';
      return new GatewayError('DEVICE_TIMEOUT', `device ${this.d.deviceId} did not finish initializing within ${timeoutMs} ms${retrying}`);
    });
  }

  /** Setup is done: the waiting callers go on. */
  openReady(): void {
    this.gate?.open();
  }

  /** Setup failed or the link closed: the waiting callers fail with `err`. */
  failReady(err: GatewayError): void {
    this.gate?.fail(err);
  }

  initFailure(): GatewayError {
    return new GatewayError('DEVICE_ERROR', `device ${this.d.deviceId} did not complete initialization: ${this.d.session.initError}`);
  }
}

/**
 * One tool call, from the queue to the device's reply: the queue's job and the channel's pending request in one
 * object, so the caller's promise is the call's only one (a promise and closures per layer before: the queue's,
 * the channel's, the result's), and the channel keeps no record of its own.
 */
class ToolCallJob extends PendingRequest implements QueueJob {
  private started = 0;
  /** Settled once: the slot is freed exactly once whatever reaches it. */
  private settled = false;

  constructor(
    private readonly d: DeviceClientDeps,
    readonly deadline: number,
    private readonly name: string,
    private readonly args: Record<string, unknown>,
    private readonly timeoutMs: number,
    private readonly done: (out: CallOutcome) => void,
    private readonly failed: (err: unknown) => void,
  ) {
    super();
  }

  /** Its slot is free: the request goes to the device with the time left (the error names the whole timeout). */
  start(remainingMs: number): void {
    this.started = performance.now();
    try {
      this.d.channel.requestFor(this, 'tools/call', { name: this.name, arguments: this.args }, remainingMs, this.timeoutMs);
    } catch (e) {
      this.reject(e);
    }
  }

  /** It never started: the queue was full, its deadline passed in the queue, or the device went. */
  fail(err: unknown): void {
    tell(this.failed, err);
  }

  /**
   * The device's result. The device is free once its reply is in: the slot frees first, so the next queued call is
   * sent before this result is read (a result that takes the schema path, an image say, is checked while the device
   * already works on the next call); then the result is read and counted, and the caller hears. The duration is the
   * device's, up to its reply.
   */
  resolve(result: unknown): void {
    if (this.settled) return;
    this.settled = true;
    const answeredAt = performance.now();
    this.d.queue.release();
    let out: CallOutcome;
    try {
      out = readCallResult(this.d, this.name, result, this.started, answeredAt);
    } catch (e) {
      return tell(this.failed, e);
    }
    tell(this.done, out);
  }

  /** The request failed (device error, timeout, offline): the slot frees (the next call is sent), it is counted, the caller hears. */
  reject(err: unknown): void {
    if (this.settled) return;
    this.settled = true;
    const endedAt = performance.now();
    this.d.queue.release();
    countFailedCall(this.d.metrics, err, this.started, endedAt);
    tell(this.failed, err);
  }
}

/**
 * Tell the caller: a throw in its callback is its own fault, reported as a promise callback's would be (an unhandled
 * rejection, logged and counted by the safety net), and never reaches the device's frame handler, which would
 * close the device's connection for it.
 */
function tell<T>(callback: (value: T) => void, value: T): void {
  try {
    callback(value);
  } catch (e) {
    void Promise.reject(e);
  }
}
