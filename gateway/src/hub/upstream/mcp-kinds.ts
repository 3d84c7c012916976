import * as sdk from '@modelcontextprotocol/client';
import { provideClientSdk } from '../client-sdk.js';

/** The upstreams that speak MCP through the SDK's client, loaded together with it (hub/upstream/create.ts). */
provideClientSdk(sdk);

export { McpUpstream } from './mcp.js';
export { EndpointUpstream } from './endpoint.js';
