import { createHash } from 'node:crypto';
import { createRequire } from 'node:module';
import type { JsonSchemaType, JsonSchemaValidator, jsonSchemaValidator } from '@modelcontextprotocol/client';
import { Ajv, type ErrorObject, type Options, type ValidateFunction } from 'ajv';
import { LRUCache } from 'lru-cache';
import type { RE2JS } from 're2js';
import { guardSchema, type SchemaLimits } from './untrusted-schema.js';
import { GatewayError } from '../errors.js';

export interface ArgumentProblem {
  argument: string;
  message: string;
}

export interface SchemaValidatorsOptions {
  limits: SchemaLimits;
  /** Compiled validators kept (LRU); identical schemas share one, whoever sent them. */
  maxCached: number;
  /** A `pattern` the linear engine cannot run (or that is too large): it is not enforced. */
  onUnenforcedPattern?: (reason: string) => void;
  /** Told the number of validators held after each change (a gauge). */
  onSize?: (size: number) => void;
  /** Schemas one ajv instance compiles before a new one takes over; default max(maxCached, 256). */
  compilesPerInstance?: number;
}

/** A new ajv instance compiles its meta-schema first (tens of ms): a tiny cache must not start one every few compiles. */
const MIN_COMPILES_PER_INSTANCE = 256;

/** Longest `pattern` compiled, and the most counted repetitions (`{n}`) summed over it: RE2 programs grow with both. */
export const MAX_PATTERN_LENGTH = 512;
export const MAX_PATTERN_REPEATS = 256;

type RegExpEngine = NonNullable<NonNullable<Options['code']>['regExp']>;
type RegExpLike = ReturnType<RegExpEngine>;

type Entry = ({ schema: Record<string, unknown>; validate: ValidateFunction } | { schema: Record<string, unknown>; error: string }) & {
  generation: Generation;
};

/**
 * One ajv instance and what it compiled. ajv keeps something of every compile in its instance (the
 * generated code's scope values), and `removeSchema` does not release it: only dropping the instance does.
 */
interface Generation {
  ajv: Ajv;
  compiled: number;
  /** Cache entries compiled by it and still held. */
  live: number;
}

/**
 * Compiled validators for untrusted schemas (device `inputSchema`s, hosted servers' `outputSchema`s),
 * cached by schema content (sha-256 of the sanitized JSON) in a bounded LRU. Regular expressions run
 * on RE2 (re2js, linear time), never on the backtracking RegExp engine. Also the MCP client's
 * `jsonSchemaValidator`, so upstream servers' schemas go through the same bounds and cache.
 *
 * Memory: each ajv instance compiles at most `compilesPerInstance` schemas, then a new one takes over; an
 * instance is dropped once none of its validators is cached. Entries of the instance before the previous
 * one are evicted when a new one starts (a hot schema is compiled again), so at most three instances, and
 * 3 × `compilesPerInstance` compiles, are held whatever the fleet sends.
 */
export class SchemaValidators implements jsonSchemaValidator {
  /** Newest first: the current instance, then older ones whose validators are still cached. */
  private generations: Generation[] = [];
  private readonly cache: LRUCache<string, Entry>;
  /** Schema object -> content key: a catalog's schema is hashed once, not per call. */
  private readonly keys = new WeakMap<object, string>();

  constructor(private readonly o: SchemaValidatorsOptions) {
    this.cache = new LRUCache<string, Entry>({ max: o.maxCached, dispose: (e) => this.release(e) });
    this.newGeneration();
  }

  /** The instance compiling now. */
  private get ajv(): Ajv {
    return this.generations[0]!.ajv;
  }

  private newGeneration(): void {
    // allErrors off: a validation stops at the first problem. With it on, the errors an untrusted schema collects
    // grow with the value (every element of a large array against every failing branch): memory one call can fill.
    const ajv = new Ajv({ strict: false, allErrors: false, validateFormats: false, code: { regExp: linearRegExp(this.o.onUnenforcedPattern) } });
    this.generations.unshift({ ajv, compiled: 0, live: 0 });
    // Keep the current instance and the one before; what older ones compiled is evicted, so they can go.
    const old = new Set(this.generations.slice(2));
    if (old.size) for (const k of [...this.cache.entries()].filter(([, e]) => old.has(e.generation)).map(([k]) => k)) this.cache.delete(k);
    this.generations = this.generations.filter((g, i) => i < 2 || g.live > 0);
  }

  /** An evicted validator: out of its instance's registry, and its instance dropped when it held the last one. */
  private release(e: Entry): void {
    e.generation.ajv.removeSchema(e.schema);
    if (--e.generation.live === 0 && e.generation !== this.generations[0]) this.generations = this.generations.filter((g) => g !== e.generation);
  }

  /** Validators held now (at most `maxCached`). */
  get size(): number {
    return this.cache.size;
  }

