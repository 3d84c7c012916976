import {
  ProtocolError,
  ProtocolErrorCode,
  type CallToolResult,
  type Client,
  type jsonSchemaValidator,
  type Tool,
  type Transport,
} from '@modelcontextprotocol/client';
import { ChildStdioTransport } from '../stdio-transport.js';
import { wireCodecOf } from '../tools-call-check.js';
import type { Progress } from './base.js';
import { ToolCallLane, type LaneCall, type LaneCodec, type LaneSend } from './tool-lane.js';
import { WebSocketTransport } from './ws-transport.js';

/**
 * The gateway's own `tools/call` lane on a connected client's connection, when it can carry one: a stdio server or
 * a WebSocket (the transport hands the lane its answers first) that negotiated a 2025-era protocol (the codec the
 * lane knows). Streamable HTTP and SSE keep the SDK's `callTool` (their requests carry per-call headers and
 * session recovery).
 */
export function openLane(client: Client, transport: Transport, onerror: (e: Error) => void): ToolCallLane | undefined {
  const tappable = transport instanceof ChildStdioTransport || transport instanceof WebSocketTransport;
  if (!tappable || client.getProtocolEra() !== 'legacy') return undefined;
  const codec = wireCodecOf(client) as Partial<LaneCodec> | undefined;
  if (codec?.era !== '2025-11-25' || typeof codec.decodeResult !== 'function' || typeof codec.validateNotification !== 'function') return undefined;
  const send: LaneSend = transport instanceof ChildStdioTransport ? (m) => transport.write(m) : (m) => transport.send(m);
  const lane = new ToolCallLane(send, codec as LaneCodec, onerror);
  transport.tap = lane;
  return lane;
}

/**
 * What the SDK's `Client.callTool` does around its request, for the gateway's own lane (tool-lane.ts): a tool's
 * `outputSchema` compiled once (a schema that does not compile fails that tool's calls, before anything is sent),
 * and `structuredContent` checked against it, with the SDK's error codes and messages. The SDK compiles from its
 * cached `tools/list`; this compiles from the upstream's current list (the same schema after the guard's
 * sanitizing, so the same validator of the shared cache: schemas/validators.ts keys them by sanitized content).
 */
type Compiled = { ok: true; validate: (input: unknown) => { valid: boolean; errorMessage?: string | undefined } } | { ok: false; error: unknown };

export class OutputChecks {
  private tools: readonly Tool[] | undefined;
  private readonly byName = new Map<string, Compiled | undefined>();

  constructor(private readonly validators: jsonSchemaValidator) {}

  /** The compiled check of `name` in `tools` (compiled again when the list changed); undefined: no outputSchema. */
  of(tools: readonly Tool[], name: string): Compiled | undefined {
    if (tools !== this.tools) {
      this.tools = tools;
      this.byName.clear();
    }
    if (this.byName.has(name)) return this.byName.get(name);
    const schema = tools.find((t) => t.name === name)?.outputSchema;
    let compiled: Compiled | undefined;
    if (schema)
      try {
        compiled = { ok: true, validate: this.validators.getValidator(schema) };
      } catch (error) {
        compiled = { ok: false, error };
      }
    this.byName.set(name, compiled);
    return compiled;
  }
}

/** One call on the lane, with `callTool`'s outputSchema checks before and after it. */
export async function callOnLane(lane: ToolCallLane, checks: OutputChecks, tools: readonly Tool[], c: LaneCall): Promise<CallToolResult> {
  const compiled = checks.of(tools, c.name);
  assertCompiled(c.name, compiled);
  const result = (await lane.call(c)) as CallToolResult;
  checkStructured(c.name, result, compiled);
  return result;
}

/** Before the request: a tool whose outputSchema does not compile is refused as the SDK refuses it. */
export function assertCompiled(name: string, c: Compiled | undefined): void {
  if (c === undefined || c.ok) return;
  const message = (c.error instanceof Error ? c.error.message : String(c.error)).slice(0, 200);
  throw new ProtocolError(ProtocolErrorCode.InvalidParams, `Tool '${name}' has an invalid outputSchema: ${message}`);
}

/** After the answer: `structuredContent` against the tool's outputSchema (not for an `isError` result). */
export function checkStructured(name: string, result: CallToolResult, c: Compiled | undefined): void {
  if (c === undefined || !c.ok || result.isError) return;
  if (result.structuredContent === undefined)
    throw new ProtocolError(ProtocolErrorCode.InvalidRequest, `Tool ${name} has an output schema but did not return structured content`);
  let verdict: { valid: boolean; errorMessage?: string | undefined };
  try {
    verdict = c.validate(result.structuredContent);
  } catch (error) {
    throw new ProtocolError(
      ProtocolErrorCode.InvalidParams,
      `Failed to validate structured content: ${error instanceof Error ? error.message : String(error)}`,
    );
  }
  if (!verdict.valid)
    throw new ProtocolError(ProtocolErrorCode.InvalidParams, `Structured content does not match the tool's output schema: ${verdict.errorMessage}`);
}

/** Pass on only the fields a progress notification has, bounded (the upstream is untrusted). */
export function progressRelay(to: (p: Progress) => void): (p: { progress: number; total?: number; message?: string }) => void {
  return (p) => {
    if (typeof p.progress !== 'number' || !Number.isFinite(p.progress)) return;
    to({
      progress: p.progress,
      ...(typeof p.total === 'number' && Number.isFinite(p.total) ? { total: p.total } : {}),
      ...(typeof p.message === 'string' ? { message: p.message.slice(0, 1000) } : {}),
    });
  };
}
