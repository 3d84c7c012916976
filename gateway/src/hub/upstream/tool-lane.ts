import { ProtocolError, SdkError, SdkErrorCode, type JSONRPCMessage } from '@modelcontextprotocol/client';
import type { MessageTap } from '../stdio-transport.js';
import type { Abortable } from './base.js';

/**
 * `tools/call` on a hosted server's connection without the SDK's protocol layer (issue 21): the SDK `Client`'s
 * `request` builds a request record, a timeout timer, a once-listener and a result-schema adapter per call, ~half
 * of what the gateway's own CPU per /mcp call was once zod was gone. This lane writes the JSON-RPC request itself
 * and takes its answer before the SDK sees the message, keeping what the SDK gives a call: the timeout (one timer
 * for all the lane's calls, armed for the earliest deadline), cancellation (notifications/cancelled with the
 * request id and the reason's text), progress for the call's token, the same result decoding and check (the
 * negotiated codec the SDK uses, with its hand-written fast path), the same error classes, codes and messages,
 * and every pending call failed when the connection closes. Everything else on the connection (the server's own
 * requests, notifications, the SDK's requests) is the SDK Client's, as before.
 *
 * Ids are 2^30 to 2^31 − 1 (int32, for servers that parse ids so; after a billion calls they start again at 2^30,
 * skipping any still waiting). The SDK numbers its requests from 0 (and maps ids with `Number(id)`): it would need a
 * billion requests of its own on one connection (the lane takes every tool call) to reach the range. A message for
 * an id the lane no longer waits for (a late or duplicate answer, progress after the answer) goes on to the SDK,
 * which reports it as unknown, as it did before.
 */

/** What the lane needs of the SDK's negotiated wire codec (its 2025-11-25 era object). */
export interface LaneCodec {
  era: string;
  decodeResult(method: string, raw: unknown): { kind: string; result?: unknown; error?: unknown };
  validateResult(method: string, raw: unknown): CodecOutcome;
  validateNotification(method: string, raw: unknown): CodecOutcome;
}
type CodecOutcome = { ok: true; value: unknown } | { ok: false; reason: string; message?: string };

/** The connection's write: throws (or rejects) when it cannot send; may return nothing when the write is done. */
export type LaneSend = (message: JSONRPCMessage) => Promise<void> | void;

export interface LaneProgress {
  progress: number;
  total?: number;
  message?: string;
}

export interface LaneCall {
  name: string;
  args: Record<string, unknown>;
  timeoutMs: number;
  /** The call's stop (an AbortSignal, or the hub's CallStop): on abort the server is sent notifications/cancelled. */
  signal?: Abortable | undefined;
  onprogress?: ((p: LaneProgress) => void) | undefined;
}

export const LANE_FIRST_ID = 2 ** 30;
const LANE_LAST_ID = 2 ** 31 - 1;

interface Pending {
  readonly id: number;
  readonly deadline: number;
  readonly timeoutMs: number;
  readonly resolve: (r: Record<string, unknown>) => void;
  readonly reject: (e: unknown) => void;
  readonly signal: Abortable | undefined;
  onAbort: (() => void) | undefined;
  readonly onprogress: ((p: LaneProgress) => void) | undefined;
}

const timedOut = (timeout: number) => new SdkError(SdkErrorCode.RequestTimeout, 'Request timed out', { timeout });
/** What the SDK rejects a cancelled request with (`Protocol._requestWithSchemaViaCodec`'s `cancel`). */
const cancelError = (reason: unknown) => (reason instanceof SdkError ? reason : new SdkError(SdkErrorCode.RequestTimeout, String(reason)));

export class ToolCallLane implements MessageTap {
  private nextId = LANE_FIRST_ID;
  private readonly pending = new Map<number, Pending>();
  private timer: NodeJS.Timeout | undefined;
  private timerAt = Infinity;
  private ended = false;

  constructor(
    private readonly send: LaneSend,
    private readonly codec: LaneCodec,
    private readonly onerror: (e: Error) => void,
  ) {}

  /** Calls waiting for their answer (for tests and status). */
  get size(): number {
    return this.pending.size;
  }

  /** The raw `tools/call` result, decoded and checked as the SDK's `request` does; rejects as it would. */
  call(c: LaneCall): Promise<Record<string, unknown>> {
    return new Promise((resolve, reject) => {
      if (this.ended) return reject(new Error('Not connected'));
      if (c.signal?.aborted) return reject(cancelError(c.signal.reason));
      const id = this.newId();
      const params: Record<string, unknown> = { name: c.name, arguments: c.args };
      // The SDK's own token for a call that wants progress: its request id.
      if (c.onprogress) params['_meta'] = { progressToken: id };
      const p: Pending = {
        id,
        deadline: performance.now() + c.timeoutMs,
        timeoutMs: c.timeoutMs,
        resolve,
        reject,
        signal: c.signal,
        onAbort: undefined,
        onprogress: c.onprogress,
      };
      this.pending.set(id, p);
      if (c.signal) {
        // No `once` (Node 20 wraps such a listener; issue 21): settle() removes it, and an abort fires once.
        p.onAbort = () => this.cancel(p, c.signal!.reason);
        c.signal.addEventListener('abort', p.onAbort);
      }
      this.arm(p.deadline);
      // The key order of the SDK's request (`{ ...request, jsonrpc, id }`): the same bytes on the wire but the id.
      this.write({ method: 'tools/call', params, jsonrpc: '2.0', id } as JSONRPCMessage, p);
    });
  }