  /** The compiled validator for a schema, or why there is none (refused by the bounds, or not compilable). */
  validatorFor(schema: Record<string, unknown>): { validate: ValidateFunction } | { error: string } {
    const known = this.keys.get(schema);
    const hit = known === undefined ? undefined : this.cache.get(known);
    if (hit) return hit;
    const verdict = guardSchema(schema, this.o.limits);
    if (!verdict.ok) return { error: `schema refused: ${verdict.detail}` };
    const key = createHash('sha256').update(JSON.stringify(verdict.schema)).digest('base64url');
    this.keys.set(schema, key);
    let entry = this.cache.get(key);
    if (!entry) {
      if (this.generations[0]!.compiled >= (this.o.compilesPerInstance ?? Math.max(this.o.maxCached, MIN_COMPILES_PER_INSTANCE))) this.newGeneration();
      const generation = this.generations[0]!;
      generation.compiled++;
      generation.live++;
      try {
        entry = { schema: verdict.schema, validate: generation.ajv.compile(verdict.schema), generation };
      } catch (e) {
        entry = { schema: verdict.schema, error: `schema does not compile: ${e instanceof Error ? e.message.slice(0, 200) : 'unknown error'}`, generation };
      }
      this.cache.set(key, entry);
      this.o.onSize?.(this.cache.size);
    }
    return entry;
  }

  /**
   * Tool arguments against a device's inputSchema: undefined when they fit, or when the schema has no
   * validator (the device then judges, as it would without a gateway).
   */
  check(schema: Record<string, unknown>, args: Record<string, unknown>): ArgumentProblem[] | undefined {
    const v = this.validatorFor(schema);
    if (!('validate' in v) || v.validate(args)) return undefined;
    return (v.validate.errors ?? []).slice(0, 10).map(describe);
  }

  /** The MCP client's hook: a schema it cannot compile throws, and the client reports it for that tool only. */
  getValidator<T>(schema: JsonSchemaType): JsonSchemaValidator<T> {
    const v = this.validatorFor(schema as Record<string, unknown>);
    if (!('validate' in v)) throw new Error(v.error);
    const validate = v.validate;
    return (input: unknown) =>
      validate(input)
        ? { valid: true, data: input as T, errorMessage: undefined }
        : { valid: false, data: undefined, errorMessage: this.ajv.errorsText(validate.errors) };
  }
}

let re2js: typeof RE2JS | undefined;
/** re2js, loaded by the first schema with a `pattern` (~0.5 MiB of heap a gateway whose schemas have none never needs). */
function re2(): typeof RE2JS {
  return (re2js ??= (createRequire(import.meta.url)('re2js') as { RE2JS: typeof RE2JS }).RE2JS);
}

/** ajv's `code.regExp`: RE2 semantics and linear-time matching; a pattern RE2 refuses is not enforced. */
function linearRegExp(onUnenforced?: (reason: string) => void): RegExpEngine {
  const engine = (pattern: string): RegExpLike => {
    let re: RE2JS | undefined;
    if (pattern.length > MAX_PATTERN_LENGTH) onUnenforced?.('too_long');
    else if (countedRepeats(pattern) > MAX_PATTERN_REPEATS) onUnenforced?.('too_many_repeats');
    else
      try {
        re = re2().compile(pattern);
      } catch {
        onUnenforced?.('unsupported');
      }
    // ajv uses toString() as the key that shares one compiled pattern between schemas.
    const like: RegExpLike & { toString(): string } = { test: (s: string) => re === undefined || re.matcher(s).find(), toString: () => `re2:${pattern}` };
    return like;
  };
  // Only read for standalone code generation, which this gateway does not use.
  return Object.assign(engine, { code: 're2js' });
}

/** Sum of the numbers in `{n}`, `{n,}`, `{n,m}`: a cheap bound on the size of the compiled program. */
function countedRepeats(pattern: string): number {
  let sum = 0;
  for (const m of pattern.matchAll(/\{(\d{1,6})(?:,(\d{0,6}))?\}/g)) sum += Math.max(Number(m[1]), Number(m[2] || 0));
  return sum;
}

function describe(e: ErrorObject): ArgumentProblem {
  const base = e.instancePath.replace(/^\//, '').replace(/\//g, '.');
  if (e.keyword === 'required') {
    const missing = String((e.params as { missingProperty?: string }).missingProperty ?? '');
    return { argument: base ? `${base}.${missing}` : missing, message: 'is required' };
  }
  if (e.keyword === 'additionalProperties') {
    const extra = String((e.params as { additionalProperty?: string }).additionalProperty ?? '');
    return { argument: base ? `${base}.${extra}` : extra, message: 'is not an argument of this tool' };
  }
  if (e.keyword === 'enum') {
    const allowed = (e.params as { allowedValues?: unknown[] }).allowedValues ?? [];
    return { argument: base || '(arguments)', message: `must be one of ${allowed.map((v) => JSON.stringify(v)).join(', ')}` };
  }
  return { argument: base || '(arguments)', message: e.message ?? 'is invalid' };
}

/** The INVALID_ARGUMENTS error (422) for arguments that do not fit a tool's inputSchema: names the first problem found. */
export function invalidArguments(tool: string, problems: ArgumentProblem[]): GatewayError {
  const first = problems[0]!;
  return new GatewayError('INVALID_ARGUMENTS', `argument "${first.argument}" ${first.message}`, { tool, errors: problems });
}
