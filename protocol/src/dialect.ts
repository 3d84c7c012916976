import { safeJsonText } from './json.js';
import { RpcErrorCode, type RpcErrorResponse } from './jsonrpc.js';

/** A device error with a code, however the device sent it. */
export interface NormalizedRpcError {
  code: number;
  message: string;
  data?: unknown;
  /** The device sent no numeric code; `code` was inferred from the message. */
  inferredCode: boolean;
}

const MAX_MESSAGE = 2048;

/**
 * The reference firmware's error texts (main/mcp_server.cc) mapped to the JSON-RPC codes a standard
 * MCP server would have used. Anything else is a generic server error; the text is always kept.
 */
const KNOWN_MESSAGES: ReadonlyArray<[RegExp, number]> = [
  [/^Method not implemented/i, RpcErrorCode.MethodNotFound],
  [/^(Unknown tool|Missing params|Missing name|Invalid arguments|Missing valid argument|Value (exceeds|is below))/i, RpcErrorCode.InvalidParams],
  [/because of payload size limit/i, RpcErrorCode.InvalidParams],
];

export function normalizeRpcError(error: RpcErrorResponse['error']): NormalizedRpcError {
  const message = messageText(error.message);
  const out: NormalizedRpcError =
    typeof error.code === 'number'
      ? { code: error.code, message, inferredCode: false }
      : { code: inferCode(message), message, inferredCode: true };
  if (error.data !== undefined) out.data = error.data;
  return out;
}

function messageText(m: unknown): string {
  // A device may send any JSON as the message: serialized without ever throwing.
  const text = typeof m === 'string' ? m : m === undefined ? 'device error (no message)' : safeJsonText(m, 'device error (unprintable message)');
  return text.length > MAX_MESSAGE ? `${text.slice(0, MAX_MESSAGE)}…` : text;
}

function inferCode(message: string): number {
  for (const [re, code] of KNOWN_MESSAGES) if (re.test(message)) return code;
  return RpcErrorCode.ServerError;
}