  private newId(): number {
    let id = this.nextId;
    while (this.pending.has(id)) id = id >= LANE_LAST_ID ? LANE_FIRST_ID : id + 1;
    this.nextId = id >= LANE_LAST_ID ? LANE_FIRST_ID : id + 1;
    return id;
  }

  /** A message from the server: true when it was this lane's (the answer to a call it waits for, or its progress). */
  take(m: JSONRPCMessage): boolean {
    const msg = m as Record<string, unknown>;
    if ('method' in msg) return msg['method'] === 'notifications/progress' && this.progress(msg);
    if (!('id' in msg) || this.pending.size === 0) return false;
    const p = this.pending.get(Number(msg['id']));
    if (!p) return false;
    this.settle(p);
    if ('error' in msg) {
      const e = msg['error'] as { code: number; message: string; data?: unknown };
      p.reject(ProtocolError.fromError(e.code, e.message, e.data));
    } else this.answer(p, msg['result']);
    return true;
  }

  /** The connection closed: every call still waiting fails as the SDK fails its requests then. */
  closed(): void {
    this.ended = true;
    clearTimeout(this.timer);
    this.timer = undefined;
    this.timerAt = Infinity;
    if (this.pending.size === 0) return;
    const error = new SdkError(SdkErrorCode.ConnectionClosed, 'Connection closed');
    for (const p of [...this.pending.values()]) {
      this.settle(p);
      p.reject(error);
    }
  }

  /** `decodeResult`, then the era's `tools/call` result check: what the SDK's response handler does. */
  private answer(p: Pending, raw: unknown): void {
    let decoded: ReturnType<LaneCodec['decodeResult']>;
    try {
      decoded = this.codec.decodeResult('tools/call', raw);
    } catch (error) {
      return p.reject(error instanceof Error ? error : new Error(String(error)));
    }
    if (decoded.kind === 'invalid') return p.reject(decoded.error);
    if (decoded.kind !== 'complete')
      return p.reject(new SdkError(SdkErrorCode.UnsupportedResultType, `Unsupported result type '${decoded.kind}' for tools/call`));
    const outcome = this.codec.validateResult('tools/call', decoded.result);
    if (outcome.ok) return p.resolve(outcome.value as Record<string, unknown>);
    const issue = outcome.reason === 'invalid' ? outcome.message : 'not-in-era: tools/call';
    p.reject(new SdkError(SdkErrorCode.InvalidResult, `Invalid result for tools/call: ${issue}`));
  }

  /** Progress for one of the lane's calls, checked by the era's schema as the SDK's notification handler does. */
  private progress(msg: Record<string, unknown>): boolean {
    const params = msg['params'] as Record<string, unknown> | undefined;
    const p = params && this.pending.size > 0 ? this.pending.get(Number(params['progressToken'])) : undefined;
    if (!p?.onprogress) return false;
    const outcome = this.codec.validateNotification('notifications/progress', msg);
    if (!outcome.ok) {
      this.onerror(new Error(`Uncaught error in notification handler: Error: ${outcome.message ?? outcome.reason}`));
      return true;
    }
    const { progressToken: _token, ...rest } = (outcome.value as { params: Record<string, unknown> }).params;
    try {
      p.onprogress(rest as unknown as LaneProgress);
    } catch (e) {
      this.onerror(e as Error);
    }
    return true;
  }

  private write(message: JSONRPCMessage, p: Pending): void {
    const failed = (e: unknown) => {
      if (this.pending.get(p.id) !== p) return;
      this.settle(p);
      p.reject(e);
    };
    try {
      const sent = this.send(message);
      if (sent) sent.catch(failed);
    } catch (e) {
      failed(e);
    }
  }

  /** Timeout or abort: the server is told (as the SDK tells it), the caller gets the reason. */
  private cancel(p: Pending, reason: unknown): void {
    if (this.pending.get(p.id) !== p) return;
    this.settle(p);
    const notice = { jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: p.id, reason: String(reason) } } as JSONRPCMessage;
    try {
      const sent = this.send(notice);
      if (sent) sent.catch((e: unknown) => this.onerror(new Error(`Failed to send cancellation: ${String(e)}`)));
    } catch (e) {
      this.onerror(new Error(`Failed to send cancellation: ${String(e)}`));
    }
    p.reject(cancelError(reason));
  }

  private settle(p: Pending): void {
    this.pending.delete(p.id);
    if (p.onAbort) p.signal!.removeEventListener('abort', p.onAbort);
  }

  /**
   * One timer for every call: armed for the earliest deadline, and left armed when that call is answered (the
   * sweep then finds nothing due and re-arms for the next). Calls with the same timeout come in deadline order,
   * so at any concurrency a call costs no timer operation but the rare re-arm.
   */
  private arm(deadline: number): void {
    if (deadline >= this.timerAt) return;
    clearTimeout(this.timer);
    this.timerAt = deadline;
    this.timer = setTimeout(this.sweep, Math.max(1, Math.ceil(deadline - performance.now())));
    // A call waiting holds the process through its connection, not through this timer.
    this.timer.unref();
  }

  private readonly sweep = (): void => {
    this.timer = undefined;
    this.timerAt = Infinity;
    const now = performance.now();
    let next = Infinity;
    for (const p of [...this.pending.values()]) {
      if (p.deadline <= now) this.cancel(p, timedOut(p.timeoutMs));
      else if (p.deadline < next) next = p.deadline;
    }
    if (next !== Infinity) this.arm(next);
  };
}
