import { z } from 'zod';
import { env, Int } from '../config/fields.js';

/** Tool schemas from devices and hosted MCP servers are untrusted data (see docs/security.md). */
export const SchemasSlice = z.strictObject({
  /** A tool whose inputSchema/outputSchema is larger (UTF-8 bytes of its JSON) is left out of the catalog. */
  maxBytes: env('GATEWAY_SCHEMA_MAX_BYTES', Int(256, 4 * 1024 * 1024, 64 * 1024), 'a device or hosted-server tool whose schema is larger is left out'),
  /** ... or nested deeper than this (JSON levels). */
  maxDepth: env('GATEWAY_SCHEMA_MAX_DEPTH', z.coerce.number().int().min(2).max(256).default(32), '… or nested deeper'),
  /** Compiled validators kept, shared by every tool with the same schema content (LRU). */
  validatorCacheSize: env(
    'GATEWAY_VALIDATOR_CACHE_SIZE',
    z.coerce.number().int().min(1).max(100_000).default(1024),
    'compiled schema validators kept (LRU, shared by schema content)',
  ),
});
export type SchemasConfig = z.infer<typeof SchemasSlice>;
