import type { CallToolResult } from '@modelcontextprotocol/client';

/**
 * How much of mcp.maxResultBytes a tool result uses. A tool with an outputSchema sends its result twice:
 * as `structuredContent` and, for older clients, as text in `content` (the filesystem server repeats a
 * whole file). Both travel together, but they are one result in two shapes: the larger shape is what is
 * counted, so a 900 KB file passes a 1 MiB cap. Anything else in the result (`_meta`) is counted too.
 */
export function resultSize(r: CallToolResult): { bytes: number; part: 'content' | 'structuredContent' } {
  const content = jsonBytes(r.content ?? []);
  const structured = r.structuredContent === undefined ? 0 : jsonBytes(r.structuredContent);
  const meta = r._meta === undefined ? 0 : jsonBytes(r._meta);
  return structured > content ? { bytes: structured + meta, part: 'structuredContent' } : { bytes: content + meta, part: 'content' };
}

/**
 * The bound on one message read from a stdio server: a result at the cap in both shapes, plus room for
 * the JSON-RPC envelope. Messages over it are skipped unread (memory); the rest are measured as above.
 */
export function messageBound(maxResultBytes: number): number {
  return 2 * maxResultBytes + 64 * 1024;
}

/** The reason a result is refused, naming the part that was large; undefined when it fits. */
export function overCap(r: CallToolResult, maxResultBytes: number): string | undefined {
  const { bytes, part } = resultSize(r);
  if (bytes <= maxResultBytes) return undefined;
  return `its ${part} was ${bytes} bytes, over the limit of ${maxResultBytes} bytes (mcp.maxResultBytes)`;
}

function jsonBytes(v: unknown): number {
  return Buffer.byteLength(JSON.stringify(v) ?? '', 'utf8');
}
