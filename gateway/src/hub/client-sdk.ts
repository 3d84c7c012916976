import type * as Sdk from '@modelcontextprotocol/client';

/**
 * The MCP SDK's client side, loaded on first use: when an upstream MCP server is made (hub/upstream/mcp-kinds.ts
 * imports it, and says so here), or by the first MCP WebSocket a publish opens. A gateway with no MCP server,
 * endpoint or publish target configured does without it (~5 MiB of heap and ~6 MiB resident; issue 21).
 */
let sdk: typeof Sdk | undefined;
let pending: Promise<typeof Sdk> | undefined;

/** Loads once; a failed load is tried again by the next caller, with its cause in the error. */
export function loadClientSdk(): Promise<typeof Sdk> {
  if (sdk) return Promise.resolve(sdk);
  return (pending ??= import('@modelcontextprotocol/client').then(
    (m) => (sdk = m),
    (e: unknown) => {
      pending = undefined;
      throw new Error(`the MCP SDK's client side could not be loaded: ${e instanceof Error ? e.message : String(e)}`);
    },
  ));
}

/** A module that imported the SDK itself hands it over (no wait for the code that runs after it). */
export function provideClientSdk(m: typeof Sdk): void {
  sdk ??= m;
}

export function clientSdkLoaded(): boolean {
  return sdk !== undefined;
}

/** The SDK, for code that runs only once a connection started (after `loadClientSdk()` or `provideClientSdk`). */
export function clientSdk(): typeof Sdk {
  if (!sdk) throw new Error("the MCP SDK's client side is not loaded yet");
  return sdk;
}
