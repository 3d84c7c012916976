import { CallToolResultSchema, describeIssues, normalizeDeviceContent, type CallToolResult, type McpContent } from '@voxgate/protocol';
import { GatewayError } from '../errors.js';
import type { Metrics } from '../metrics.js';
import { invalidArguments, type SchemaValidators } from '../schemas/validators.js';
import type { BadInputLog } from './bad-input-log.js';
import type { ToolCatalog } from './catalog.js';
import type { CallOutcome } from './device-handle.js';
import { int32Problems } from './int32.js';

export interface ToolCallDeps {
  deviceId: string;
  metrics: Metrics;
  validators: SchemaValidators;
  badInput: BadInputLog;
}

/** A call checked against the catalog and the tool's input schema before it is queued. */
export function checkToolCall(d: ToolCallDeps, catalog: ToolCatalog, name: string, args: Record<string, unknown>): void {
  const tool = catalog.get(name);
  if (!tool) {
    d.metrics.calls.inc({ outcome: 'tool_not_found' });
    throw new GatewayError('TOOL_NOT_FOUND', `device ${d.deviceId} has no tool named "${name}"`, { tool: name });
  }
  const problems = d.validators.check(tool.inputSchema, args) ?? int32Problems(tool.inputSchema, args);
  if (problems) {
    d.metrics.calls.inc({ outcome: 'invalid_arguments' });
    throw invalidArguments(name, problems);
  }
}

/** A call that failed before its result: counted by why (a device error's duration, `started` to `ended`, is observed too). */
export function countFailedCall(metrics: Metrics, e: unknown, started: number, ended = performance.now()): void {
  const code = e instanceof GatewayError ? e.code : 'INTERNAL';
  const outcome = code === 'DEVICE_TIMEOUT' ? 'timeout' : code === 'DEVICE_OFFLINE' ? 'offline' : code === 'DEVICE_ERROR' ? 'device_error' : 'failed';
  metrics.calls.inc({ outcome });
  if (outcome === 'device_error') metrics.hot.callDuration.observe((ended - started) / 1000);
}

/** The device's tools/call result, validated, its content normalised, counted; its duration runs from `started` to `answered`. */
export function readCallResult(d: ToolCallDeps, name: string, result: unknown, started: number, answered = performance.now()): CallOutcome {
  const plain = plainTextResult(result);
  if (plain) return counted(d, plain, plain.isError ? 'tool_error' : 'ok', answered - started);
  const parsed = CallToolResultSchema.safeParse(result);
  if (!parsed.success) {
    d.metrics.calls.inc({ outcome: 'malformed' });
    throw new GatewayError('DEVICE_ERROR', `device returned a malformed tools/call result: ${describeIssues(parsed.error.issues)}`);
  }
  const content = normalizeDeviceContent(parsed.data.content);
  if (content.firmwareImages > 0) d.metrics.deviceContent.inc({ kind: 'firmware_image' }, content.firmwareImages);
  if (content.malformed > 0) {
    d.metrics.deviceContent.inc({ kind: 'malformed' }, content.malformed);
    const what = 'tools/call result had content items that are not valid MCP content; passed on as text';
    d.badInput.note('warn', { tool: name, items: content.malformed }, what);
  }
  const outcome = parsed.data.isError ? 'tool_error' : content.malformed > 0 ? 'ok_malformed_content' : 'ok';
  return counted(d, { ...parsed.data, content: content.content }, outcome, answered - started);
}

function counted(d: ToolCallDeps, result: CallToolResult, outcome: string, elapsedMs: number): CallOutcome {
  const durationMs = Math.round(elapsedMs * 100) / 100;
  if (outcome === 'ok') d.metrics.hot.callsOk.inc();
  else d.metrics.calls.inc({ outcome });
  d.metrics.hot.callDuration.observe(durationMs / 1000);
  // `result` is this call's own object (plainTextResult's, or the schema path's copy): no second copy for durationMs.
  const out = result as CallOutcome;
  out.durationMs = durationMs;
  return out;
}

/**
 * The usual reply, `{"content":[{"type":"text","text":…}…]}` with an optional boolean `isError` and nothing else,
 * read with a few type checks: the same value CallToolResultSchema and normalizeDeviceContent make of it (text
 * items pass both unchanged). Any other shape returns undefined and takes the schema path. zod's two parses were
 * ~4 % of the gateway's CPU per call (profile in docs/performance.md). The reply's own objects are returned when
 * their keys are already in the schema's order (the firmware's are): they are this call's, parsed from its frame,
 * so no copy of the result, its list and its items is made per call; in any other order they are copied as before.
 */
export function plainTextResult(result: unknown): { content: McpContent[]; isError?: boolean } | undefined {
  if (!isPlainObject(result)) return undefined;
  let keys = 0;
  let ordered = true;
  for (const k in result) {
    if (k !== 'content' && k !== 'isError') return undefined;
    ordered &&= k === (keys === 0 ? 'content' : 'isError');
    keys++;
  }
  const items = result['content'];
  const isError = result['isError'];
  if (!Array.isArray(items) || items.length > MAX_CONTENT_ITEMS) return undefined;
  if (isError !== undefined && typeof isError !== 'boolean') return undefined;
  for (const item of items as unknown[]) {
    if (!isPlainObject(item)) return undefined;
    let n = 0;
    for (const k in item) {
      if (k !== (n === 0 ? 'type' : 'text')) {
        if (k !== 'type' && k !== 'text') return undefined;
        ordered = false;
      }
      n++;
    }
    if (item['type'] !== 'text' || typeof item['text'] !== 'string') return undefined;
  }
  if (ordered) return result as { content: McpContent[]; isError?: boolean };
  const content: McpContent[] = (items as Array<{ text: string }>).map(({ text }) => ({ type: 'text', text }));
  return 'isError' in result ? { content, isError: isError as boolean } : { content };
}

/** CallToolResultSchema's bound on content items. */
const MAX_CONTENT_ITEMS = 256;

function isPlainObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}
