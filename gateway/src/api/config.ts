import ipaddr from 'ipaddr.js';
import { z } from 'zod';
import { Bool, Count, Csv, env, HttpUrl, Int, Ms, Port, Tenant } from '../config/fields.js';

/** The HTTP port (API, OTA, device WebSocket, console), its callers' keys and the /metrics listener. */

/** What fastify's trustProxy (proxy-addr) takes: an address, a CIDR, or a named range. */
const isProxyAddress = (v: string) => ['loopback', 'linklocal', 'uniquelocal'].includes(v) || ipaddr.isValid(v) || ipaddr.isValidCIDR(v);

export const HttpSlice = z.strictObject({
  host: env('GATEWAY_HTTP_HOST', z.string().default('0.0.0.0'), 'HTTP API, OTA and device WebSocket listen address'),
  port: env('GATEWAY_HTTP_PORT', Port.default(8000), '… and port'),
  /** How devices reach this gateway (OTA answers); default: the Host header of the OTA request. */
  publicUrl: env('GATEWAY_PUBLIC_URL', HttpUrl.optional(), 'base URL devices use to reach the gateway', "the OTA request's `Host`"),
  bodyLimitBytes: Int(1024, 16 * 1024 * 1024, 1024 * 1024),
  /** Every socket on the HTTP port (device WebSockets + API); above `ws.maxConnections`, so the API keeps a reserve. */
  maxConnections: env(
    'GATEWAY_HTTP_MAX_CONNECTIONS',
    Count(9000),
    "sockets on the HTTP port (devices + API); must exceed `ws.maxConnections`: the difference is the API's reserve",
  ),
  /** Sockets on the HTTP port from one IPv4 address or IPv6 /64 (a site's devices often share one NAT address). */
  maxConnectionsPerAddress: env('GATEWAY_HTTP_MAX_CONNECTIONS_PER_ADDRESS', Count(1000), 'sockets on the HTTP port from one IPv4 address or IPv6 /64'),
  /** A connection that has not sent a complete request or WebSocket upgrade within this is closed. */
  headersTimeoutMs: env('GATEWAY_HTTP_HEADERS_TIMEOUT_MS', Ms(10_000, 120_000), 'a connection without a complete request or upgrade within this is closed'),
  /**
   * Reverse proxies whose X-Forwarded-For/-Proto/-Host headers are believed (addresses, CIDRs, or
   * `loopback`, `linklocal`, `uniquelocal`). Empty: the headers are ignored, whoever sends them.
   */
  trustProxy: env(
    'GATEWAY_TRUST_PROXY',
    Csv.refine((list) => list.every(isProxyAddress), 'addresses, CIDRs, or loopback / linklocal / uniquelocal').default([]),
    'reverse proxies whose `X-Forwarded-For/-Proto/-Host` are believed (addresses, CIDRs, `loopback`, …): see [docs/deployment.md](docs/deployment.md#behind-a-reverse-proxy)',
    '— (trust nobody)',
  ),
});
export type HttpConfig = z.infer<typeof HttpSlice>;

/** API keys and their tenants; top-level keys of the config file. */
export const apiKeyFields = {
  apiKeys: env('GATEWAY_API_KEYS', Csv.default([]), 'comma-separated API keys for `/v1`, `/mcp` and MQTT event subscribers', 'generated once'),
  /**
   * Tenants of API keys: `{"<key>": "<tenant>"}` in the file, or `GATEWAY_API_KEY_TENANTS=key1=tenantA,key2=tenantB`.
   * A key not listed has no tenant. Every key listed here must also be in `apiKeys`.
   */
  apiKeyTenants: env(
    'GATEWAY_API_KEY_TENANTS',
    z.preprocess(parseKeyTenants, z.record(z.string().min(1), Tenant)).default({}),
    "`key=tenant,…`: callers see only their tenant's MCP servers; each key must also be in `GATEWAY_API_KEYS`",
  ),
};

/** `key=tenant,key2=tenant2` (env) or `{"key": "tenant"}` (file) -> the record; anything else as it came. */
export function parseKeyTenants(v: unknown): unknown {
  if (typeof v !== 'string') return v;
  return Object.fromEntries(
    v
      .split(',')
      .map((s) => s.trim())
      .filter(Boolean)
      .map((pair) => {
        const i = pair.lastIndexOf('=');
        return i <= 0 ? [pair, ''] : [pair.slice(0, i), pair.slice(i + 1)];
      }),
  );
}

export const MetricsSlice = z.strictObject({
  /** A bearer key that may read /metrics (and nothing else), besides the API keys. */
  key: env(
    'GATEWAY_METRICS_KEY',
    z.string().min(16, 'at least 16 characters').optional(),
    'a bearer key that may read `/metrics` and nothing else (>= 16 chars)',
  ),
  /** Serve /metrics on its own listener (and not on the API port). It needs `key` only when one is set. */
  port: env('GATEWAY_METRICS_PORT', Port.optional(), 'serve `/metrics` on its own listener instead of the API port'),
  host: env('GATEWAY_METRICS_HOST', z.string().default('127.0.0.1'), '… and its address'),
  /** The in-memory history behind GET /v1/metrics/history (the console's health charts): one sample every `historyIntervalMs`, the last `historySamples` kept (default: an hour). */
  historyIntervalMs: env(
    'GATEWAY_METRICS_HISTORY_INTERVAL_MS',
    Ms(10_000, 600_000),
    "one sample every this often behind `GET /v1/metrics/history` (the console's health charts)",
  ),
  historySamples: env('GATEWAY_METRICS_HISTORY_SAMPLES', z.coerce.number().int().min(1).max(10_000).default(360), '… and how many are kept (default: an hour)'),
});
export type MetricsConfig = z.infer<typeof MetricsSlice>;

/** The web console, static files served at /console (built into console/dist by `npm run build`). */
export const ConsoleSlice = z.strictObject({
  enabled: env('GATEWAY_CONSOLE_ENABLED', Bool.default(true), 'serve the web console at `/console` ([docs/console.md](docs/console.md))'),
  /** Where the built files are; default: console/dist of this checkout. */
  dir: env('GATEWAY_CONSOLE_DIR', z.string().min(1).optional(), 'where the built console is', '`console/dist`'),
});
export type ConsoleConfig = z.infer<typeof ConsoleSlice>;
