/**
 * JSON Schemas that arrive from devices and hosted MCP servers are data, not code: before one is
 * stored or compiled it is bounded (depth, size, and the work its `$ref`s can make a validation do) and
 * stripped of the keywords that would let it reach outside itself in a shared validator (`$id`, `$anchor`...
 * register names that another party's schema could `$ref`, or collide with). Regular expressions in it run
 * on a linear-time engine (see validators.ts).
 */
export interface SchemaLimits {
  /** Largest schema, in UTF-8 bytes of its JSON. */
  maxBytes: number;
  /** Deepest nesting of objects and arrays. */
  maxDepth: number;
}

export type SchemaVerdict = { ok: true; schema: Record<string, unknown> } | { ok: false; reason: 'too_deep' | 'too_large' | 'too_complex'; detail: string };

/**
 * Most schema values (objects and arrays) one validation may walk once every local `$ref` is followed. Bytes and
 * depth do not bound this: a chain of definitions each naming the next twice (`allOf: [{$ref}, {$ref}]`) doubles
 * per link, and 28 links in 2 KB made one call validate for seconds on the event loop. A large real schema (64 KiB,
 * shared definitions used a few times each) expands to a few thousand.
 */
export const MAX_EXPANDED_NODES = 20_000;
/** Most `$ref`s followed one inside another (a real schema's models nest a handful deep). */
export const MAX_REF_CHAIN = 64;

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
  // Judged as compiled: without the identity keywords, every `$ref` resolves against this root.
  const safe = sanitize(schema) as Record<string, unknown>;
  const complex = complexity(safe);
  return complex ? { ok: false, reason: 'too_complex', detail: complex } : { ok: true, schema: safe };
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

/** Keywords holding a reference to another part of the schema. */
const REF_KEYWORDS = ['$ref', '$dynamicRef', '$recursiveRef'] as const;
/** Keywords whose schemas apply to the same value as the schema holding them (not to a part of it). */
const IN_PLACE_LISTS = ['allOf', 'anyOf', 'oneOf'] as const;
const IN_PLACE_ONE = ['not', 'if', 'then', 'else'] as const;

/**
 * Why validating against `root` could run away, or undefined: more than MAX_EXPANDED_NODES values once local
 * `$ref`s are followed (each definition counted at every place it is used), a `$ref` chain over MAX_REF_CHAIN, or a
 * `$ref` cycle that comes back to the same value without descending into it (validation recurses until the stack
 * overflows). Cycles through a part of the value (`properties`, `items`...) are recursive types: allowed, they end
 * with the value's own depth. Linear in the schema's size (each value's expanded size is computed once).
 */
function complexity(root: Record<string, unknown>): string | undefined {
  const expanded = new Map<object, number>();
  const walking = new Set<object>();
  let chain = 0;
  const size = (v: unknown): number => {
    if (typeof v !== 'object' || v === null) return 0;
    const known = expanded.get(v);
    if (known !== undefined) return known;
    if (walking.has(v)) return 1; // a recursive type: its cost is bounded by the value's depth
    walking.add(v);
    let n = 1;
    for (const child of Array.isArray(v) ? v : Object.values(v)) if ((n += size(child)) > MAX_EXPANDED_NODES) break;
    if (!Array.isArray(v))
      for (const target of refTargets(root, v as Record<string, unknown>)) {
        if (n > MAX_EXPANDED_NODES) break;
        if (++chain > MAX_REF_CHAIN) n = Infinity;
        else n += size(target);
        chain--;
      }
    walking.delete(v);
    expanded.set(v, n);
    return n;
  };
  if (size(root) > MAX_EXPANDED_NODES)
    return `more than ${MAX_EXPANDED_NODES} schema values once its $refs are followed, or $refs nested more than ${MAX_REF_CHAIN} deep`;
  return inPlaceCycle(root, expanded.keys()) ? 'a $ref cycle that applies to the same value without descending into it' : undefined;
}

/** The schemas a `$ref`-like keyword of `node` names inside `root` (JSON pointers, `#` and `#/...`). */
function* refTargets(root: Record<string, unknown>, node: Record<string, unknown>): Generator<object> {
  for (const k of REF_KEYWORDS) {
    const ref = Object.hasOwn(node, k) ? node[k] : undefined;
    const target = typeof ref === 'string' ? resolvePointer(root, ref) : undefined;
    if (target) yield target;
  }
}

/** `#/a/b~1c` inside root; undefined for anything else (an anchor, another document: ajv reports those). */
function resolvePointer(root: Record<string, unknown>, ref: string): object | undefined {
  if (ref === '#') return root;
  if (!ref.startsWith('#/')) return undefined;
  let at: unknown = root;
  for (const raw of ref.slice(2).split('/')) {
    let key: string;
    try {
      key = decodeURIComponent(raw).replace(/~1/g, '/').replace(/~0/g, '~');
    } catch {
      return undefined;
    }
    if (typeof at !== 'object' || at === null || !Object.hasOwn(at, key)) return undefined;
    at = (at as Record<string, unknown>)[key];
  }
  return typeof at === 'object' && at !== null ? at : undefined;
}

/** The schemas that apply to the same value as `node`: its in-place applicators and what its `$ref`s name. */
function inPlaceNext(root: Record<string, unknown>, node: object): object[] {
  if (Array.isArray(node)) return [];
  const n = node as Record<string, unknown>;
  const out: object[] = [...refTargets(root, n)];
  const push = (v: unknown) => typeof v === 'object' && v !== null && !Array.isArray(v) && out.push(v);
  for (const k of IN_PLACE_LISTS) if (Object.hasOwn(n, k) && Array.isArray(n[k])) (n[k] as unknown[]).forEach(push);
  for (const k of IN_PLACE_ONE) if (Object.hasOwn(n, k)) push(n[k]);
  const dependent = Object.hasOwn(n, 'dependentSchemas') ? n.dependentSchemas : undefined;
  if (typeof dependent === 'object' && dependent !== null) Object.values(dependent).forEach(push);
  return out;
}

/** A cycle among `nodes` along in-place edges (iterative depth-first search, three colours). */
function inPlaceCycle(root: Record<string, unknown>, nodes: Iterable<object>): boolean {
  const done = new Set<object>();
  const open = new Set<object>();
  for (const start of nodes) {
    if (done.has(start)) continue;
    const stack: Array<{ node: object; next: object[]; i: number }> = [{ node: start, next: inPlaceNext(root, start), i: 0 }];
    open.add(start);
    while (stack.length > 0) {
      const top = stack[stack.length - 1]!;
      if (top.i === top.next.length) {
        stack.pop();
        open.delete(top.node);
        done.add(top.node);
        continue;
      }
      const child = top.next[top.i++]!;
      if (open.has(child)) return true;
      if (done.has(child)) continue;
      open.add(child);
      stack.push({ node: child, next: inPlaceNext(root, child), i: 0 });
    }
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
