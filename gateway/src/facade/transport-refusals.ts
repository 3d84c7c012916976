import type { IncomingMessage, ServerResponse } from 'node:http';
import { isJsonContentType, type JSONRPCMessage } from '@modelcontextprotocol/server';
import { checkMessage, deeperThan, MAX_BATCH_SIZE, MAX_JSON_DEPTH } from './jsonrpc-message.js';

/**
 * What a Streamable HTTP session's request is refused for before the session reads it, and how: the checks of
 * node-transport.ts, with the SDK transport's statuses, JSON-RPC error codes and messages word for word (its tests and
 * SDK clients read them). Apart from the transport, which keeps the session's streams: these read only the request.
 */
export interface Refusal {
  status: number;
  code: number;
  message: string;
}

/** A request header as one string (repeated ones joined as Node joins most). */
export const header = (req: IncomingMessage, name: string): string | undefined => {
  const v = req.headers[name];
  return Array.isArray(v) ? v.join(', ') : v;
};

/** A POST's JSON-RPC messages (a batch or one), or why it is refused: what it accepts, its content type, its body. */
export function postMessages(req: IncomingMessage, body: unknown): JSONRPCMessage[] | Refusal {
  const accept = header(req, 'accept');
  if (!accept?.includes('application/json') || !accept.includes('text/event-stream'))
    return { status: 406, code: -32000, message: 'Not Acceptable: Client must accept both application/json and text/event-stream' };
  if (!isJsonContentType(header(req, 'content-type') ?? null))
    return { status: 415, code: -32000, message: 'Unsupported Media Type: Content-Type must be application/json' };
  // No body at all is what the SDK's JSON.parse of an empty text meets; too deep is refused as unparseable.
  if (body === undefined || deeperThan(body, MAX_JSON_DEPTH)) return { status: 400, code: -32700, message: 'Parse error: Invalid JSON' };
  if (Array.isArray(body) && body.length > MAX_BATCH_SIZE)
    return { status: 400, code: -32600, message: `Invalid Request: Batch must not exceed ${MAX_BATCH_SIZE} messages` };
  const raw: unknown[] = Array.isArray(body) ? body : [body];
  const messages: JSONRPCMessage[] = [];
  for (const r of raw) {
    const m = checkMessage(r);
    if (!m) return { status: 400, code: -32700, message: 'Parse error: Invalid JSON-RPC message' };
    messages.push(m);
  }
  return messages;
}

/** Why a GET (a stream) is refused for what it accepts. */
export function getRefusal(req: IncomingMessage): Refusal | undefined {
  if (!header(req, 'accept')?.includes('text/event-stream'))
    return { status: 406, code: -32000, message: 'Not Acceptable: Client must accept text/event-stream' };
  return undefined;
}

/** Why a request past `initialize` is refused: the session not initialized, its id missing or another's. */
export function sessionRefusal(req: IncomingMessage, initialized: boolean, sessionId: string | undefined): Refusal | undefined {
  if (!initialized) return { status: 400, code: -32000, message: 'Bad Request: Server not initialized' };
  const sid = header(req, 'mcp-session-id');
  if (!sid) return { status: 400, code: -32000, message: 'Bad Request: Mcp-Session-Id header is required' };
  if (sid !== sessionId) return { status: 404, code: -32001, message: 'Session not found' };
  return undefined;
}

/** Why a request is refused for the protocol version it names (none named is taken as supported). */
export function versionRefusal(req: IncomingMessage, supported: readonly string[]): Refusal | undefined {
  const v = header(req, 'mcp-protocol-version');
  if (v === undefined || supported.includes(v)) return undefined;
  return { status: 400, code: -32000, message: `Bad Request: Unsupported protocol version: ${v} (supported versions: ${supported.join(', ')})` };
}

/** The JSON-RPC error answer (no id: it answers the request, not one message of it). */
export function replyError(res: ServerResponse, status: number, code: number, message: string, data?: string): void {
  const error = data === undefined ? { code, message } : { code, message, data };
  res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify({ jsonrpc: '2.0', error, id: null }));
}
