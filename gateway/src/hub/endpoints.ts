import { createHash, randomBytes, randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import { z } from 'zod';
import { Tenant } from '../config/fields.js';
import type { Metrics } from '../metrics.js';
import { GatewayError } from '../errors.js';
import { canSee } from '../principal.js';
import type { Store } from '../store/store.js';
import { SERVER_NAME, SERVER_NAME_RULE, type ServerConfig } from './config.js';
import type { McpHub } from './hub.js';
import { serverKey, shownServerName } from './names.js';
import { visibleTo } from './namespace.js';
import type { Caller } from './types.js';
import type { EndpointUpstream } from './upstream/endpoint.js';
import type { Upstream } from './upstream/base.js';
import { loadMcpUpstreams } from './upstream/create.js';
import type { WebSocketTransport } from './upstream/ws-transport.js';

const COLLECTION = 'mcp_endpoints';

/** An endpoint as stored: never the token, only its sha256. */
const EndpointRecord = z.object({
  id: z.string(),
  name: z.string().regex(SERVER_NAME),
  tenant: Tenant.optional(),
  allowedTools: z.array(z.string()).optional(),
  tokenSha256: z.string().regex(/^[0-9a-f]{64}$/),
  createdAt: z.string(),
});
export type EndpointRecord = z.infer<typeof EndpointRecord>;

export const CreateEndpointBody = z
  .object({
    name: z.string().regex(SERVER_NAME, `name: ${SERVER_NAME_RULE}`),
    tenant: Tenant.optional(),
    allowed_tools: z.array(z.string().min(1).max(256)).max(4096).optional(),
  })
  .strict();

export interface EndpointView {
  id: string;
  name: string;
  tenant: string | null;
  allowedTools: string[] | null;
  createdAt: string;
  /** `connected`: a tool process is being served; `waiting`: none (lastError says what happened to the last one). */
  state: 'connected' | 'waiting';
  lastError: string | null;
  toolCount: number;
  tools: string[];
}

export interface EndpointsOptions {
  pingIntervalMs: number;
  maxEndpoints: number;
  maxEndpointsPerTenant: number;
  /** Where a creation refused by a cap is counted (voxgate_mcp_inbound_endpoint_refused_total). */
  metrics?: Pick<Metrics, 'inboundEndpointRefused'>;
}

export function tokenHash(token: string): string {
  return createHash('sha256').update(token).digest('hex');
}

/**
 * The MCP endpoints (xiaozhi's "MCP接入点"): tokens issued and revoked through the API, each bound to a
 * server name, a tenant and an optional `allowed_tools`. A tool process that dials in with a token becomes
 * that endpoint's connection (upstream/endpoint.ts); the endpoint is a server in the hub from its creation
 * (state `failed`, "waiting", until a tool process connects) to its deletion.
 */
export class McpEndpoints {
  private readonly byHash = new Map<string, EndpointRecord>();
  private readonly byId = new Map<string, EndpointRecord>();
  /** The tenants of endpoints being created (stored, not yet added). */
  private readonly creating: Array<string | undefined> = [];

  private constructor(
    private readonly hub: McpHub,
    private readonly store: Store,
    private readonly log: Logger,
    private readonly o: EndpointsOptions,
  ) {}

  static async open(hub: McpHub, store: Store, log: Logger, o: EndpointsOptions): Promise<McpEndpoints> {
    const e = new McpEndpoints(hub, store, log, o);
    const stored = await store.list(COLLECTION);
    // An endpoint's server speaks MCP through the SDK's client: loaded when there is one (hub/upstream/create.ts).
    if (stored.length > 0) await loadMcpUpstreams();
    for (const { key, value } of stored) {
      const r = EndpointRecord.safeParse(value);
      if (!r.success) {
        log.warn({ key }, 'stored MCP endpoint unreadable; skipped');
        continue;
      }
      try {
        e.add(r.data);
      } catch (err) {
        log.warn({ name: r.data.name, err: (err as Error).message }, 'stored MCP endpoint not restored');
      }
    }
    return e;
  }

  private add(r: EndpointRecord): void {
    this.checkName(r.name, r.tenant);
    const cfg: ServerConfig = {
      // A tenant's endpoint is keyed `<tenant>/<name>` in the hub: its name is its tenant's own (names.ts serverKey).
      name: keyOf(r),
      type: 'endpoint',
      args: [],
      env: {},
      headersTemplate: {},
      builtinTools: [],
      autoContextTools: [],
      disabled: false,
      ...(r.tenant ? { tenants: [r.tenant] } : {}),
      ...(r.allowedTools ? { allowedTools: r.allowedTools } : {}),
    };
    const u = this.hub.addServer(cfg);
    if (isEndpoint(u)) u.pingIntervalMs = this.o.pingIntervalMs;
    void u.start();
    this.byHash.set(r.tokenSha256, r);
    this.byId.set(r.id, r);
  }

  /** Issue a token. A caller with a tenant makes endpoints for its own tenant only. The token is returned once. */
  async create(body: z.infer<typeof CreateEndpointBody>, caller: Caller): Promise<{ record: EndpointRecord; token: string }> {
    if (caller.tenant !== undefined && body.tenant !== undefined && body.tenant !== caller.tenant)
      throw new GatewayError('INVALID_REQUEST', `an API key of tenant "${caller.tenant}" makes endpoints for that tenant only`);
    const tenant = caller.tenant ?? body.tenant;
    this.checkRoom(tenant);
    this.checkName(body.name, tenant);
    const token = randomBytes(32).toString('base64url');
    const record: EndpointRecord = {
      id: randomUUID(),
      name: body.name,
      ...(tenant ? { tenant } : {}),
      ...(body.allowed_tools ? { allowedTools: body.allowed_tools } : {}),
      tokenSha256: tokenHash(token),
      createdAt: new Date().toISOString(),
    };
    // Reserved until added, so a burst of creations cannot pass the caps together.
    this.creating.push(tenant);
    try {
      await loadMcpUpstreams();
      await this.store.put(COLLECTION, record.id, record);
    } finally {
      this.creating.splice(this.creating.indexOf(tenant), 1);
    }
    this.add(record);
    this.log.info({ id: record.id, name: record.name, tenant }, 'MCP endpoint created');
    return { record, token };
  }

  /**
   * Each endpoint is a server in the hub and a stored record, made by any API key (a tenant's included): without a
   * bound, one key filled memory and the store (1 000 endpoints: ~150 MB, and listing them took seconds).
   */
  private checkRoom(tenant: string | undefined): void {
    const { maxEndpoints, maxEndpointsPerTenant } = this.o;
    let mine = this.creating.filter((t) => t === tenant).length;
    for (const r of this.byId.values()) if (r.tenant === tenant) mine++;
    const total = this.byId.size + this.creating.length;
    const full =
      total >= maxEndpoints
        ? `the gateway holds its maximum of ${maxEndpoints} MCP endpoints (mcp.endpoints.maxEndpoints)`
        : mine >= maxEndpointsPerTenant
          ? `${tenant === undefined ? 'operator keys (no tenant) hold their' : `tenant "${tenant}" holds its`} maximum of ${maxEndpointsPerTenant} MCP endpoints (mcp.endpoints.maxEndpointsPerTenant)`
          : undefined;
    if (full === undefined) return;
    this.o.metrics?.inboundEndpointRefused.inc({ reason: total >= maxEndpoints ? 'total_endpoints' : 'tenant_endpoints' });
    this.log.warn({ tenant, endpoints: this.byId.size }, 'MCP endpoint not created: a cap on endpoints is reached');
    throw new GatewayError('TOO_MANY_ENDPOINTS', `${full}; revoke one first (DELETE /v1/mcp/endpoints/{id})`);
  }

  /**
   * A name is taken when a server the new one's callers would see beside it has that name: for a tenant's endpoint,
   * that tenant's servers and the servers open to all (every one of them visible to the tenant: the refusal tells it
   * nothing new, and another tenant's "weather" neither blocks nor is revealed); for an endpoint without a tenant
   * (open to all), any server (operators see every endpoint anyway).
   */
  private checkName(name: string, tenant: string | undefined): void {
    const taken = [...this.hub.upstreams.values()].some((u) => shownServerName(u.config.name) === name && (tenant === undefined || visibleTo(u, { tenant })));
    if (taken || this.hub.upstreams.has(serverKey(tenant, name)))
      throw new GatewayError('INVALID_REQUEST', `a server named "${name}" exists; choose another name`);
  }

  list(caller: Caller): EndpointView[] {
    return [...this.byId.values()].filter((r) => this.sees(r, caller)).map((r) => this.view(r));
  }

  get(id: string, caller: Caller): EndpointView {
    const r = this.byId.get(id);
    if (!r || !this.sees(r, caller)) throw new GatewayError('NOT_FOUND', `no MCP endpoint ${id.slice(0, 64)}`);
    return this.view(r);
  }

  /** Revoke: the token stops working, and a live connection is cut (close code 4001). */
  async remove(id: string, caller: Caller): Promise<void> {
    const r = this.byId.get(id);
    if (!r || !this.sees(r, caller)) throw new GatewayError('NOT_FOUND', `no MCP endpoint ${id.slice(0, 64)}`);
    this.byId.delete(id);
    this.byHash.delete(r.tokenSha256);
    await this.store.delete(COLLECTION, id);
    const u = this.hub.upstreams.get(keyOf(r));
    if (isEndpoint(u)) await u.revoke();
    await this.hub.removeServer(keyOf(r));
    this.log.info({ id, name: r.name }, 'MCP endpoint revoked');
  }

  /** The endpoint a token opens, if any. */
  byToken(token: string): EndpointRecord | undefined {
    return this.byHash.get(tokenHash(token));
  }

  /** A tool process dialed in with this endpoint's token: it becomes the endpoint's connection. */
  accept(r: EndpointRecord, t: WebSocketTransport): Promise<void> {
    const u = this.hub.upstreams.get(keyOf(r));
    if (!isEndpoint(u)) {
      t.closeWith(4001, 'endpoint removed');
      return Promise.resolve();
    }
    return u.attach(t);
  }

  private sees(r: EndpointRecord, caller: Caller): boolean {
    return canSee(caller, r.tenant);
  }

  private view(r: EndpointRecord): EndpointView {
    const u = this.hub.upstreams.get(keyOf(r));
    const connected = isEndpoint(u) && u.connections > 0;
    const status = u?.status();
    return {
      id: r.id,
      name: r.name,
      tenant: r.tenant ?? null,
      allowedTools: r.allowedTools ?? null,
      createdAt: r.createdAt,
      state: connected ? 'connected' : 'waiting',
      lastError: connected ? null : (status?.lastError ?? null),
      toolCount: status?.toolCount ?? 0,
      tools: status?.tools ?? [],
    };
  }
}

/** The transport an accepted endpoint socket becomes (links/mcp-endpoint.ts hands it over through this module). */
export { WebSocketTransport, WS_CLOSE, type WsTransportOptions } from './upstream/ws-transport.js';
export type { UnreadTotal } from './unread-total.js';

/** The endpoint's server's key in the hub. */
const keyOf = (r: EndpointRecord): string => serverKey(r.tenant, r.name);

/** An endpoint's server (hub/upstream/create.ts makes an EndpointUpstream for every server of type endpoint). */
function isEndpoint(u: Upstream | undefined): u is EndpointUpstream {
  return u?.config.type === 'endpoint';
}
