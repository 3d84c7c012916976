import { normalizeDeviceId } from '@voxgate/protocol';
import type { FastifyRequest } from 'fastify';
import { GatewayError } from '../errors.js';
import { Problem, jsonSchema } from './schemas.js';

/**
 * Helpers shared by every HTTP route plugin, here and in firmware/, vision/ and facade/. A leaf: it imports
 * no route file, so a plugin outside api/ can use it without an import cycle through api/app.ts.
 */

/** OpenAPI responses for the given error statuses, each a problem+json document. */
export function problems(...codes: number[]): Record<number, Record<string, unknown>> {
  return Object.fromEntries(codes.map((c) => [c, { ...jsonSchema(Problem, 'output'), description: 'problem+json' }]));
}

/** A device id from a path parameter (`:`, `_`, `-` or no separators), or a 400. */
export function parseDeviceId(raw: string): string {
  const id = normalizeDeviceId(raw);
  if (!id) throw new GatewayError('INVALID_REQUEST', `"${raw.slice(0, 64)}" is not a device id; use a MAC such as aa:bb:cc:dd:ee:ff`);
  return id;
}

/**
 * Where devices reach us: the configured public URL, else the scheme and Host of the request as it
 * reached the gateway or, from a proxy listed in `http.trustProxy`, as X-Forwarded-Proto/-Host say it
 * reached the proxy. The host must be a plain host[:port].
 */
export function publicBase(req: FastifyRequest, http: { publicUrl?: string | undefined; port: number }): URL {
  if (http.publicUrl) return new URL(http.publicUrl);
  const scheme = req.protocol === 'https' ? 'https' : 'http';
  const host = req.host;
  if (!host) return new URL(`${scheme}://localhost:${http.port}`);
  const parsed = /^[A-Za-z0-9.:[\]-]{1,255}$/.test(host) ? URL.parse(`${scheme}://${host}/`) : null;
  const defaultPort = scheme === 'https' ? /:443$/ : /:80$/;
  if (!parsed || parsed.host.toLowerCase() !== host.toLowerCase().replace(defaultPort, '')) {
    throw new GatewayError('INVALID_REQUEST', 'the Host header is not a valid host[:port]');
  }
  return parsed;
}
