import { ProtocolError, ProtocolErrorCode } from '@modelcontextprotocol/server';
import { GatewayError } from '../errors.js';

/**
 * A domain error as the JSON-RPC error a /mcp client receives: what the client named does not exist
 * (a tool, a resource, a prompt) is invalid params (-32602); anything else is an internal error carrying
 * the same sentence. Other errors pass unchanged (the SDK answers them).
 */
export function toProtocolError(e: unknown): unknown {
  if (!(e instanceof GatewayError)) return e;
  const invalidParams = e.code === 'NOT_FOUND' || e.code === 'TOOL_NOT_FOUND';
  return new ProtocolError(invalidParams ? ProtocolErrorCode.InvalidParams : ProtocolErrorCode.InternalError, e.message);
}
