import { createHash, timingSafeEqual } from 'node:crypto';
import type { FastifyInstance, FastifyReply, FastifyRequest, HookHandlerDoneFunction } from 'fastify';
import { GatewayError } from '../errors.js';
import { KEY_PRINCIPAL_PREFIX } from '../principal.js';

/** Who is calling: an API key's tenant, if it has one, and the key itself (as a principal, never the secret). */
export interface ApiCaller {
  tenant?: string | undefined;
  /** Stands for the key: a hash of it, stable while the key is, never logged. */
  principal?: string | undefined;
}

/** The principal of an API key: part of its SHA-256, so the key itself is kept nowhere else (see principal.ts). */
export function principalOf(key: string): string {
  return `${KEY_PRINCIPAL_PREFIX}${createHash('sha256').update(key).digest('base64url').slice(0, 22)}`;
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
 * The configured keys as bytes, and the principals of those that matched, made again when the list changes: a
 * request compares its key's bytes with them in constant time (as `safeEqual` does) without turning every configured
 * key into a Buffer, or looking up its principal, each time. Checked against the list's contents, not only its
 * identity, so a list changed in place is seen too.
 */
interface KeyTable {
  keys: string[];
  bytes: Buffer[];
  principals: Array<string | undefined>;
}
let keyTable: KeyTable = { keys: [], bytes: [], principals: [] };
function tableOf(keys: readonly string[]): KeyTable {
  const t = keyTable;
  let same = t.keys.length === keys.length;
  for (let i = 0; same && i < keys.length; i++) same = keys[i] === t.keys[i];
  if (same) return t;
  keyTable = { keys: [...keys], bytes: keys.map((k) => Buffer.from(k)), principals: [] };
  return keyTable;
}

/** The index in `t` of the configured key equal to `presented` (-1: none), compared in constant time for keys of its length. */
function matchingKey(presented: Buffer, t: KeyTable): number {
  for (let i = 0; i < t.bytes.length; i++) if (t.bytes[i]!.length === presented.length && timingSafeEqual(t.bytes[i]!, presented)) return i;
  return -1;
}

/**
 * The presented key's bytes by the whole header that carried it, for headers that carried a configured key: a caller
 * sends the same header on every request, and reading it (the pattern, a Buffer) was most of the check's cost. Only
 * headers that matched are kept (a wrong key adds nothing), at most MAX_CACHED_HEADERS, all forgotten when full. A
 * kept header is still compared with the configured keys in constant time on every request, so a removed key stops
 * working at once.
 */
const presentedBytes = new Map<string, Buffer>();
const MAX_CACHED_HEADERS = 256;

/** The key of an `Authorization: Bearer <key>` header as bytes, or undefined when the header is not one. */
function presentedKey(authorization: string): Buffer | undefined {
  const m = /^Bearer\s+(\S+)\s*$/i.exec(authorization);
  return m ? Buffer.from(m[1]!) : undefined;
}

/** The caller behind `Authorization: Bearer <key>`, or undefined when the key is missing or wrong. */
export function authenticate(
  authorization: string | undefined,
  keys: readonly string[],
  tenantOf: (key: string) => string | undefined = () => undefined,
): ApiCaller | undefined {
  if (authorization === undefined) return undefined;
  const kept = presentedBytes.get(authorization);
  const presented = kept ?? presentedKey(authorization);
  if (presented === undefined) return undefined;
  const t = tableOf(keys);
  const i = matchingKey(presented, t);
  if (i < 0) return undefined;
  if (kept === undefined) {
    if (presentedBytes.size >= MAX_CACHED_HEADERS) presentedBytes.clear();
    presentedBytes.set(authorization, presented);
  }
  const tenant = tenantOf(t.keys[i]!);
  const principal = (t.principals[i] ??= cachedPrincipalOf(t.keys[i]!));
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
