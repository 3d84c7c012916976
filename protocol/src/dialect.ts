import { checkJsonBounds, isJsonObject, safeJsonText, tryParseJson } from './json.js';
import { RpcErrorCode, type RpcErrorResponse } from './jsonrpc.js';
import { McpContentSchema, type McpContent } from './mcp.js';

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
    typeof error.code === 'number' ? { code: error.code, message, inferredCode: false } : { code: inferCode(message), message, inferredCode: true };
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

export interface NormalizedContent {
  content: McpContent[];
  /** Items in the reference firmware's image shape, rewritten to MCP's. */
  firmwareImages: number;
  /** Items that were no valid MCP content: each replaced by a text item holding its JSON. */
  malformed: number;
}

const MAX_MALFORMED_TEXT = 4096;

/**
 * Device content items, made valid MCP content at the boundary (a standard MCP client refuses the whole
 * result for one bad item). The reference firmware's `ImageContent` arrives as
 * `{"type":"image","image":"<JSON text of {type,mimeType,data}>"}` and becomes `{type,mimeType,data}`;
 * a non-string `text` becomes its JSON; anything else invalid becomes a text item carrying its JSON.
 */
export function normalizeDeviceContent(items: readonly unknown[]): NormalizedContent {
  const out: NormalizedContent = { content: [], firmwareImages: 0, malformed: 0 };
  for (const item of items) {
    const valid = McpContentSchema.safeParse(item);
    if (valid.success) {
      out.content.push(valid.data);
      continue;
    }
    const image = firmwareImage(item);
    if (image) {
      out.content.push(image);
      out.firmwareImages++;
      continue;
    }
    out.malformed++;
    if (isJsonObject(item) && item['type'] === 'text' && item['text'] !== undefined) {
      out.content.push({ type: 'text', text: safeJsonText(item['text']).slice(0, MAX_MALFORMED_TEXT) });
    } else {
      out.content.push({ type: 'text', text: safeJsonText(item).slice(0, MAX_MALFORMED_TEXT) });
    }
  }
  return out;
}

function firmwareImage(item: unknown): McpContent | undefined {
  if (!isJsonObject(item) || item['type'] !== 'image' || typeof item['image'] !== 'string') return undefined;
  // The inner text came inside a size-bounded frame, but as a string: its nesting is bounded before parsing.
  const inner = item['image'];
  if (!checkJsonBounds(inner, { maxDepth: 4, maxBytes: Number.MAX_SAFE_INTEGER }).ok) return undefined;
  const parsed = tryParseJson(inner);
  if (!parsed.ok || !isJsonObject(parsed.value)) return undefined;
  const v = parsed.value;
  const image = McpContentSchema.safeParse({ type: 'image', data: v['data'], mimeType: v['mimeType'] });
  return image.success ? image.data : undefined;
}
