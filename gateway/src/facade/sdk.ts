import type * as NodeSdk from '@modelcontextprotocol/node';
import type { McpServer } from '@modelcontextprotocol/server';

/**
 * The MCP SDK's server side (`@modelcontextprotocol/server`) and the facade server built on it, loaded on first
 * use: the first `/mcp` request, or the first fleet publish. A gateway nobody reaches over MCP does without
 * (several MiB of code and schemas at idle; issue 21).
 */
export async function importFacadeSdk() {
  const [server, facade, transport, fast] = await Promise.all([
    import('@modelcontextprotocol/server'),
    import('./mcp-server.js'),
    import('./node-transport.js'),
    import('./fast-call.js'),
  ]);
  return {
    NodeSessionTransport: transport.NodeSessionTransport,
    /** Voxgate's own tools/call dispatcher for a session's facade server (fast-call.ts), if this SDK fits it. */
    fastEntryOf: (mcp: McpServer) => {
      const call = facade.toolsCallOf(mcp);
      return call && fast.fastToolsCall(mcp, call);
    },
    createMcpHandler: server.createMcpHandler,
    isInitializeRequest: server.isInitializeRequest,
    buildFacadeServer: facade.buildFacadeServer,
  };
}

export type FacadeSdk = Awaited<ReturnType<typeof importFacadeSdk>>;

let pending: Promise<FacadeSdk> | undefined;

/** Loads once; a failed load is retried on the next call, with its cause in the error. */
export function loadFacadeSdk(): Promise<FacadeSdk> {
  return (pending ??= importFacadeSdk().catch((e: unknown) => {
    pending = undefined;
    throw new Error(`the MCP SDK's server side could not be loaded: ${e instanceof Error ? e.message : String(e)}`);
  }));
}

/**
 * The SDK's Node adapter (`@modelcontextprotocol/node`, with `@hono/node-server`: ~1.8 MiB of heap, ~4 MiB
 * resident), which only the stateless path uses: loaded by the first stateless request, not by sessions.
 */
export type NodeAdapter = Pick<typeof NodeSdk, 'toNodeHandler'>;
let adapter: Promise<NodeAdapter> | undefined;

/** Loads once; a failed load is retried on the next call, with its cause in the error. */
export function loadNodeAdapter(): Promise<NodeAdapter> {
  return (adapter ??= import('@modelcontextprotocol/node').catch((e: unknown) => {
    adapter = undefined;
    throw new Error(`the MCP SDK's Node adapter could not be loaded: ${e instanceof Error ? e.message : String(e)}`);
  }));
}
