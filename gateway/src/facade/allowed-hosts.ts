import type { HttpConfig } from '../api/config.js';

/**
 * DNS-rebinding protection for `/mcp` (as the MCP spec advises): a page on `evil.example` whose name the
 * attacker re-points at this gateway sends `Host: evil.example` and `Origin: http://evil.example`, so
 * neither may be compared with the request itself. Both are checked against names the operator
 * configured: loopback names, the public URL's host, a specific listen address, `mcp.endpoint.allowedHosts`.
 */
const WILDCARD = new Set(['0.0.0.0', '::', '[::]', '']);

/** The loopback names, as the SDK's `localhostAllowedHostnames()` lists them (not imported: the SDK loads on the first /mcp request). */
const LOOPBACK = ['localhost', '127.0.0.1', '[::1]'];

export function mcpAllowedHosts(http: Pick<HttpConfig, 'host' | 'publicUrl'>, allowedHosts: readonly string[]): Set<string> {
  const out = new Set(LOOPBACK);
  const listen = bracketed(http.host.toLowerCase());
  if (!WILDCARD.has(listen)) out.add(listen);
  if (http.publicUrl) out.add(new URL(http.publicUrl).hostname.toLowerCase());
  for (const h of allowedHosts) {
    const name = hostnameOf(h);
    if (name) out.add(name);
  }
  return out;
}

/**
 * The lowercase host name of a `Host` header value (`name[:port]`, `[v6][:port]`); undefined if malformed.
 * Stricter than the SDK's `validateHostHeader`, which takes `user@allowed.name` or `name/path` as the name.
 */
export function hostnameOf(host: string | undefined): string | undefined {
  if (!host || host.length > 300) return undefined;
  try {
    const u = new URL(`http://${host}`);
    // Anything besides name and port (userinfo, path) is not a Host header.
    if (u.username || u.password || u.pathname !== '/' || u.search || u.hash) return undefined;
    return u.hostname.toLowerCase();
  } catch {
    return undefined;
  }
}

const bracketed = (h: string) => (h.includes(':') && !h.startsWith('[') ? `[${h}]` : h);
