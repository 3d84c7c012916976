import { readFileSync } from 'node:fs';
import { dirname, isAbsolute, resolve } from 'node:path';
import { parse as parseToml } from 'smol-toml';
import { z } from 'zod';
import { Bool, Csv, documented, env, HttpUrl, Int, Ms, Tenant } from '../config/fields.js';

/**
 * The `mcpServers` file: Claude Desktop–compatible (`{"mcpServers": {"name": {"command": ..., "args": [...]}}}`),
 * plus the fields Voxgate adds. An entry with `command` is stdio; with `url` it is Streamable HTTP unless
 * `type` says `sse` (or the url is ws:// or wss://: WebSocket, subprotocol `mcp`). Everything in it is checked here; nothing unchecked reaches a connection.
 */
export const SERVER_TYPES = ['stdio', 'http', 'sse', 'websocket', 'builtin', 'openapi'] as const;
/** `endpoint`: a tool process that dialed in (hub/endpoints.ts); made at run time, never configured. */
export type ServerType = (typeof SERVER_TYPES)[number] | 'endpoint';

/**
 * Server names become part of tool names (`mcp__{server}__{tool}`): short and plain, with no `__` in them and no `_`
 * at their end, so that the first `__` after `mcp__` always ends the server's name. Then two servers can never make
 * the same tool name, and one party's server cannot take a name another party's tools have (or learn it that way):
 * server `w` with tool `x__y` and server `w__x` with tool `y` both made `mcp__w__x__y`.
 */
