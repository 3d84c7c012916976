import { Ajv, type ErrorObject, type ValidateFunction } from 'ajv';

/**
 * Tool arguments are checked against the device's `inputSchema` before anything is sent. Devices of
 * one firmware share schemas, so compiled validators are cached by schema text (bounded).
 */
const ajv = new Ajv({ strict: false, allErrors: true, validateFormats: false });
const MAX_CACHED = 4096;
const cache = new Map<string, ValidateFunction | null>();

export interface ArgumentProblem {
  argument: string;
  message: string;
}

/** Undefined when the arguments fit (or the schema cannot be compiled: the device then judges). */
export function checkArguments(schemaKey: string, schema: Record<string, unknown>, args: Record<string, unknown>): ArgumentProblem[] | undefined {
  const validate = validatorFor(schemaKey, schema);
  if (!validate || validate(args)) return undefined;
  return (validate.errors ?? []).slice(0, 10).map(describe);
}

function validatorFor(key: string, schema: Record<string, unknown>): ValidateFunction | null {
  const hit = cache.get(key);
  if (hit !== undefined) return hit;
  let fn: ValidateFunction | null;
  try {
    fn = ajv.compile({ ...schema, $schema: undefined, $id: undefined });
  } catch {
    fn = null;
  }
  if (cache.size >= MAX_CACHED) cache.delete(cache.keys().next().value!);
  cache.set(key, fn);
  return fn;
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
