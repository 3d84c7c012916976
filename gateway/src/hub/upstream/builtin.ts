import type { CallToolResult } from '@modelcontextprotocol/client';
import { GatewayError } from '../../errors.js';
import { builtinTool } from '../builtin.js';
import { isOperator } from '../../principal.js';
import type { Caller } from '../types.js';
import { Upstream, type CallContext } from './base.js';

/** Tools implemented in the gateway (current time, calculator). */
export class BuiltinUpstream extends Upstream {
  private readonly impls = new Map(this.config.builtinTools.map((t) => [t.name as string, builtinTool(t.name, t.description)]));

  start(): Promise<void> {
    this.allTools = [...this.impls.values()].map((b) => b.tool);
    this.setState('ready');
    this.d.onToolsChanged();
    return Promise.resolve();
  }
  /** The hub passes the caller with the call (`CallContext & Caller`): fleet_start_job is for operators only. */
  call(tool: string, args: Record<string, unknown>, ctx: CallContext & Caller): Promise<CallToolResult> {
    const b = this.impls.get(tool);
    if (!b) return Promise.reject(new GatewayError('TOOL_NOT_FOUND', `server "${this.config.name}" has no tool "${tool}"`));
    return Promise.resolve(b.run(args, { fleetJobs: this.d.fleetJobs?.(), operator: isOperator(ctx), principal: ctx.principal }));
  }
  close(): Promise<void> {
    this.setState('stopped');
    return Promise.resolve();
  }
}