export const SERVER_NAME = /^(?!.*__)(?!.*_$)[A-Za-z0-9_-]{1,32}$/;
/** SERVER_NAME in words, for the messages that refuse a name. */
export const SERVER_NAME_RULE = "1-32 letters, digits, _ or -, with no '__' and no '_' at the end";
const HeaderName = z.string().regex(/^[A-Za-z0-9!#$%&'*+.^_`|~-]{1,128}$/, 'not an HTTP header name');
const RemoteUrl = z.url({ protocol: /^(https?|wss?)$/ });

/** `fleet_start_job` starts a fleet job (fleet/jobs.ts, through the hub's FleetJobsPort); destructive, so the assistant asks first. */
export const BUILTIN_TOOL_NAMES = ['current_time', 'calculator', 'fleet_start_job'] as const;

const BuiltinToolRef = z.union([
  z.enum(BUILTIN_TOOL_NAMES),
  z.object({ name: z.enum(BUILTIN_TOOL_NAMES), description: z.string().max(4096).optional() }).strict(),
]);

export const ServerEntrySchema = z
  .object({
    type: z.enum([...SERVER_TYPES, 'streamable-http', 'streamableHttp']).optional(),
    /** Claude Desktop spelling; ignored when `type` is set. */
    transport: z.string().optional(),
    command: z.string().min(1).max(4096).optional(),
    args: z.array(z.string().max(4096)).max(256).default([]),
    env: z.record(z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/), z.string().max(32_768)).default({}),
    cwd: z.string().optional(),
    url: RemoteUrl.optional(),
    /** Header values may hold `${name}` placeholders, filled per request from the caller's tokens. */
    headers_template: z.record(HeaderName, z.string().max(8192)).default({}),
    /** Claude Desktop / VS Code spelling of static headers; merged under `headers_template`. */
    headers: z.record(HeaderName, z.string().max(8192)).optional(),
    allowed_tools: z.array(z.string().min(1).max(256)).max(4096).optional(),
    timeout_ms: z.number().int().min(1).max(3_600_000).optional(),
    tools: z.array(BuiltinToolRef).max(64).optional(),
    /** An OpenAPI 3.0/3.1 document (JSON object), or the path of a JSON file (relative to the config file). */
    openapi_spec: z.union([z.record(z.string(), z.unknown()), z.string().min(1).max(4096)]).optional(),
    openapi_base_url: HttpUrl.optional(),
    system_instruction: z.string().max(16_384).optional(),
    response_instruction: z.string().max(16_384).optional(),
    /** Tool names (the server's own names) to call automatically for context; the assistant uses them. */
    auto_context_tool: z.union([z.string().min(1).max(256), z.array(z.string().min(1).max(256)).max(64)]).optional(),
    /** Limit this server to callers whose API key carries one of these tenants. Absent: every caller. */
    tenants: z.array(Tenant).max(1024).optional(),
    /** Outbound HTTP (http, sse, openapi) may reach private, loopback and link-local addresses. */
    allow_private_network: z.boolean().optional(),
    /** A stdio server: bytes a second read from it (a second's worth at once), instead of `mcp.stdioReadBytesPerSecond`. */
    read_bytes_per_second: z.number().int().min(65_536).max(1_073_741_824).optional(),
    disabled: z.boolean().default(false),
  })
  .strict();

export type ServerEntryInput = z.input<typeof ServerEntrySchema>;

export interface ServerConfig {
  name: string;
  type: ServerType;
  command?: string;
  args: string[];
  env: Record<string, string>;
  cwd?: string;
  url?: string;
  headersTemplate: Record<string, string>;
  allowedTools?: string[];
  timeoutMs?: number;
  builtinTools: Array<{ name: (typeof BUILTIN_TOOL_NAMES)[number]; description?: string }>;
  openapiSpec?: Record<string, unknown>;
  openapiBaseUrl?: string;
  systemInstruction?: string;
  responseInstruction?: string;
  autoContextTools: string[];
  tenants?: string[];
  allowPrivateNetwork?: boolean;
  /** stdio: bytes a second read from it (unset: mcp.stdioReadBytesPerSecond). */
  readBytesPerSecond?: number;
  disabled: boolean;
}

export const McpServersFileSchema = z.object({ mcpServers: z.record(z.string(), z.unknown()).default({}) }).loose();

export class McpConfigError extends Error {
  constructor(readonly problems: string[]) {
    super(`invalid MCP server configuration:\n${problems.map((p) => `  - ${p}`).join('\n')}`);
  }
}

/** Check and normalise every entry; all problems are reported at once, each naming its server. */
export function parseServers(raw: Record<string, unknown>, baseDir = process.cwd()): ServerConfig[] {
  const problems: string[] = [];
  const out: ServerConfig[] = [];
  for (const [name, value] of Object.entries(raw)) {
    if (!SERVER_NAME.test(name)) {
      problems.push(`mcpServers.${name}: a server name is ${SERVER_NAME_RULE}`);
      continue;
    }
    const r = ServerEntrySchema.safeParse(value);
    if (!r.success) {
      for (const i of r.error.issues) problems.push(`mcpServers.${name}${i.path.length ? '.' + i.path.join('.') : ''}: ${i.message}`);
      continue;
    }
    try {
      out.push(normalise(name, r.data, baseDir));
    } catch (e) {
      problems.push(`mcpServers.${name}: ${(e as Error).message}`);
    }
  }
  if (problems.length) throw new McpConfigError(problems);
  return out;
}

function normalise(name: string, e: z.output<typeof ServerEntrySchema>, baseDir: string): ServerConfig {
  const declared = e.type ?? (e.transport as ServerEntryInput['type'] | undefined);
  let type: ServerType;
  if (declared === 'streamable-http' || declared === 'streamableHttp') type = 'http';
  else if (declared && (SERVER_TYPES as readonly string[]).includes(declared)) type = declared as ServerType;
  else if (declared) throw new Error(`unknown type "${declared}"`);
  else if (e.command) type = 'stdio';
  else if (e.url) type = /^wss?:/.test(e.url) ? 'websocket' : 'http';
  else if (e.openapi_spec) type = 'openapi';
  else if (e.tools) type = 'builtin';
  else throw new Error('give "command" (stdio), "url" (http/sse), "openapi_spec" (openapi) or "tools" (builtin)');

  if (type === 'stdio' && !e.command) throw new Error('a stdio server needs "command"');
  if ((type === 'http' || type === 'sse' || type === 'websocket') && !e.url) throw new Error(`a ${type} server needs "url"`);
  const wsUrl = e.url !== undefined && /^wss?:/.test(e.url);
  if (wsUrl !== (type === 'websocket') && e.url !== undefined && (type === 'http' || type === 'sse' || type === 'websocket'))
    throw new Error(type === 'websocket' ? 'a websocket server\'s "url" is ws:// or wss://' : `a ${type} server's "url" is http:// or https://`);
  if (type === 'websocket' && Object.values({ ...e.headers, ...e.headers_template }).some((v) => v.includes('${')))
    throw new Error('a websocket server sends its headers once, when it connects: ${name} placeholders (filled per call) cannot apply');
  if (e.read_bytes_per_second !== undefined && type !== 'stdio') throw new Error('"read_bytes_per_second" applies to stdio servers');
  if (type === 'builtin' && !e.tools?.length) throw new Error('a builtin server needs "tools" (current_time, calculator, fleet_start_job)');
  if (type === 'openapi') {
    if (!e.openapi_spec) throw new Error('an openapi server needs "openapi_spec"');
    if (!e.openapi_base_url) throw new Error('an openapi server needs "openapi_base_url"');
  }
  const cfg: ServerConfig = {
    name,
    type,
    args: e.args,
    env: e.env,
    headersTemplate: { ...(e.headers ?? {}), ...e.headers_template },
    builtinTools: (e.tools ?? []).map((t) =>
      typeof t === 'string' ? { name: t } : t.description === undefined ? { name: t.name } : { name: t.name, description: t.description },
    ),
    autoContextTools: e.auto_context_tool === undefined ? [] : Array.isArray(e.auto_context_tool) ? e.auto_context_tool : [e.auto_context_tool],
    disabled: e.disabled,
  };
  if (e.command) cfg.command = e.command;
  if (e.cwd) cfg.cwd = isAbsolute(e.cwd) ? e.cwd : resolve(baseDir, e.cwd);
  if (e.url) cfg.url = e.url;
  if (e.allowed_tools) cfg.allowedTools = e.allowed_tools;
  if (e.timeout_ms !== undefined) cfg.timeoutMs = e.timeout_ms;
  if (e.openapi_base_url) cfg.openapiBaseUrl = e.openapi_base_url;
  if (e.system_instruction !== undefined) cfg.systemInstruction = e.system_instruction;
  if (e.response_instruction !== undefined) cfg.responseInstruction = e.response_instruction;
  if (e.tenants) cfg.tenants = e.tenants;
  if (e.allow_private_network !== undefined) cfg.allowPrivateNetwork = e.allow_private_network;
  if (e.read_bytes_per_second !== undefined) cfg.readBytesPerSecond = e.read_bytes_per_second;
  if (e.openapi_spec !== undefined) cfg.openapiSpec = typeof e.openapi_spec === 'string' ? readSpecFile(e.openapi_spec, baseDir) : e.openapi_spec;
  return cfg;
}

const MAX_SPEC_BYTES = 10 * 1024 * 1024;

function readSpecFile(path: string, baseDir: string): Record<string, unknown> {
  const file = isAbsolute(path) ? path : resolve(baseDir, path);
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (e) {
    throw new Error(`openapi_spec: cannot read ${file} (${(e as Error).message})`);
  }
  if (text.length > MAX_SPEC_BYTES) throw new Error(`openapi_spec: ${file} is over ${MAX_SPEC_BYTES} bytes`);
  try {
    const v = JSON.parse(text) as unknown;
    if (typeof v !== 'object' || v === null || Array.isArray(v)) throw new Error('the top level must be an object');
    return v as Record<string, unknown>;
  } catch (e) {
    throw new Error(`openapi_spec: ${file} is not a JSON OpenAPI document (${(e as Error).message})`);
  }
}

/**
 * Read `GATEWAY_MCP_CONFIG`: `{"mcpServers": {...}}`, or (a path ending in `.toml`) TOML with `[[servers]]`
 * tables as seed 003 writes them (`name`, `command`, `args`, `url`, `transport = "stdio" | "sse" | "websocket"`)
 * or `[mcpServers.<name>]` tables. Relative paths inside resolve against the file's folder.
 */
export function loadServersFile(path: string): ServerConfig[] {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (e) {
    throw new McpConfigError([`${path}: cannot read (${(e as Error).message})`]);
  }
  if (path.toLowerCase().endsWith('.toml')) return parseServers(tomlServers(path, text), dirname(resolve(path)));
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (e) {
    throw new McpConfigError([`${path}: not valid JSON (${(e as Error).message})`]);
  }
  const r = McpServersFileSchema.safeParse(json);
  if (!r.success) throw new McpConfigError([`${path}: expected {"mcpServers": {...}}`]);
  return parseServers(r.data.mcpServers, dirname(resolve(path)));
}

const TomlServersFile = z
  .object({ servers: z.array(z.record(z.string(), z.unknown())).max(1024).optional(), mcpServers: z.record(z.string(), z.unknown()).optional() })
  .loose();

/** A TOML server file as the `mcpServers` record the JSON file holds, so both share one validation. */
function tomlServers(path: string, text: string): Record<string, unknown> {
  let doc: unknown;
  try {
    doc = parseToml(text);
  } catch (e) {
    throw new McpConfigError([`${path}: not valid TOML (${(e as Error).message.split('\n')[0]})`]);
  }
  const r = TomlServersFile.safeParse(doc);
  if (!r.success || (!r.data.servers && !r.data.mcpServers))
    throw new McpConfigError([`${path}: expected [[servers]] tables (name, command, args, url, transport) or [mcpServers.<name>]`]);
  const out: Record<string, unknown> = { ...r.data.mcpServers };
  const problems: string[] = [];
  (r.data.servers ?? []).forEach(({ name, ...entry }, i) => {
    if (typeof name !== 'string') return problems.push(`servers[${i}]: a server needs "name"`);
    if (name in out) return problems.push(`servers[${i}]: the name "${name}" is used twice`);
    out[name] = entry;
  });
  if (problems.length) throw new McpConfigError(problems);
  return out;
}

/** The servers a configuration names, by name: inline `mcp.servers`, then the file (`GATEWAY_MCP_CONFIG`), which wins. */
export function resolveServers(mcp: { enabled: boolean; configFile?: string | undefined; servers: Record<string, unknown> }): Record<string, ServerConfig> {
  if (!mcp.enabled) return {};
  const inline = parseServers(mcp.servers);
  const fromFile = mcp.configFile ? loadServersFile(mcp.configFile) : [];
  const byName: Record<string, ServerConfig> = {};
  for (const s of [...inline, ...fromFile]) byName[s.name] = s;
  return byName;
}

/**
 * `mcp.endpoints`: the inbound MCP endpoint (tool processes dial in, see hub/endpoints.ts). Tokens are
 * made through the API; these are the route and its bounds.
 */
export const McpEndpointsConfigSchema = z
  .strictObject({
    enabled: Bool.default(true),
    /** xiaozhi-esp32-server's path; the pipe's MCP_ENDPOINT is `ws(s)://host:port<path>?token=…`. */
    path: env(
      'GATEWAY_MCP_ENDPOINTS_PATH',
      z
        .string()
        .regex(/^\/[A-Za-z0-9/_.-]*$/)
        .default('/mcp_endpoint/mcp/'),
      'the WebSocket path tool processes dial in on (the xiaozhi MCP endpoint)',
    ),
    maxConnections: z.coerce.number().int().min(1).max(100_000).default(256),
    /**
     * Sockets open at once with one token: the tool processes served together (mcp_pipe.py's config mode dials one
     * per server it runs), and those being replaced or handshaking.
     */
    maxConnectionsPerToken: z.coerce.number().int().min(1).max(100).default(8),
    /** Unknown tokens per source address before 429: a bucket of `unknownTokenBurst`, refilled at this rate. */
    unknownTokenPerSecond: z.coerce.number().min(0.01).max(1000).default(0.2),
    unknownTokenBurst: z.coerce.number().int().min(1).max(10_000).default(10),
    /**
     * Connections with one known token: a bucket of `connectBurst`, refilled at this rate; past it, 429. Each is an MCP
     * session (initialize, tools/list) and log lines; mcp_pipe.py waits 1 s and more between its reconnects.
     */
    connectsPerSecond: z.coerce.number().min(0.01).max(1000).default(1),
    connectBurst: z.coerce.number().int().min(1).max(10_000).default(10),
    /** Endpoint tokens kept in all, and per tenant (operator keys count as one tenant): each is a server in the hub and a stored record. */
    maxEndpoints: z.coerce.number().int().min(1).max(100_000).default(1024),
    maxEndpointsPerTenant: z.coerce.number().int().min(1).max(100_000).default(64),
    /**
     * Bytes a second one tenant's tool processes may send together (operators' endpoints count as one tenant), a
     * second's worth at once; past it their sockets are not read until the budget is back (TCP backpressure: their
     * own writes wait). Each message is parsed and checked, ~30 ms per MB of small objects: without a bound one tool
     * process at 16 such 2 MB frames a second held the event loop for every device and caller (red team 10).
     */
    readBytesPerSecond: z.coerce
      .number()
      .int()
      .min(64 * 1024)
      .max(1024 * 1024 * 1024)
      .default(8 * 1024 * 1024),
    /** MCP ping to each connected tool process; one unanswered within the interval cuts it (4002). */
    pingIntervalMs: z.coerce.number().int().min(1000).max(3_600_000).default(30_000),
  })
  .prefault({});

/** `mcp.publish`: remote MCP endpoints the gateway dials to serve its namespace there (hub/publish.ts). */
export const McpPublishConfigSchema = z
  .array(
    z.strictObject({
      url: z.url({ protocol: /^wss?$/ }),
      tenant: Tenant.optional(),
      allowed_tools: z.array(z.string().min(1).max(256)).max(4096).optional(),
    }),
  )
  .max(64)
  .default([]);

/** Whether the hub (hosted servers) runs: MCP enabled, and a servers file or inline servers given. */
export function hubEnabled(mcp: Pick<McpConfig, 'enabled' | 'configFile' | 'servers'>): boolean {
  return mcp.enabled && (mcp.configFile !== undefined || Object.keys(mcp.servers).length > 0);
}

/** The hub and the `/mcp` endpoint. */
export const McpSlice = z.strictObject({
  /** `MCP_ENABLED=false` turns the hub (upstream servers) off; device tools and /mcp keep working. */
  enabled: env(['MCP_ENABLED', 'GATEWAY_MCP_ENABLED'], Bool.default(true), '`false` turns the hub (hosted servers) off; device tools and `/mcp` keep working'),
  /** The `{"mcpServers": {...}}` file (`GATEWAY_MCP_CONFIG`). No file and no inline servers: no hub. */
  configFile: env(
    'GATEWAY_MCP_CONFIG',
    z.string().min(1).optional(),
    'the `{"mcpServers": {...}}` file: see [docs/mcp-hub.md](docs/mcp-hub.md)',
    'hub off without a file',
  ),
  /** Servers given inline (same format as the file's `mcpServers`); the file's entries win on a name clash. Read by loadConfig. */
  servers: z.record(z.string(), z.unknown()).default({}),
  /** Device tools for LLMs: one tool per device tool, the generic devices_list + device_call, or both. */
  deviceTools: env(
    'GATEWAY_MCP_DEVICE_TOOLS',
    z.enum(['per_device', 'generic', 'both']).default('both'),
    'device tools for LLMs: one tool per device tool (`per_device`), `devices_list` + `device_call` (`generic`), or `both`',
  ),
  connectTimeoutMs: Ms(20_000),
  callTimeoutMs: Ms(60_000),
  /** After SIGTERM, a child gets this long to exit before SIGKILL. */
  killGraceMs: Ms(2000, 60_000),
  maxRestarts: z.coerce.number().int().min(0).max(100).default(5),
  restartBaseDelayMs: Ms(500),
  restartMaxDelayMs: Ms(30_000),
  restartResetMs: Ms(60_000),
  maxResultBytes: Int(1024, 64 * 1024 * 1024, 1024 * 1024),
  /**
   * Bytes the gateway holds at most of what it wrote to its hosted servers and tool processes and they have not read,
   * all together. Each is bounded on its own (2 × the message bound + 4 MiB, ~8 MiB), but 256 tool processes at that
   * bound held 2 GiB. Unset: 128 MiB (16 peers at their own bound, 60 of the largest messages on their way at once),
   * or two peers' bounds when `maxResultBytes` makes those larger (hub/unread-total.ts).
   */
  unreadBudgetBytes: documented(
    z.coerce
      .number()
      .int()
      .min(1024 * 1024)
      .max(64 * 1024 * 1024 * 1024)
      .optional(),
    'bytes of what the gateway wrote them that its hosted servers and tool processes, all together, have not read yet; past it the tenant or server holding the most gives way: see [docs/mcp-hub.md](docs/mcp-hub.md)',
    '128 MiB, or twice what one may leave unread when that is more (`mcp.maxResultBytes` over ~15 MiB)',
  ),
  /**
   * Bytes a second read from each stdio server (a second's worth at once); past it its stdout is not read until the
   * budget is back (its writes wait in the pipe, nothing is dropped). A server's own `read_bytes_per_second` wins. On by
   * default, as `mcp.endpoints.readBytesPerSecond` is for tool processes: the operator chooses the command, not what it
   * sends (often a package from a registry, relaying what it fetched), and each line is parsed on the event loop every
   * device and caller shares (~30 ms per MB of small objects).
   */
  stdioReadBytesPerSecond: documented(
    z.coerce
      .number()
      .int()
      .min(64 * 1024)
      .max(1024 * 1024 * 1024)
      .default(8 * 1024 * 1024),
    "bytes a second the gateway reads from each stdio server, a second's worth at once; past it the server's output waits in its pipe (a server's `read_bytes_per_second` wins)",
  ),
  /** One server's announcements of change (tools, prompts, resources; its comings and goings) reach `/mcp` sessions at most once per this (0: each at once). */
  changeWindowMs: Int(0, 60_000, 1000),
  maxToolsPerServer: z.coerce.number().int().min(1).max(10_000).default(512),
  /**
   * Bytes of one server's tools as kept (their JSON): a tool process dialed in with an endpoint token lists whatever
   * it likes. Real servers list tens to hundreds of KB; past it the list is cut (counted, logged).
   */
  maxToolBytesPerServer: Int(1024, 256 * 1024 * 1024, 4 * 1024 * 1024),
  /** Devices one `devices_list` result names at most (a fleet must not become one tool result); past it: `truncated`. */
  devicesListMax: z.coerce.number().int().min(1).max(10_000).default(200),
  /** Default for servers without `allow_private_network`: outbound HTTP may reach private addresses. */
  allowPrivateNetwork: Bool.default(false),
  /** Asked of hosted servers that log (logging/setLevel); their messages go to /mcp sessions that see them. */
  upstreamLogLevel: z.enum(['debug', 'info', 'notice', 'warning', 'error', 'critical', 'alert', 'emergency']).default('info'),
  /** Log messages per second passed on from one hosted server (a burst of as many); the rest are dropped and counted. */
  upstreamLogRatePerSecond: z.coerce.number().int().min(1).max(10_000).default(20),
  endpoint: z
    .strictObject({
      enabled: env('GATEWAY_MCP_ENDPOINT_ENABLED', Bool.default(true), 'serve `/mcp` (Streamable HTTP)'),
      /** Browser origins allowed besides the gateway's own; requests without Origin are allowed. */
      allowedOrigins: env('GATEWAY_MCP_ALLOWED_ORIGINS', Csv.default([]), "browser origins `/mcp` allows besides the gateway's own"),
      /**
       * Host names `/mcp` answers to (DNS-rebinding protection), besides localhost, 127.0.0.1, [::1],
       * the host of `http.publicUrl` and a specific `http.host`. Names only, no port.
       */
      allowedHosts: env('GATEWAY_MCP_ALLOWED_HOSTS', Csv.default([]), 'host names `/mcp` answers to besides localhost, `http.publicUrl` and `http.host`'),
      maxSessions: env('GATEWAY_MCP_MAX_SESSIONS', z.coerce.number().int().min(1).max(100_000).default(1000), '`/mcp` sessions at once'),
      /** Sessions one API key may hold at once, so one key cannot take every slot of `maxSessions`. */
      maxSessionsPerKey: env('GATEWAY_MCP_MAX_SESSIONS_PER_KEY', z.coerce.number().int().min(1).max(100_000).default(100), '… per API key'),
      /** Sessions (and stateless listen streams) one tenant may hold with all its keys: see `tenantShare`. */
      maxSessionsPerTenant: env(
        'GATEWAY_MCP_MAX_SESSIONS_PER_TENANT',
        z.coerce.number().int().min(1).max(100_000).optional(),
        '… per tenant, all its API keys together (keys without a tenant count as one)',
        '3/4 of maxSessions, rounded up, once the API keys belong to more than one tenant (until then: maxSessions)',
      ),
      sessionIdleMs: Ms(30 * 60_000, 24 * 3_600_000),
      /**
       * Bytes all `/mcp` responses together may hold of what their clients have not read (each stream is cut at 1 MiB on
       * its own; 1000 sessions held 1 GiB). Past it the tenant, or key without one, holding the most gives way: its
       * response is cut (an SSE stream is resumed with Last-Event-ID). Unset: 64 MiB (facade/response-unread.ts).
       */
      unreadBudgetBytes: documented(
        z.coerce
          .number()
          .int()
          .min(4 * 1024 * 1024)
          .max(64 * 1024 * 1024 * 1024)
          .optional(),
        'bytes of `/mcp` responses, all sessions and streams together, that their clients have not read yet; past it the tenant (or key without one) holding the most has a response cut: see [docs/mcp-hub.md](docs/mcp-hub.md)',
        '64 MiB',
      ),
    })
    .prefault({}),
  endpoints: McpEndpointsConfigSchema,
  publish: McpPublishConfigSchema,
});

/** The `mcp` slice as the gateway uses it: `servers` checked and merged with the file's, by name. */
export type McpConfig = Omit<z.infer<typeof McpSlice>, 'servers'> & { servers: Record<string, ServerConfig> };
