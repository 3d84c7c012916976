import { CallToolResultSchema, describeIssues, normalizeDeviceContent } from '@voxgate/protocol';
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

/** A call that failed before its result: counted by why (a device error's duration is observed too). */
export function countFailedCall(metrics: Metrics, e: unknown, started: number): void {
  const code = e instanceof GatewayError ? e.code : 'INTERNAL';
  const outcome = code === 'DEVICE_TIMEOUT' ? 'timeout' : code === 'DEVICE_OFFLINE' ? 'offline' : code === 'DEVICE_ERROR' ? 'device_error' : 'failed';
  metrics.calls.inc({ outcome });
  if (outcome === 'device_error') metrics.callDuration.observe((performance.now() - started) / 1000);
}

/** The device's tools/call result, validated, its content normalised, counted. */
export function readCallResult(d: ToolCallDeps, name: string, result: unknown, started: number): CallOutcome {
  const parsed = CallToolResultSchema.safeParse(result);
  if (!parsed.success) {
    d.metrics.calls.inc({ outcome: 'malformed' });
    throw new GatewayError('DEVICE_ERROR', `device returned a malformed tools/call result: ${describeIssues(parsed.error.issues)}`);
  }
  const durationMs = Math.round((performance.now() - started) * 100) / 100;
  const content = normalizeDeviceContent(parsed.data.content);
  if (content.firmwareImages > 0) d.metrics.deviceContent.inc({ kind: 'firmware_image' }, content.firmwareImages);
  if (content.malformed > 0) {
    d.metrics.deviceContent.inc({ kind: 'malformed' }, content.malformed);
    const what = 'tools/call result had content items that are not valid MCP content; passed on as text';
    d.badInput.note('warn', { tool: name, items: content.malformed }, what);
  }
  d.metrics.calls.inc({ outcome: parsed.data.isError ? 'tool_error' : content.malformed > 0 ? 'ok_malformed_content' : 'ok' });
  d.metrics.callDuration.observe(durationMs / 1000);
  return { ...parsed.data, content: content.content, durationMs };
}
