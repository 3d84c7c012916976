import type { CallToolResult } from '@modelcontextprotocol/client';
import { GatewayError } from '../errors.js';

/**
 * A failure as the tool result a caller (often a model) reads: `isError`, one sentence, and the stable
 * code in `_meta['voxgate/code']`. The one translation for the hub, /mcp and the HTTP tool routes.
 */
export function toToolResult(e: unknown): CallToolResult {
  if (!(e instanceof GatewayError)) return { content: [{ type: 'text', text: `the call failed: ${(e as Error)?.message ?? String(e)}` }], isError: true };
  const text =
    e.code === 'DEVICE_OFFLINE'
      ? `${e.message}. It may be asleep or out of range; try again when it is back online.`
      : e.code === 'DEVICE_TIMEOUT'
        ? `${e.message}. The device did not answer in time.`
        : e.message;
  return { content: [{ type: 'text', text }], isError: true, _meta: { 'voxgate/code': e.code } };
}
