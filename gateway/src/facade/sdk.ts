/**
 * The MCP SDK's server side (`@modelcontextprotocol/server` and its Node adapter) and the facade server built
 * on it, loaded on first use: the first `/mcp` request, or the first fleet publish. A gateway nobody reaches
 * over MCP does without (several MiB of code and schemas at idle; issue 21).
 */
export async function importFacadeSdk() {
  const [node, server, facade, transport] = await Promise.all([
    import('@modelcontextprotocol/node'),
    import('@modelcontextprotocol/server'),
    import('./mcp-server.js'),
    import('./node-transport.js'),
  ]);
  return {
    NodeSessionTransport: transport.NodeSessionTransport,
    toNodeHandler: node.toNodeHandler,
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
