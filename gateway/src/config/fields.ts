import { z } from 'zod';

/**
 * The field types every config slice shares, defined once, and the way a field declares the environment
 * variables that set it (`env(...)`): the root derives its table of variables, and the README's, from
 * these declarations. A leaf module: it imports nothing from the gateway.
 */

export const Port = z.coerce.number().int().min(0).max(65535);
/** A duration in milliseconds, at least 1, at most `max` (an hour unless said). */
export const Ms = (def: number, max = 3_600_000) => z.coerce.number().int().min(1).max(max).default(def);
/** A whole number in [min, max] (a size in bytes, seconds, characters…), `def` when unset. */
export const Int = (min: number, max: number, def: number) => z.coerce.number().int().min(min).max(max).default(def);
/** A count of things from 1 up to ten million. */
export const Count = (def: number) => z.coerce.number().int().min(1).max(10_000_000).default(def);
/** A list in the file, or `a,b,c` in a variable. */
export const Csv = z.preprocess(
  (v) =>
    typeof v === 'string'
      ? v
          .split(',')
          .map((s) => s.trim())
          .filter(Boolean)
      : v,
  z.array(z.string().min(1)),
);
/** `true`/`false`, or `1`/`0` in a variable. */
export const Bool = z.preprocess((v) => (v === 'true' || v === '1' ? true : v === 'false' || v === '0' ? false : v), z.boolean());
export const HttpUrl = z.url({ protocol: /^https?$/ });
/** The one tenant rule: API key tenants, hosted servers' `tenants`, the voice relay's hub tenant. */
export const TENANT_PATTERN = /^[A-Za-z0-9_.-]{1,64}$/;
export const Tenant = z.string().regex(TENANT_PATTERN, 'a tenant is 1-64 letters, digits, _ . -');

/** For cross-field rules that must run even when other fields failed (so one start lists every problem). */
export const always = () => true;

export const isPlain = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

export interface SettingDoc {
  /** Environment variables that set the field; when several are set, the last one listed wins. */
  env: readonly string[];
  /** One line for the README's configuration table and `.env.example`. */
  doc?: string;
  /** What the table shows as the default when the value itself does not say it (`generated once`). */
  shown?: string;
}

const docs = new WeakMap<z.core.$ZodType, SettingDoc>();

/** Declare the variable(s) that set this field, next to it: `port: env('GATEWAY_HTTP_PORT', Port.default(8000), 'listen port')`. */
export function env<T extends z.core.$ZodType>(names: string | readonly string[], schema: T, doc?: string, shown?: string): T {
  docs.set(schema, { env: typeof names === 'string' ? [names] : names, ...(doc !== undefined ? { doc } : {}), ...(shown !== undefined ? { shown } : {}) });
  return schema;
}

/** Document a field that only the JSON file sets. */
export function documented<T extends z.core.$ZodType>(schema: T, doc: string, shown?: string): T {
  return env([], schema, doc, shown);
}

export interface SettingEntry extends SettingDoc {
  path: readonly string[];
}

/** Every declared setting under `schema`, in schema order (through defaults, optionals, preprocessing and lists). */
export function declaredSettings(schema: z.core.$ZodType, path: readonly string[] = []): SettingEntry[] {
  const out: SettingEntry[] = [];
  let node: z.core.$ZodType | undefined = schema;
  let found = false;
  while (node) {
    const d = docs.get(node);
    if (d && !found && path.length) {
      out.push({ path, ...d });
      found = true;
    }
    const def = node._zod.def as unknown as Record<string, unknown> & { type: string };
    if (def.type === 'object') {
      for (const [key, child] of Object.entries(def['shape'] as Record<string, z.core.$ZodType>)) out.push(...declaredSettings(child, [...path, key]));
      return out;
    }
    if (def.type === 'array') node = def['element'] as z.core.$ZodType;
    else if (def.type === 'pipe') node = def['out'] as z.core.$ZodType;
    else if ('innerType' in def) node = def['innerType'] as z.core.$ZodType;
    else node = undefined;
  }
  return out;
}
