import { EventEmitter } from 'node:events';
import { Writable } from 'node:stream';
import pino from 'pino';
import { InMemoryTransport } from '@modelcontextprotocol/server';
import { Client } from '@modelcontextprotocol/client';
import { buildFacadeServer } from '../../src/facade/mcp-server.js';
import { parseServers } from '../../src/hub/config.js';
import { McpHub, type Caller } from '../../src/hub/hub.js';
import { loadMcpUpstreams } from '../../src/hub/upstream/create.js';
import { unreadBound } from '../../src/hub/upstream/transports.js';
import { unreadBudget, UnreadTotal } from '../../src/hub/unread-total.js';
import type { HubDevices } from '../../src/hub/types.js';
import type { HubSettings } from '../../src/hub/upstream/base.js';
import { createMetrics } from '../../src/metrics.js';
import { SchemaValidators } from '../../src/schemas/validators.js';

/** No devices: the hub's device port, empty. */
const noDevices: HubDevices = {
  ready: () => [],
  onChange: () => () => undefined,
  page: () => ({ devices: [], next: undefined }),
  get: () => undefined,
  find: () => undefined,
  device: (id: string) => {
    throw new Error(`no device ${id}`);
  },
};

export interface BuiltHub {
  hub: McpHub;
  logs: Array<Record<string, unknown>>;
  /** Resolves at the first log line (written so far or later) that matches. */
  untilLog: (pred: (line: Record<string, unknown>) => boolean) => Promise<void>;
  metrics: ReturnType<typeof createMetrics>;
}

// The gateway loads the MCP client only when a server needs it (hub/create.ts); these hubs always may.
await loadMcpUpstreams();

/**
 * A McpHub over these `mcpServers` entries, with no devices and the configuration's defaults (`unreadBudgetBytes`:
 * `mcp.unreadBudgetBytes`, the gateway's unread total of every server; unset, its default).
 */
export function buildHub(servers: Record<string, unknown>, settings: Partial<HubSettings> = {}, o: { unreadBudgetBytes?: number } = {}): BuiltHub {
  const logs: Array<Record<string, unknown>> = [];
  const lines = new EventEmitter();
  const sink = new Writable({
    write(chunk: Buffer, _enc, done) {
      for (const line of chunk.toString().split('\n')) {
        if (!line) continue;
        const parsed = JSON.parse(line) as Record<string, unknown>;
        logs.push(parsed);
        lines.emit('line', parsed);
      }
      done();
    },
  });
  const untilLog = (pred: (line: Record<string, unknown>) => boolean) =>
    new Promise<void>((resolve) => {
      if (logs.some(pred)) return resolve();
      const on = (l: Record<string, unknown>) => {
        if (!pred(l)) return;
        lines.off('line', on);
        resolve();
      };
      lines.on('line', on);
    });
  const log = pino({ level: 'debug' }, sink);
  const metrics = createMetrics();
  const limits = { maxBytes: 64 * 1024, maxDepth: 32 };
  const hub = new McpHub({
    log,
    metrics,
    registry: noDevices,
    bus: { subscribe: () => () => true },
    servers: parseServers(servers),
    enabled: true,
    deviceTools: 'per_device',
    deviceCallTimeoutMs: 5000,
    devicesListMax: 200,
    settings: {
      connectTimeoutMs: 20_000,
      callTimeoutMs: 30_000,
      killGraceMs: 2000,
      maxRestarts: 5,
      restartBaseDelayMs: 1,
      restartMaxDelayMs: 30_000,
      restartResetMs: 60_000,
      maxResultBytes: 1024 * 1024,
      maxTools: 512,
      maxToolBytes: 4 * 1024 * 1024,
      allowPrivateNetwork: true,
      logLevel: 'info',
      logRatePerSecond: 20,
      clientInfo: { name: 'voxgate-test', version: '0.0.0' },
      schemaLimits: limits,
      validators: new SchemaValidators({ limits, maxCached: 64 }),
      unreadTotal: new UnreadTotal(unreadBudget(o.unreadBudgetBytes, unreadBound({ maxResultBytes: settings.maxResultBytes ?? 1024 * 1024 })), {
        log,
        metrics,
      }),
      ...settings,
    },
  });
  return { hub, logs, metrics, untilLog };
}

/** An MCP client talking to the hub's /mcp face in memory, as `caller`. */
export async function facadeClient(hub: McpHub, caller: Caller, capabilities: Record<string, unknown> = {}): Promise<Client> {
  const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
  const server = buildFacadeServer(hub, caller, { log: pino({ level: 'silent' }), version: '0.0.0' });
  await server.connect(serverSide);
  const client = new Client({ name: 'test-client', version: '0.0.0' }, { capabilities });
  await client.connect(clientSide);
  return client;
}
