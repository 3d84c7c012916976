import type { ServerConfig } from '../config.js';
import type { Upstream, UpstreamDeps } from './base.js';
import { BuiltinUpstream } from './builtin.js';
import { McpUpstream } from './mcp.js';
import { OpenApiUpstream } from './openapi.js';

export function createUpstream(config: ServerConfig, deps: UpstreamDeps): Upstream {
  if (config.type === 'builtin') return new BuiltinUpstream(config, deps);
  if (config.type === 'openapi') return new OpenApiUpstream(config, deps);
  return new McpUpstream(config, deps);
}
