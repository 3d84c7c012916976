import type { ServerConfig } from '../config.js';
import type { Upstream, UpstreamDeps } from './base.js';
import { BuiltinUpstream } from './builtin.js';
import type * as McpKinds from './mcp-kinds.js';
import { OpenApiUpstream } from './openapi.js';

let mcpKinds: typeof McpKinds | undefined;

/** The server types that need the MCP SDK's client (hub/upstream/mcp-kinds.ts); builtin and openapi do not. */
export const needsMcpClient = (type: ServerConfig['type']): boolean => type !== 'builtin' && type !== 'openapi';

/**
 * Loads the MCP upstreams and the SDK's client side (once; a failure says why and the next call tries again).
 * The gateway calls it before making a hub that has, or may get, such a server; a gateway without one never does.
 */
export async function loadMcpUpstreams(): Promise<void> {
  try {
    mcpKinds ??= await import('./mcp-kinds.js');
  } catch (e) {
    throw new Error(`the MCP client (the SDK's client side) could not be loaded: ${e instanceof Error ? e.message : String(e)}`);
  }
}

export function createUpstream(config: ServerConfig, deps: UpstreamDeps): Upstream {
  if (config.type === 'builtin') return new BuiltinUpstream(config, deps);
  if (config.type === 'openapi') return new OpenApiUpstream(config, deps);
  if (!mcpKinds) throw new Error(`server "${config.name}" (${config.type}) needs the MCP client, which was not loaded (loadMcpUpstreams)`);
  if (config.type === 'endpoint') return new mcpKinds.EndpointUpstream(config, deps);
  return new mcpKinds.McpUpstream(config, deps);
}
