import type { JSONRPCMessage, JSONRPCRequest } from '@modelcontextprotocol/server';
import { checkMessage as checkAnyMessage } from '../hub/jsonrpc-check.js';

/**
 * JSON-RPC 2.0 messages for `/mcp`: each one checked by hand with the SDK schema's rules (hub/jsonrpc-check.ts,
 * shared with the stdio servers' side), the batch and nesting bounds.
 */

/** Deeper JSON than this is refused before the server sees it (no handler recurses without end on it). */
export const MAX_JSON_DEPTH = 64;
/** The SDK's own batch bound. */
export const MAX_BATCH_SIZE = 100;

/** The message if it is a valid JSON-RPC message, else undefined (see hub/jsonrpc-check.ts). */
export const checkMessage = (m: unknown): JSONRPCMessage | undefined => checkAnyMessage(m) as JSONRPCMessage | undefined;

export const isRequest = (m: JSONRPCMessage): m is JSONRPCRequest => 'method' in m && 'id' in m;
export const isResponse = (m: JSONRPCMessage): m is JSONRPCMessage & { id: string | number } => 'result' in m || 'error' in m;

/**
 * Whether `v` nests deeper than `max` objects/arrays. Recursive but bounded: it descends at most `max + 1` levels
 * (a hostile depth cannot overflow the stack), and allocates nothing (the iterative version's stack of tuples and
 * `Object.values` arrays were 2 % of /mcp's CPU per call, issue 21).
 */
export function deeperThan(v: unknown, max: number): boolean {
  return over(v, 1, max);
}

function over(x: unknown, depth: number, max: number): boolean {
  if (typeof x !== 'object' || x === null) return false;
  if (depth > max) return true;
  if (Array.isArray(x)) {
    for (const c of x as unknown[]) if (typeof c === 'object' && c !== null && over(c, depth + 1, max)) return true;
    return false;
  }
  for (const k in x) {
    if (!Object.hasOwn(x, k)) continue;
    const c = (x as Record<string, unknown>)[k];
    if (typeof c === 'object' && c !== null && over(c, depth + 1, max)) return true;
  }
  return false;
}
