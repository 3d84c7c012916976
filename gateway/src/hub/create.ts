import type { SchemasConfig } from '../schemas/config.js';
import { GATEWAY_NAME, GATEWAY_VERSION } from '../version.js';
import { hubEnabled, type McpConfig } from './config.js';
import { McpHub, type HubDeps } from './hub.js';
import type { HubSettings } from './upstream/base.js';
import { loadMcpUpstreams, needsMcpClient } from './upstream/create.js';
import { unreadBound } from './upstream/transports.js';
import { unreadBudget, UnreadTotal } from './unread-total.js';

export interface HubCreateDeps extends Pick<HubDeps, 'log' | 'metrics' | 'registry' | 'bus' | 'deviceTenancy'> {
  validators: HubSettings['validators'];
}

/**
 * Loads the MCP client (the SDK's client side and the upstreams built on it) when this configuration has a server
 * that speaks MCP: a gateway with builtin or OpenAPI servers only holds it from its first endpoint (hub/endpoints.ts).
 */
export async function loadHubCode(mcp: McpConfig): Promise<void> {
  if (Object.values(mcp.servers).some((s) => needsMcpClient(s.type))) await loadMcpUpstreams();
}

/** The hub: devices and the hosted servers of `mcp` as one tool namespace (started later, after HTTP is up). */
export function createHub(d: HubCreateDeps, mcp: McpConfig, s: { schemas: SchemasConfig; deviceCallTimeoutMs: number }): McpHub {
  return new McpHub({
    log: d.log,
    metrics: d.metrics,
    registry: d.registry,
    bus: d.bus,
    deviceTenancy: d.deviceTenancy,
    servers: Object.values(mcp.servers),
    enabled: hubEnabled(mcp),
    deviceTools: mcp.deviceTools,
    deviceCallTimeoutMs: s.deviceCallTimeoutMs,
    devicesListMax: mcp.devicesListMax,
    settings: {
      connectTimeoutMs: mcp.connectTimeoutMs,
      callTimeoutMs: mcp.callTimeoutMs,
      killGraceMs: mcp.killGraceMs,
      maxRestarts: mcp.maxRestarts,
      restartBaseDelayMs: mcp.restartBaseDelayMs,
      restartMaxDelayMs: mcp.restartMaxDelayMs,
      restartResetMs: mcp.restartResetMs,
      maxResultBytes: mcp.maxResultBytes,
      maxTools: mcp.maxToolsPerServer,
      maxToolBytes: mcp.maxToolBytesPerServer,
      allowPrivateNetwork: mcp.allowPrivateNetwork,
      logLevel: mcp.upstreamLogLevel,
      logRatePerSecond: mcp.upstreamLogRatePerSecond,
      changeWindowMs: mcp.changeWindowMs,
      clientInfo: { name: GATEWAY_NAME, version: GATEWAY_VERSION },
      schemaLimits: s.schemas,
      validators: d.validators,
      stdioReadBytesPerSecond: mcp.stdioReadBytesPerSecond,
      // One for the gateway: every hosted server, tool process and publish target counts in it.
      unreadTotal: new UnreadTotal(unreadBudget(mcp.unreadBudgetBytes, unreadBound(mcp)), {
        log: d.log.child({ component: 'hub' }),
        metrics: d.metrics,
      }),
    },
  });
}
