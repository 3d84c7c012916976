import { z } from 'zod';
import { DEFAULT_JSON_LIMITS, checkJsonBounds, isJsonObject, tryParseJson, type JsonLimits } from './json.js';

export const JSONRPC_VERSION = '2.0';
export const RpcErrorCode = {
  ParseError: -32700,
  InvalidRequest: -32600,
  MethodNotFound: -32601,
  InvalidParams: -32602,
  InternalError: -32603,
  /** Generic implementation-defined server error: what a device error without a code becomes. */
  ServerError: -32000,
} as const;

const Id = z.union([z.number().finite(), z.string().max(256)]);
const Params = z.union([z.record(z.string(), z.unknown()), z.array(z.unknown())]);

export const RpcRequestSchema = z.object({
  jsonrpc: z.literal(JSONRPC_VERSION),
  id: Id,
  method: z.string().min(1).max(256),
  params: Params.optional(),
});
export const RpcNotificationSchema = z.object({
  jsonrpc: z.literal(JSONRPC_VERSION),
  method: z.string().min(1).max(256),
  params: Params.optional(),
});
export const RpcResultSchema = z.object({
  jsonrpc: z.literal(JSONRPC_VERSION),
  id: Id,
  result: z.unknown(),
});
/** `code` is optional here: the reference firmware never sends one. See `normalizeRpcError`. */
export const RpcErrorSchema = z.object({
  jsonrpc: z.literal(JSONRPC_VERSION),
  id: Id.nullable(),
  error: z
    .object({
      code: z.number().int().optional(),
      message: z.unknown().optional(),
      data: z.unknown().optional(),
    })
    .loose(),
});

export type RpcId = z.infer<typeof Id>;
export type RpcRequest = z.infer<typeof RpcRequestSchema>;
export type RpcNotification = z.infer<typeof RpcNotificationSchema>;
export type RpcResult = z.infer<typeof RpcResultSchema>;
export type RpcErrorResponse = z.infer<typeof RpcErrorSchema>;

export type RpcMessage =
  | { kind: 'request'; msg: RpcRequest }
  | { kind: 'notification'; msg: RpcNotification }
  | { kind: 'response'; msg: RpcResult }
  | { kind: 'error'; msg: RpcErrorResponse };

export type Classified = { ok: true; message: RpcMessage } | { ok: false; code: -32700 | -32600; detail: string };

/** Classify one JSON-RPC 2.0 message (already parsed). Batches are not part of the device dialect. */
export function classifyRpc(value: unknown): Classified {
  if (!isJsonObject(value)) return invalid('a JSON-RPC message must be an object');
  if (value['jsonrpc'] !== JSONRPC_VERSION) return invalid('jsonrpc must be "2.0"');
  const hasId = 'id' in value;
  if ('method' in value) {
    if (hasId) {
      const r = RpcRequestSchema.safeParse(value);
      return r.success ? { ok: true, message: { kind: 'request', msg: r.data } } : invalid('malformed request');
    }
    const n = RpcNotificationSchema.safeParse(value);
    return n.success ? { ok: true, message: { kind: 'notification', msg: n.data } } : invalid('malformed notification');
  }
  if ('result' in value) {
    // RpcResultSchema's check and output (jsonrpc, id, result; other keys dropped), without zod per reply.
    const id = value['id'];
    if (isRpcId(id)) return { ok: true, message: { kind: 'response', msg: { jsonrpc: JSONRPC_VERSION, id, result: value['result'] } } };
    const r = RpcResultSchema.safeParse(value);
    return r.success ? { ok: true, message: { kind: 'response', msg: r.data } } : invalid('malformed response');
  }
  if ('error' in value) {
    const e = RpcErrorSchema.safeParse(value);
    return e.success ? { ok: true, message: { kind: 'error', msg: e.data } } : invalid('malformed error response');
  }
  return invalid('neither a request, a notification nor a response');
}

/** What the `Id` schema accepts: a finite number, or a string of at most 256 characters. */
function isRpcId(v: unknown): v is RpcId {
  return typeof v === 'number' ? Number.isFinite(v) : typeof v === 'string' && v.length <= 256;
}

/** Parse and classify a JSON-RPC text; depth and size are bounded before parsing. */
export function parseRpc(text: string, limits: JsonLimits = DEFAULT_JSON_LIMITS): Classified {
  const bounds = checkJsonBounds(text, limits);
  if (!bounds.ok) return { ok: false, code: RpcErrorCode.ParseError, detail: bounds.detail };
  const parsed = tryParseJson(text);
  if (!parsed.ok) return { ok: false, code: RpcErrorCode.ParseError, detail: parsed.error };
  return classifyRpc(parsed.value);
}

function invalid(detail: string): Classified {
  return { ok: false, code: RpcErrorCode.InvalidRequest, detail };
}

/** A notification: no id, so no reply is expected (the reference firmware ignores every `notifications*`). */
export function rpcNotification(
  method: string,
  params?: Record<string, unknown>,
): { jsonrpc: typeof JSONRPC_VERSION; method: string; params?: Record<string, unknown> } {
  return params === undefined ? { jsonrpc: JSONRPC_VERSION, method } : { jsonrpc: JSONRPC_VERSION, method, params };
}

export function rpcRequest(id: RpcId, method: string, params?: Record<string, unknown>): RpcRequest {
  return params === undefined ? { jsonrpc: JSONRPC_VERSION, id, method } : { jsonrpc: JSONRPC_VERSION, id, method, params };
}
