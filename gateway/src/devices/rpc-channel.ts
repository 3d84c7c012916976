import { encodeMcpFrame, normalizeRpcError, rpcRequest, unparsableReplyId, type RpcErrorResponse, type RpcId } from '@voxgate/protocol';
import type { Logger } from 'pino';
import { GatewayError } from '../errors.js';
import type { Metrics } from '../metrics.js';
import type { BadInputLog } from './bad-input-log.js';
import { DeadlineTimer } from './deadline-timer.js';

export interface RpcChannelDeps {
  deviceId: string;
  /** The MCP envelope's session id of every request. */
  sessionId: string;
  /** Sends one text frame; false when the link is closed and nothing was sent. */
  send: (text: string) => boolean;
  /** True once the session is closed: no request is sent any more. */
  isClosed: () => boolean;
  log: Logger;
  metrics: Metrics;
  badInput: BadInputLog;
}

/** Reads the reply to request `id` from its raw text before it is parsed; undefined: not taken (parsed as usual). */
export interface RawReplyReader {
  read(text: string, id: number): unknown;
}

/** Who is told a request's outcome: its result, or why it failed. */
export interface RpcReply {
  resolve(result: unknown): void;
  reject(err: GatewayError): void;
}

/**
 * A request awaiting its reply: the caller's own object (a tool call's job), which the channel fills in as it sends
 * it and holds until the reply, the timeout or the link's end. One object per request, made with `new`: the channel
 * adds no record of its own (an object literal per request before). A literal's allocation site can be pretenured
 * by V8 (made in the old generation from then on, after a burst in which most of them lived, e.g. a fleet's setup
 * requests), and an old record that pointed at the caller's objects kept each call's HTTP request and response
 * alive across young collections until the next full one (docs/performance.md, "callgc").
 */
export abstract class PendingRequest implements RpcReply {
  /** Set by the channel when sent: the JSON-RPC id, the method, when it times out (`performance.now()` ms), the timeout its error names. */
  rpcId = 0;
  rpcMethod = '';
  dueAt = 0;
  reportedMs = 0;
  abstract resolve(result: unknown): void;
  abstract reject(err: GatewayError): void;
}

/** `request`'s pending request: settles its promise. */
class PromisedRequest extends PendingRequest {
  constructor(
    readonly resolve: (result: unknown) => void,
    readonly reject: (err: GatewayError) => void,
  ) {
    super();
  }
}

const monotonic = () => performance.now();

/** The id of the request a refused frame answers is read from its start (the firmware writes it first). */
const REPLY_HEAD = 512;
/** How much of an unparsable reply a caller is shown. */
const MAX_RAW_REPLY = 1024;

/**
 * Requests to one device and the matching of its replies (the MCP SDK's Protocol layer): ids, pending
 * requests with their timeouts, replies that settle them, replies refused before they could be read, and
 * replies that match nothing (late or unknown ids, counted).
 */
export class RpcChannel {
  private nextId = 1;
  /**
   * Requests awaiting their reply: the first in `one`, more (setup's overlap with a call, concurrency above 1)
   * in `more`, made on first use. A device answers one request at a time, so a Map per session (~200 B, kept
   * with its table once used) held nothing most of its life.
   */
  private one: PendingRequest | undefined;
  private more: Map<number, PendingRequest> | undefined;
  /** The one request whose reply may be read from raw text (the tools/list walk asks one page at a time). */
  private raw: { id: number; reader: RawReplyReader } | undefined;
  /** The requests' timeouts: one timer for the channel, made on its first request. */
  private deadlines: DeadlineTimer | undefined;

  constructor(private readonly d: RpcChannelDeps) {}

  get pendingCount(): number {
    return (this.one ? 1 : 0) + (this.more?.size ?? 0);
  }

  offline(): GatewayError {
    return new GatewayError('DEVICE_OFFLINE', `device ${this.d.deviceId} is offline`);
  }

  /**
   * Send a request and await its reply; ids are small positive integers (devices drop string ids).
   * `reportedMs`: the timeout the caller asked for, which the error names (`timeoutMs` may be what is left of it).
   * `raw`: reads this request's reply from its text before the frame parser runs (see `takeRaw`).
   */
  request(
    method: string,
    params: Record<string, unknown> | undefined,
    timeoutMs: number,
    opts: { reportedMs?: number; raw?: RawReplyReader } = {},
  ): Promise<unknown> {
    if (this.d.isClosed()) return Promise.reject(this.offline());
    return new Promise((resolve, reject) =>
      this.requestFor(new PromisedRequest(resolve, reject), method, params, timeoutMs, opts.reportedMs ?? timeoutMs, opts.raw),
    );
  }

  /** `request` in callback form: `p` is told the outcome (at once when the device is offline); one request per object. */
  requestFor(
    p: PendingRequest,
    method: string,
    params: Record<string, unknown> | undefined,
    timeoutMs: number,
    reportedMs = timeoutMs,
    raw?: RawReplyReader,
  ): void {
    if (this.d.isClosed()) return p.reject(this.offline());
    const id = this.nextId++;
    // Encoded before it is registered: a request that cannot be encoded leaves nothing pending.
    const frame = encodeMcpFrame(this.d.sessionId, rpcRequest(id, method, params));
    const deadline = performance.now() + timeoutMs;
    p.rpcId = id;
    p.rpcMethod = method;
    p.dueAt = deadline;
    p.reportedMs = reportedMs;
    if (this.one === undefined) this.one = p;
    else (this.more ??= new Map()).set(id, p);
    if (raw) this.raw = { id, reader: raw };
    let sent: boolean;
    try {
      sent = this.d.send(frame);
    } catch (e) {
      this.forget(id);
      throw e;
    }
    if (!sent) {
      this.forget(id);
      return p.reject(this.offline());
    }
    (this.deadlines ??= new DeadlineTimer(this, monotonic)).arm(deadline);
  }

