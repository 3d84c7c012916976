import type { FastifyRequest } from 'fastify';
import { hostnameOf } from './allowed-hosts.js';

export interface RequestOriginsConfig {
  /** Host names (no port) `/mcp` answers to: see `mcpAllowedHosts`. */
  allowedHosts: ReadonlySet<string>;
  /** `mcp.endpoint.allowedOrigins`: browser origins allowed besides those on the allowed hosts, and the only ones given CORS. */
  allowedOrigins: readonly string[];
  /** `http.publicUrl`. */
  publicUrl?: string | undefined;
}

/**
 * `/mcp`'s checks of where a request comes from and which name it used (DNS-rebinding protection, allowed-hosts.ts),
 * its CORS origin, and the origin clients reach the gateway at.
 */
export function requestOrigins(o: RequestOriginsConfig) {
  // Clients send the same Host on every request: the verdict is remembered (a few entries, forgotten when full).
  const hostVerdicts = new Map<string, boolean>();
  return {
    hostAllowed(req: FastifyRequest): boolean {
      const host = req.headers.host;
      if (host === undefined) return false;
      let ok = hostVerdicts.get(host);
      if (ok === undefined) {
        const name = hostnameOf(host);
        ok = name !== undefined && o.allowedHosts.has(name);
        if (hostVerdicts.size >= 64) hostVerdicts.clear();
        hostVerdicts.set(host, ok);
      }
      return ok;
    },

    /** A browser Origin: listed in allowedOrigins, or on one of the allowed hosts (never compared with the request's Host). */
    originAllowed(req: FastifyRequest): boolean {
      const origin = req.headers.origin;
      if (origin === undefined) return true;
      let u: URL;
      try {
        u = new URL(origin);
      } catch {
        return false;
      }
      if (o.allowedOrigins.includes(u.origin)) return true;
      return (u.protocol === 'http:' || u.protocol === 'https:') && o.allowedHosts.has(u.hostname.toLowerCase());
    },

    /**
     * CORS for browser clients on the origins in `allowedOrigins` (only those; same-origin pages need none).
     * Written by hand for this one route: a CORS plugin registers a global `OPTIONS *` route.
     */
    corsOrigin(req: FastifyRequest): string | undefined {
      const origin = req.headers.origin;
      return origin !== undefined && o.allowedOrigins.includes(origin) ? origin : undefined;
    },

    /** Where clients reach this gateway: `http.publicUrl`, else the request's scheme and Host. */
    originOf(req: FastifyRequest): string {
      if (o.publicUrl) return new URL(o.publicUrl).origin;
      // Only a Host on the allow-list is echoed (a forged Host must not shape the challenge).
      const name = hostnameOf(req.headers.host);
      const host = name !== undefined && o.allowedHosts.has(name) ? String(req.headers.host) : 'localhost';
      return `${req.protocol}://${host}`;
    },
  };
}
