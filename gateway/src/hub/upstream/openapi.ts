import type { CallToolResult } from '@modelcontextprotocol/client';
import { GatewayError } from '../../errors.js';
import { fillHeaders } from '../credentials.js';
import { callOpenApi, toolsFromOpenApi, type OpenApiTool } from '../openapi.js';
import { Upstream, type CallContext } from './base.js';

/** An OpenAPI document: one tool per operation, each call an HTTP request through the SSRF guard. */
export class OpenApiUpstream extends Upstream {
  private ops = new Map<string, OpenApiTool>();

  start(): Promise<void> {
    try {
      const tools = toolsFromOpenApi(this.config.openapiSpec!);
      this.ops = new Map(tools.map((t) => [t.tool.name, t]));
      this.allTools = tools.map((t) => t.tool);
      this.setState('ready');
      this.d.onToolsChanged();
    } catch (e) {
      this.setState('failed', (e as Error).message);
      return Promise.reject(e);
    }
    return Promise.resolve();
  }
  async call(tool: string, args: Record<string, unknown>, ctx: CallContext): Promise<CallToolResult> {
    const op = this.ops.get(tool);
    if (!op) throw new GatewayError('TOOL_NOT_FOUND', `server "${this.config.name}" has no tool "${tool}"`);
    const headers = fillHeaders(this.config.headersTemplate, ctx.tokens, this.config.name);
    return callOpenApi(op, args, {
      baseUrl: this.config.openapiBaseUrl!,
      headers,
      timeoutMs: this.timeout(ctx),
      maxResponseBytes: this.d.settings.maxResultBytes,
      allowPrivateNetwork: this.config.allowPrivateNetwork ?? this.d.settings.allowPrivateNetwork,
      ...(ctx.signal ? { signal: ctx.signal } : {}),
    });
  }
  close(): Promise<void> {
    this.setState('stopped');
    return Promise.resolve();
  }
}
