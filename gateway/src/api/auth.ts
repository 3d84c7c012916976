import { createHash, timingSafeEqual } from 'node:crypto';
import type { FastifyInstance, FastifyReply, FastifyRequest, HookHandlerDoneFunction } from 'fastify';
import { GatewayError } from '../errors.js';

/** Who is calling: an API key's tenant, if it has one, and the key itself (as a principal, never the secret). */
export interface ApiCaller {
  tenant?: string | undefined;
  /** Stands for the key: a hash of it, stable while the key is, never logged. */
  principal?: string | undefined;
}

/** The principal of an API key: part of its SHA-256, so the key itself is kept nowhere else (see principal.ts). */
export function principalOf(key: string): string {
  return `key:${createHash('sha256').update(key).digest('base64url').slice(0, 22)}`;
}

/**
 * Principals of the configured keys, hashed once each rather than once per request (the hash was ~2 % of the
 * gateway's CPU per call). Holds only keys that matched a configured one, and forgets them all when the cache
 * outgrows what a rotation could explain, so a removed key's entry does not live on.
 */
const principals = new Map<string, string>();
const MAX_CACHED_PRINCIPALS = 256;
function cachedPrincipalOf(key: string): string {
  let p = principals.get(key);
  if (p === undefined) {
    if (principals.size >= MAX_CACHED_PRINCIPALS) principals.clear();
    p = principalOf(key);
    principals.set(key, p);
  }
  return p;
}

declare module 'fastify' {
  interface FastifyRequest {
    caller?: ApiCaller;
  }
}

/**
 * The configured keys as bytes, made again when the list changes: a request compares its key's bytes with
 * them in constant time (as `safeEqual` does) without turning every configured key into a Buffer each time.
 * Checked against the list's contents, not only its identity, so a list changed in place is seen too.
 */
let keyBytes: { keys: string[]; bytes: Buffer[] } = { keys: [], bytes: [] };
function bytesOf(keys: readonly string[]): Buffer[] {
  const cached = keyBytes;
  if (cached.keys.length === keys.length && keys.every((k, i) => k === cached.keys[i])) return cached.bytes;
  keyBytes = { keys: [...keys], bytes: keys.map((k) => Buffer.from(k)) };
  return keyBytes.bytes;
}

/** The configured key equal to `presented`, compared in constant time for keys of its length. */
function matchingKey(presented: string, keys: readonly string[]): string | undefined {
  const bytes = bytesOf(keys);
  const p = Buffer.from(presented);
  for (let i = 0; i < bytes.length; i++) if (bytes[i]!.length === p.length && timingSafeEqual(bytes[i]!, p)) return keys[i];
  return undefined;
}

/** The caller behind `Authorization: Bearer <key>`, or undefined when the key is missing or wrong. */
export function authenticate(
  authorization: string | undefined,
  keys: readonly string[],
  tenantOf: (key: string) => string | undefined = () => undefined,
): ApiCaller | undefined {
  const m = /^Bearer\s+(\S+)\s*$/i.exec(authorization ?? '');
  if (!m) return undefined;
  const key = matchingKey(m[1]!, keys);
  if (key === undefined) return undefined;
  const tenant = tenantOf(key);
  const principal = cachedPrincipalOf(key);
  return tenant === undefined ? { principal } : { tenant, principal };
}

/**
 * Bearer API keys for everything under the plugin that calls this; sets `req.caller`. A callback hook, not an
 * async one: it runs on every API request, and an async hook costs a promise and a microtask turn each time.
 */
export function requireApiKey(app: FastifyInstance, keys: () => readonly string[], tenantOf?: (key: string) => string | undefined): void {
  app.addHook('onRequest', (req: FastifyRequest, reply: FastifyReply, done: HookHandlerDoneFunction) => {
    const caller = authenticate(req.headers.authorization, keys(), tenantOf);
    if (caller) {
      req.caller = caller;
      return done();
    }
    const present = /^Bearer\s+\S+\s*$/i.test(req.headers.authorization ?? '');
    void reply.header('www-authenticate', 'Bearer realm="voxgate"');
    done(new GatewayError('UNAUTHORIZED', present ? 'the API key is not valid' : 'send an API key: Authorization: Bearer <key>'));
  });
}
