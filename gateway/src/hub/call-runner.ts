import type { CallToolResult } from '@modelcontextprotocol/client';
import type { Logger } from 'pino';
import { GatewayError } from '../errors.js';
import type { Metrics } from '../metrics.js';
import { bindCounter, type BoundCounter } from '../metrics-bound.js';
import { invalidArguments } from '../schemas/validators.js';
import type { DeviceTools } from './device-tools.js';
import { withStop, type CallsInFlight } from './in-flight.js';
import type { ToolTarget } from './names.js';
import type { ToolNamespace } from './namespace.js';
import { toToolResult } from './tool-result.js';
import type { Caller } from './types.js';
import type { CallContext, HubSettings, Upstream } from './upstream/base.js';

/** Failures a caller must fix before a call can run: thrown (HTTP 4xx, JSON-RPC error), never a tool result. */
const CALLER_ERRORS = new Set(['TOOL_NOT_FOUND', 'INVALID_ARGUMENTS', 'MISSING_TOKEN', 'INVALID_REQUEST']);

export interface CallRunnerDeps {
  log: Logger;
  metrics: Metrics;
  settings: HubSettings;
  upstreams: ReadonlyMap<string, Upstream>;
  namespace: Pick<ToolNamespace, 'resolve'>;
  devices: DeviceTools;
  /** The hub's calls in flight: drained at shutdown, and asked whom a server's request may reach (peer-requests.ts). */
  calls: CallsInFlight;
}

/**
 * Running one call of a namespaced tool (`McpHub.call`, `McpHub.callTimed`): resolve it, track it in flight, hand it to
 * its server or device, turn what fails past the caller's own mistakes into an error result, count and log it. Apart
 * from the hub, which keeps the servers, the namespace and the listeners: this is the one path every call takes.
 */
export class CallRunner {
  /** hubCalls by kind and outcome, each bound on first use (a few pairs): no label lookup per call (issue 21). */
  private readonly callCounts = new Map<string, BoundCounter>();

  constructor(private readonly d: CallRunnerDeps) {}

  /** The call's result as the tool's own object, and its duration. */
  async run(name: string, args: Record<string, unknown>, ctx: CallContext & Caller): Promise<{ result: CallToolResult; durationMs: number }> {
    const started = performance.now();
    const target = this.d.namespace.resolve(name, ctx);
    const kind = target.kind;
    let result: CallToolResult;
    try {
      result = await this.d.calls.track(ctx, target.kind === 'server' ? target.server : undefined, (stop) => this.dispatch(target, args, withStop(ctx, stop)));
    } catch (e) {
      if (e instanceof GatewayError && CALLER_ERRORS.has(e.code)) {
        this.countCall(kind, e.code.toLowerCase());
        throw e;
      }
      result = toToolResult(e);
    }
    const durationMs = Math.round((performance.now() - started) * 100) / 100;
    this.countCall(kind, result.isError ? 'tool_error' : 'ok');
    const server = target.kind === 'server' ? target.server : undefined;
    if (server !== undefined && this.d.upstreams.get(server)?.config.type === 'endpoint')
      this.d.metrics.inboundEndpointCalls.inc({ outcome: result.isError ? 'tool_error' : 'ok' });
    const deviceId = target.kind === 'device' ? target.deviceId : undefined;
    this.d.log.info({ tool: name, kind, server, deviceId, isError: Boolean(result.isError), ms: durationMs }, 'tool call');
    return { result, durationMs };
  }

  private countCall(kind: string, outcome: string): void {
    const key = `${kind} ${outcome}`;
    let c = this.callCounts.get(key);
    if (!c) this.callCounts.set(key, (c = bindCounter(this.d.metrics.hubCalls, { kind, outcome })));
    c.inc();
  }

  private async dispatch(t: ToolTarget, args: Record<string, unknown>, ctx: CallContext & Caller): Promise<CallToolResult> {
    if (t.kind === 'server') {
      const u = this.d.upstreams.get(t.server)!;
      if (!u.hasTool(t.tool)) throw new GatewayError('TOOL_NOT_FOUND', `server "${t.server}" no longer offers "${t.tool}"`);
      // Checked here as for device tools (422), with the same linear-time validators: the server is spared
      // arguments its own schema refuses, and the caller learns which argument is wrong.
      const schema = u.inputSchemaOf(t.tool);
      const problems = schema && this.d.settings.validators.check(schema, args);
      if (problems) throw invalidArguments(t.tool, problems);
      return u.call(t.tool, args, ctx);
    }
    if (t.kind === 'device') return this.d.devices.call(t.deviceId, t.tool, args, ctx);
    if (t.tool === 'devices_list') return this.d.devices.list(args, ctx);
    return this.d.devices.callGeneric(args, ctx);
  }
}
