import { getEventListeners } from 'node:events';
import type { IncomingMessage } from 'node:http';
import {
  ProtocolError,
  ProtocolErrorCode,
  type JSONRPCMessage,
  type JSONRPCRequest,
  type McpServer,
  type RequestId,
  type Transport,
} from '@modelcontextprotocol/server';
import { fastCallToolRequest } from '../hub/tools-call-check.js';
import type { PeerMethod } from '../hub/upstream/base.js';
import type { ToolsCall, ToolsCallVia } from './mcp-server.js';

/**
 * A session's `tools/call` dispatched by Voxgate, not by the SDK's `Protocol._onrequest` (issue 21: its per-request
 * context, `buildContext`, wrapper chain and promise chain were the largest part of /mcp's own CPU per call left).
 * It does, in the same order, what the SDK's `_onrequest` and `Server`'s `tools/call` wrapper do for a request they
 * accept, and answers with the same bytes (`test/facade/fast-call.test.ts` sends the same sequences to both):
 *
 * - it takes only what the SDK would serve without surprises: a 2025-era session (the codec `tools-call-check.ts`
 *   speeds up), a request the hand check accepts (`fastCallToolRequest`: exactly the SDK schema's output), no
 *   wire-only material to lift (the 2026 envelope's `_meta` keys, `inputResponses`, `requestState`); anything else
 *   (bad params, a missing name, a task, …) returns false and goes to the SDK as before, with its own refusals;
 * - its abort handle sits in the SDK server's own table of request handlers' controllers, so `notifications/cancelled`
 *   (the SDK's `_oncancel`) and the session's close (`_onclose`) abort it as they abort theirs, and a cancelled call
 *   gets no answer;
 * - progress and the hosted server's requests go through the server's `notification` and `request` with the
 *   request's id as `relatedRequestId` (what `ctx.mcpReq.notify` and `ctx.mcpReq.send` do);
 * - the result is normalized (`content: []` when absent) and checked with the codec's `tools/call` result check,
 *   then encoded; errors keep the SDK's code, message and data.
 */
export type FastEntry = (m: JSONRPCRequest, req: IncomingMessage) => boolean;

/** The SDK 2.4 `Server` internals this reads; another SDK version without them gets no fast path. */
interface ServerInternals {
  _requestHandlerAbortControllers: Map<RequestId, { abort(reason?: unknown): void }>;
  _wireCodec(): unknown;
  _onerror(error: Error): void;
  readonly transport: Transport | undefined;
  notification(n: { method: string; params?: Record<string, unknown> }, options: { relatedRequestId: RequestId }): Promise<void>;
  request(r: { method: string; params: Record<string, unknown> }, options: { signal: AbortSignal; relatedRequestId: RequestId }): Promise<unknown>;
}

/** The 2025-11-25 codec's part used here (the one `speedUpToolsCall` marks). */
interface Codec {
  era: string;
  validateResult(method: string, raw: unknown): { ok: true; value: unknown } | { ok: false; reason: string; message?: string };
  encodeResult(method: string, result: unknown): unknown;
  encodeErrorCode(code: number): number;
}

const ERA = '2025-11-25';
const FAST = Symbol.for('voxgate.tools-call-fast-path');
/** The SDK lifts some `_meta` keys under this prefix out of a request (its `RESERVED_ENVELOPE_META_KEYS`): any such key sends it there. */
const ENVELOPE_META_PREFIX = 'io.modelcontextprotocol/';
/** A result with one of these keys is not given `content: []` (the SDK's `TOOL_RESULT_FOREIGN_FAMILY_KEYS`). */
const FOREIGN_RESULT_KEYS = ['task', 'inputRequests', 'requestState'] as const;

/** The fast entry for a facade server built by `buildFacadeServer`, or undefined when this SDK does not fit. */
export function fastToolsCall(mcp: McpServer, call: ToolsCall): FastEntry | undefined {
  const s = mcp.server as unknown as ServerInternals;
  const fits =
    s._requestHandlerAbortControllers instanceof Map &&
    typeof s._wireCodec === 'function' &&
    typeof s._onerror === 'function' &&
    typeof s.notification === 'function' &&
    typeof s.request === 'function';
  if (!fits) return undefined;
  return (m, req) => {
    if (m.method !== 'tools/call' || liftable(m.params)) return false;
    const codec = s._wireCodec() as (Codec & { [FAST]?: true }) | undefined;
    const transport = s.transport;
    if (codec?.era !== ERA || !codec[FAST] || !transport) return false;
    const request = fastCallToolRequest(m);
    if (!request) return false;
    const params = request['params'] as Parameters<ToolsCall>[0];
    const controller = spare.pop() ?? new AbortController();
    s._requestHandlerAbortControllers.set(m.id, controller);
    const via: ToolsCallVia = {
      progressToken: (params as { _meta?: { progressToken?: string | number } })._meta?.progressToken,
      notify: (n) => s.notification(n, { relatedRequestId: m.id }),
      send: (method: PeerMethod, p, signal) => s.request({ method, params: p }, { signal, relatedRequestId: m.id }) as Promise<Record<string, unknown>>,
      signal: controller.signal,
      tokensHeader: header(req, 'x-voxgate-tokens'),
    };
    void answer(s, codec, transport, m.id, controller, call(params, via));
    return true;
  };
}

