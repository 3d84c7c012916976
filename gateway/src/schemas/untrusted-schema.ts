/**
 * JSON Schemas that arrive from devices and hosted MCP servers are data, not code: before one is
 * stored or compiled it is bounded (depth, size) and stripped of the keywords that would let it
 * reach outside itself in a shared validator (`$id`, `$anchor`... register names that another party's
 * schema could `$ref`, or collide with). Regular expressions in it run on a linear-time engine
 * (see validators.ts).
 */
export interface SchemaLimits {
  /** Largest schema, in UTF-8 bytes of its JSON. */
  maxBytes: number;
  /** Deepest nesting of objects and arrays. */
  maxDepth: number;
}

export type SchemaVerdict = { ok: true; schema: Record<string, unknown> } | { ok: false; reason: 'too_deep' | 'too_large'; detail: string };

/** Keywords that name a schema in the validator's registry; never kept from an untrusted schema. */
const IDENTITY_KEYWORDS = new Set(['$id', '$anchor', '$dynamicAnchor', '$recursiveAnchor', '$schema']);
/** Keywords whose value is a map from names (any string, even "$id") to schemas. */
const SCHEMA_MAPS = new Set(['properties', 'patternProperties', 'definitions', '$defs', 'dependentSchemas', 'dependencies']);
/** Keywords whose value is data, copied as is. */
const DATA_KEYWORDS = new Set(['default', 'enum', 'const', 'examples', 'required']);

/** Bound, then sanitize: the schema to keep, or why it is refused. Never throws. */
export function guardSchema(schema: Record<string, unknown>, limits: SchemaLimits): SchemaVerdict {
  if (depthExceeds(schema, limits.maxDepth)) return { ok: false, reason: 'too_deep', detail: `nested deeper than ${limits.maxDepth} levels` };
  // Depth is bounded now, so serializing cannot overflow the stack.
  const bytes = Buffer.byteLength(JSON.stringify(schema));
  if (bytes > limits.maxBytes) return { ok: false, reason: 'too_large', detail: `${bytes} bytes, more than ${limits.maxBytes}` };
  return { ok: true, schema: sanitize(schema) as Record<string, unknown> };
}

/**
 * A tool's input and output schemas, both guarded: the sanitized pair, or why the tool is refused. These are the
 * schemas the gateway serves (tools/list, GET /v1/tools), so a root `$schema` that names the dialect is kept: it is
 * the server's statement of how to read its schema (MCP: JSON Schema 2020-12 unless `$schema` says otherwise), and
 * it registers nothing anywhere. The validators compile a copy guarded again (`SchemaValidators.validatorFor`),
 * without it.
 */
export function guardToolSchemas(
  inputSchema: Record<string, unknown>,
  outputSchema: Record<string, unknown> | undefined,
  limits: SchemaLimits,
): { ok: true; inputSchema: Record<string, unknown>; outputSchema?: Record<string, unknown> } | Extract<SchemaVerdict, { ok: false }> {
  const input = guardSchema(inputSchema, limits);
  if (!input.ok) return input;
  if (outputSchema === undefined) return { ok: true, inputSchema: withDialect(inputSchema, input.schema) };
  const output = guardSchema(outputSchema, limits);
  return output.ok ? { ok: true, inputSchema: withDialect(inputSchema, input.schema), outputSchema: withDialect(outputSchema, output.schema) } : output;
}

/** Longest root `$schema` kept: a dialect's URI is short; anything longer is not one. */
const MAX_DIALECT_URI = 256;

/** The sanitized schema with the original's root `$schema` (a short string) put back first, as servers write it. */
function withDialect(original: Record<string, unknown>, sanitized: Record<string, unknown>): Record<string, unknown> {
  const dialect = Object.hasOwn(original, '$schema') ? original.$schema : undefined;
  if (typeof dialect !== 'string' || dialect.length > MAX_DIALECT_URI) return sanitized;
  return { $schema: dialect, ...sanitized };
}

/** A schema without its root `$schema`, for readers that take the dialect as given (LLM providers' tool parameters). */
export function withoutDialect(schema: Record<string, unknown>): Record<string, unknown> {
  if (!Object.hasOwn(schema, '$schema')) return schema;
  const { $schema: _dialect, ...rest } = schema;
  return rest;
}

/** Iterative, so a value nested 100 000 levels deep (a hosted server's JSON) is measured safely. */
function depthExceeds(root: unknown, maxDepth: number): boolean {
  const stack: Array<[unknown, number]> = [[root, 1]];
  while (stack.length > 0) {
    const [v, depth] = stack.pop()!;
    if (typeof v !== 'object' || v === null) continue;
    if (depth > maxDepth) return true;
    for (const child of Array.isArray(v) ? v : Object.values(v)) if (typeof child === 'object' && child !== null) stack.push([child, depth + 1]);
  }
  return false;
}

function sanitize(node: unknown): unknown {
  if (Array.isArray(node)) return node.map(sanitize);
  if (typeof node !== 'object' || node === null) return node;
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(node)) {
    if (IDENTITY_KEYWORDS.has(key)) continue;
    if (DATA_KEYWORDS.has(key)) setOwn(out, key, value);
    else if (SCHEMA_MAPS.has(key) && typeof value === 'object' && value !== null && !Array.isArray(value)) {
      const map: Record<string, unknown> = {};
      for (const [name, sub] of Object.entries(value)) setOwn(map, name, sanitize(sub));
      setOwn(out, key, map);
    } else setOwn(out, key, sanitize(value));
  }
  return out;
}

/** `obj[key] = value`, except that a key named "__proto__" stays an own property instead of a prototype. */
function setOwn(obj: Record<string, unknown>, key: string, value: unknown): void {
  Object.defineProperty(obj, key, { value, enumerable: true, writable: true, configurable: true });
}
