/**
 * Config errors are printed to a terminal and to container logs: they must never carry a secret. Three
 * ways one could get in, each closed here: a secret used as a record key (an API key in `apiKeyTenants`)
 * lands in the path; JSON.parse quotes the text it failed on; and any message may echo a value.
 */

import { closest, distance } from 'fastest-levenshtein';
import type { z } from 'zod';
import { parseKeyTenants } from './api/config.js';

const REDACTED = '<redacted>';
/** Shorter strings are not masked: they would mangle ordinary words, and no accepted secret is that short. */
const MIN_MASKED_LENGTH = 6;

/** Top-level config paths whose record keys are secrets: the key is shown by position, never by value. */
const SECRET_KEYED = new Set(['apiKeyTenants']);

/** An issue path for people: `apiKeyTenants[entry 2]` instead of `apiKeyTenants.<the API key>`. */
export function safePath(path: readonly PropertyKey[], input: Record<string, unknown>): string {
  const head = String(path[0] ?? '');
  if (SECRET_KEYED.has(head) && path.length > 1) {
    const record = parseKeyTenants(input[head]);
    const keys = typeof record === 'object' && record !== null ? Object.keys(record) : [];
    const at = keys.indexOf(String(path[1]));
    return [`${head}[entry ${at >= 0 ? at + 1 : '?'}]`, ...path.slice(2).map(String)].join('.');
  }
  return path.map(String).join('.') || '(root)';
}

/** JSON.parse's message without the input it may quote (V8: `Unexpected token 'x', "<text>" is not valid JSON`). */
export function jsonErrorWithoutInput(e: unknown): string {
  return stripJsonSnippet(e instanceof Error ? e.message : String(e));
}

function stripJsonSnippet(message: string): string {
  // V8 quotes the text around the error, maybe cut short: `..."apiKeys": api-key-th"... is not valid JSON`.
  return message.replace(/(?:\.\.\.)?"[\s\S]*"(?:\.\.\.)? is not valid JSON/g, '(text not shown) is not valid JSON');
}

/** Every secret value the raw configuration input carries (API keys, device secret and tokens, tenant keys, metrics key). */
export function secretValues(input: Record<string, unknown>): string[] {
  const out: string[] = [];
  const add = (v: unknown) => {
    if (typeof v === 'string') for (const s of v.split(',')) if (s.trim().length >= MIN_MASKED_LENGTH) out.push(s.trim());
    if (Array.isArray(v)) for (const x of v) add(x);
  };
  add(input['apiKeys']);
  add(input['deviceTokens']);
  add(input['deviceSecret']);
  const tenants = parseKeyTenants(input['apiKeyTenants']);
  if (typeof tenants === 'object' && tenants !== null) add(Object.keys(tenants));
  const metrics = input['metrics'];
  if (typeof metrics === 'object' && metrics !== null) add((metrics as Record<string, unknown>)['key']);
  const upstream = (input['voice'] as { upstream?: Record<string, unknown> } | undefined)?.upstream;
  if (typeof upstream === 'object' && upstream !== null) {
    add(upstream['token']);
    add(upstream['hmacSecret']);
  }
  // Longest first, so a secret that contains another is masked whole.
  return [...new Set(out)].sort((a, b) => b.length - a.length);
}

/** The problem text with every secret value replaced, and no quoted JSON text (it may come from a file we don't know). */
export function redactProblem(problem: string, secrets: readonly string[]): string {
  let out = stripJsonSnippet(problem);
  for (const s of secrets) out = out.split(s).join(REDACTED);
  return out;
}

/**
 * One problem per misspelled or unknown key (`http.prot: unknown setting; did you mean "port"?`): a
 * strict schema refuses them instead of ignoring them silently, and the closest known key is suggested.
 */
export function unknownKeyProblems(schema: z.ZodType, path: readonly PropertyKey[], keys: readonly string[]): string[] {
  const known = knownKeysAt(schema, path);
  return keys.map((key) => {
    const near = known.length ? closest(key, known) : undefined;
    const hint =
      near !== undefined && distance(key.toLowerCase(), near.toLowerCase()) <= Math.max(2, Math.floor(near.length / 3)) ? `; did you mean "${near}"?` : '';
    return `${[...path.map(String), key].join('.')}: unknown setting${hint}`;
  });
}

/** The keys an object schema accepts at `path` (through defaults, optionals, preprocessing and lists). */
function knownKeysAt(schema: z.ZodType, path: readonly PropertyKey[]): string[] {
  let node: z.core.$ZodType | undefined = schema;
  const rest = [...path];
  while (node) {
    const def = node._zod.def as unknown as Record<string, unknown> & { type: string };
    if (def.type === 'object') {
      const shape = def['shape'] as Record<string, z.core.$ZodType>;
      if (rest.length === 0) return Object.keys(shape);
      node = shape[String(rest.shift())];
    } else if (def.type === 'array') {
      if (typeof rest[0] === 'number') rest.shift();
      node = def['element'] as z.core.$ZodType;
    } else if (def.type === 'pipe') node = def['out'] as z.core.$ZodType;
    else if ('innerType' in def) node = def['innerType'] as z.core.$ZodType;
    else return [];
  }
  return [];
}
