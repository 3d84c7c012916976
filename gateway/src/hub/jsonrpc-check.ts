import type { JSONRPCMessage } from '@modelcontextprotocol/client';

/**
 * JSON-RPC 2.0 messages checked by hand: the same rules as the SDK's `JSONRPCMessageSchema` (a request, a
 * notification, a result or an error; exactly their keys; ids strings or safe integers; `params` an object whose
 * `_meta.progressToken` is an id), without a zod union that builds issue objects for each branch a message does
 * not match. Used on both sides of the gateway: `/mcp` requests (facade/transport-refusals.ts) and every line a stdio
 * server writes (stdio-transport.ts). Issue 21: those parses were a tenth of /mcp's CPU and allocation per call.
 */

const RELATED_TASK_META_KEY = 'io.modelcontextprotocol/related-task';

type Obj = Record<string, unknown>;
const isObject = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v);
const isId = (v: unknown): v is string | number => typeof v === 'string' || Number.isSafeInteger(v);

/** Every own key is one of `allowed` (the SDK's schemas are strict at the envelope). */
function onlyKeys(o: Obj, allowed: readonly string[]): boolean {
  for (const k in o) if (!allowed.includes(k)) return false;
  return true;
}

function paramsOk(params: unknown): boolean {
  if (params === undefined) return true;
  if (!isObject(params)) return false;
  const meta = params['_meta'];
  if (meta === undefined) return true;
  if (!isObject(meta)) return false;
  if (meta['progressToken'] !== undefined && !isId(meta['progressToken'])) return false;
  const task = meta[RELATED_TASK_META_KEY];
  return task === undefined || (isObject(task) && typeof task['taskId'] === 'string');
}

const REQUEST_KEYS = ['jsonrpc', 'id', 'method', 'params'];
const NOTIFICATION_KEYS = ['jsonrpc', 'method', 'params'];
const RESULT_KEYS = ['jsonrpc', 'id', 'result'];
const ERROR_KEYS = ['jsonrpc', 'id', 'error'];

/** The message if it is a valid JSON-RPC message, else undefined. An error's `error` keeps only its three fields. */
export function checkMessage(m: unknown): JSONRPCMessage | undefined {
  if (!isObject(m) || m['jsonrpc'] !== '2.0') return undefined;
  if ('method' in m) {
    if (typeof m['method'] !== 'string' || !paramsOk(m['params'])) return undefined;
    if ('id' in m) return isId(m['id']) && onlyKeys(m, REQUEST_KEYS) ? (m as unknown as JSONRPCMessage) : undefined;
    return onlyKeys(m, NOTIFICATION_KEYS) ? (m as unknown as JSONRPCMessage) : undefined;
  }
  if ('result' in m) return isId(m['id']) && isObject(m['result']) && onlyKeys(m, RESULT_KEYS) ? (m as unknown as JSONRPCMessage) : undefined;
  if ('error' in m) {
    const e = m['error'];
    if (!isObject(e) || !Number.isSafeInteger(e['code']) || typeof e['message'] !== 'string') return undefined;
    if (!onlyKeys(m, ERROR_KEYS) || (m['id'] !== undefined && !isId(m['id']))) return undefined;
    const error = { code: e['code'], message: e['message'], ...(e['data'] !== undefined ? { data: e['data'] } : {}) };
    return { ...m, error } as unknown as JSONRPCMessage;
  }
  return undefined;
}
