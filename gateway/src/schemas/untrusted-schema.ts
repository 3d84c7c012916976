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

/** A tool's input and output schemas, both guarded: the sanitized pair, or why the tool is refused. */
export function guardToolSchemas(
  inputSchema: Record<string, unknown>,
  outputSchema: Record<string, unknown> | undefined,
  limits: SchemaLimits,
): { ok: true; inputSchema: Record<string, unknown>; outputSchema?: Record<string, unknown> } | Extract<SchemaVerdict, { ok: false }> {
  const input = guardSchema(inputSchema, limits);
  if (!input.ok) return input;
  if (outputSchema === undefined) return { ok: true, inputSchema: input.schema };
  const output = guardSchema(outputSchema, limits);
  return output.ok ? { ok: true, inputSchema: input.schema, outputSchema: output.schema } : output;
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