  /** The deadline timer's sweep: requests due at `now` fail with DEVICE_TIMEOUT, in the order they were sent. */
  expireDue(now: number): number {
    let next = Infinity;
    for (const p of this.all()) {
      if (p.dueAt > now) next = Math.min(next, p.dueAt);
      else {
        this.forget(p.rpcId);
        p.reject(new GatewayError('DEVICE_TIMEOUT', `device ${this.d.deviceId} did not answer ${p.rpcMethod} within ${p.reportedMs} ms`));
      }
    }
    // Nothing left to time: the timer goes (~200 B kept per idle device otherwise); the next request makes one.
    if (this.pendingCount === 0) this.deadlines = undefined;
    return next;
  }

  /**
   * Nothing pending, and nothing expected soon (the device just got ready): the timer goes now rather than when it
   * fires, up to a request timeout later (a `Timeout` and the timer, ~200 B per device meanwhile, promoted to the
   * old generation while a fleet dials in). The next request makes another.
   */
  releaseTimer(): void {
    if (this.deadlines === undefined || this.pendingCount > 0) return;
    this.deadlines.stop();
    this.deadlines = undefined;
  }

  /** Every pending request, in the order they were sent. */
  private all(): PendingRequest[] {
    const all = this.one ? [this.one, ...(this.more?.values() ?? [])] : [...(this.more?.values() ?? [])];
    return all.sort((a, b) => a.rpcId - b.rpcId);
  }

  /** A text frame, offered to the raw reader of the request awaiting one; true when it settled that request. */
  takeRaw(text: string): boolean {
    const raw = this.raw;
    if (raw === undefined) return false;
    const value = raw.reader.read(text, raw.id);
    if (value === undefined) return false;
    this.take(raw.id)?.resolve(value);
    return true;
  }

  /** A JSON-RPC result from the device; false when it answers nothing pending. */
  onResult(id: RpcId | null, result: unknown): boolean {
    const p = this.take(id);
    p?.resolve(result);
    return p !== undefined;
  }

  /** A JSON-RPC error from the device: the request fails with DEVICE_ERROR and the device's code; false when it answers nothing pending. */
  onError(id: RpcId | null, error: RpcErrorResponse['error']): boolean {
    const p = this.take(id);
    if (!p) return false;
    const err = normalizeRpcError(error);
    p.reject(new GatewayError('DEVICE_ERROR', err.message, { rpcCode: err.code, codeInferred: err.inferredCode, method: p.rpcMethod }));
    return true;
  }

  /**
   * A frame refused at the parse boundary (not JSON even after repair, too large, too deep) may still
   * answer a request: the firmware writes the envelope and `"id":N` first, so the start of the text says
   * which. That request fails now with DEVICE_ERROR (and, for text that is not JSON, the raw text) instead
   * of waiting out its timeout.
   */
  refuseReply(text: string, reason: string, detail: string): void {
    const id = unparsableReplyId(text.length > REPLY_HEAD ? text.slice(0, REPLY_HEAD) : text);
    if (id === undefined || !this.find(id)) return;
    const raw = text.length > MAX_RAW_REPLY ? `${text.slice(0, MAX_RAW_REPLY)}…` : text;
    const message = reason === 'not_json' ? `device sent a reply that is not JSON: ${raw}` : `device reply refused (${reason}): ${detail}`;
    const unparsable = reason === 'not_json' ? { unparsable: true } : {};
    const p = this.take(id);
    p?.reject(new GatewayError('DEVICE_ERROR', message, { method: p.rpcMethod, reason, ...unparsable }));
  }

  /**
   * The link refused a message over its size limit without reading it all; the request it answers (read
   * from the start of the message) fails now with a clear error, instead of waiting out its timeout or
   * losing the connection.
   */
  refuseOversized(bytes: number, limit: number, head: string): void {
    const id = unparsableReplyId(head);
    const detail = `device reply of ${bytes} bytes exceeds the ${limit}-byte limit (mqtt.maxPacketBytes); it was refused`;
    // The device's bad input, within its budget: an MQTT device may send such messages one after another (red team 11).
    this.d.badInput.note('warn', { bytes, limit, id }, 'device message over the size limit refused');
    if (id === undefined || !this.find(id)) return;
    const p = this.take(id);
    p?.reject(new GatewayError('DEVICE_ERROR', detail, { method: p.rpcMethod, bytes, limit }));
  }

  /** Fail every pending request at once (the link closed, a newer connection took over). */
  failAll(err: GatewayError): void {
    this.deadlines?.stop();
    for (const p of this.all()) {
      this.forget(p.rpcId);
      p.reject(err);
    }
  }

  private find(id: number): PendingRequest | undefined {
    const one = this.one;
    return one !== undefined && one.rpcId === id ? one : this.more?.get(id);
  }

  /** The pending request a reply settles, no longer pending; undefined (counted, noted) when it matches none. */
  private take(id: RpcId | null): PendingRequest | undefined {
    const p = typeof id === 'number' ? this.find(id) : undefined;
    if (typeof id !== 'number' || !p) {
      this.d.metrics.lateReplies.inc();
      const shown = typeof id === 'string' ? id.slice(0, 64) : id;
      this.d.badInput.note('debug', { id: shown }, 'reply matches no pending request (late or unknown id); dropped');
      return undefined;
    }
    this.forget(id);
    return p;
  }

  private forget(id: number): void {
    if (this.one?.rpcId === id) this.one = undefined;
    else this.more?.delete(id);
    if (this.raw?.id === id) this.raw = undefined;
  }
}