/** What the SDK's `_onrequest` does with the handler's outcome: nothing once aborted, else the result or the error. */
async function answer(s: ServerInternals, codec: Codec, transport: Transport, id: RequestId, controller: AbortController, run: Promise<unknown>) {
  try {
    let failed = false;
    let outcome: unknown;
    try {
      outcome = checkResult(codec, await run);
    } catch (e) {
      failed = true;
      outcome = e;
    }
    if (controller.signal.aborted) return;
    let response: JSONRPCMessage;
    if (failed) response = errorResponse(codec, id, outcome);
    else
      try {
        response = { result: codec.encodeResult('tools/call', outcome), jsonrpc: '2.0', id } as JSONRPCMessage;
      } catch (e) {
        s._onerror(new Error(`Failed to encode result for tools/call: ${String(e)}`));
        response = { jsonrpc: '2.0', id, error: { code: ProtocolErrorCode.InternalError, message: 'Internal error' } };
      }
    await transport.send(response);
  } catch (e) {
    s._onerror(new Error(`Failed to send response: ${String(e)}`));
  } finally {
    if (s._requestHandlerAbortControllers.get(id) === controller) s._requestHandlerAbortControllers.delete(id);
    giveBack(controller);
  }
}

/**
 * Abort controllers of calls that ended unaborted with no listener left on their signal: as good as new, and the
 * next call's (Node 20 builds a controller and its signal in ~10 µs, the most expensive object of a call: issue 21).
 * The signal is only ever the hub call's caller signal, whose in-flight listener is removed when the call ends.
 */
const spare: AbortController[] = [];
const SPARE_MAX = 256;

function giveBack(c: AbortController): void {
  if (spare.length < SPARE_MAX && !c.signal.aborted && getEventListeners(c.signal, 'abort').length === 0) spare.push(c);
}

/** `Server`'s tools/call wrapper on a handler's result: `content: []` when absent, then the codec's result check. */
function checkResult(codec: Codec, result: unknown): unknown {
  // The hub never returns an input-required result (the SDK client's 2025 codec strips `resultType`, device and
  // built-in results are Voxgate's own); the SDK would run its legacy multi-round shim on one.
  if (isObject(result) && result['resultType'] === 'input_required')
    throw new ProtocolError(ProtocolErrorCode.InternalError, 'input-required result on a 2025 session');
  const normalized = isObject(result) && result['content'] === undefined && !FOREIGN_RESULT_KEYS.some((k) => k in result) ? { ...result, content: [] } : result;
  const v = codec.validateResult('tools/call', normalized);
  if (!v.ok) {
    const notInEra = v.reason === 'not-in-era';
    throw new ProtocolError(
      notInEra ? ProtocolErrorCode.InternalError : ProtocolErrorCode.InvalidParams,
      notInEra ? 'No wire schema for tools/call in the resolved era' : `Invalid tools/call result: ${v.message}`,
    );
  }
  return v.value;
}

/** The SDK's error answer: the thrown code when it is one, else -32603; the message; data when there is some. */
function errorResponse(codec: Codec, id: RequestId, e: unknown): JSONRPCMessage {
  const err = e as { code?: unknown; message?: string; data?: unknown };
  const code = Number.isSafeInteger(err['code']) ? (err['code'] as number) : ProtocolErrorCode.InternalError;
  const error = { code: codec.encodeErrorCode(code), message: err.message ?? 'Internal error', ...(err['data'] !== undefined && { data: err['data'] }) };
  return { jsonrpc: '2.0', id, error };
}

/** Whether the SDK would lift wire-only material out of these params (then it serves the request itself). */
function liftable(params: unknown): boolean {
  if (!isObject(params)) return false;
  if ('inputResponses' in params || 'requestState' in params) return true;
  const meta = params['_meta'];
  if (!isObject(meta)) return false;
  for (const k in meta) if (k.startsWith(ENVELOPE_META_PREFIX)) return true;
  return false;
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

const header = (req: IncomingMessage, name: string): string | undefined => {
  const v = req.headers[name];
  return Array.isArray(v) ? v.join(', ') : v;
};
