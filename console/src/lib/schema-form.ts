/**
 * A tool's inputSchema (JSON Schema from a device or server: untrusted data) turned into form fields,
 * and the form's values turned back into arguments. Only what a form can show is read; anything else
 * (nested objects, arrays, unions) becomes a JSON field. Patterns are never compiled here: a schema's
 * regular expression would run on the browser's backtracking engine; the gateway checks them on RE2.
 */
export type FieldKind = 'string' | 'number' | 'integer' | 'boolean' | 'enum' | 'json';

export interface Field {
  name: string;
  kind: FieldKind;
  required: boolean;
  description?: string;
  minimum?: number;
  maximum?: number;
  minLength?: number;
  maxLength?: number;
  options?: Array<string | number | boolean>;
  default?: unknown;
}

/** More fields than this is not a form a person fills in; the rest go in as JSON. */
const MAX_FIELDS = 64;
const MAX_OPTIONS = 200;

export function fieldsOf(schema: unknown): Field[] {
  if (!isObject(schema) || !isObject(schema['properties'])) return [];
  const required = new Set(Array.isArray(schema['required']) ? schema['required'].filter((r): r is string => typeof r === 'string') : []);
  return Object.entries(schema['properties'])
    .slice(0, MAX_FIELDS)
    .map(([name, prop]) => fieldOf(name.slice(0, 128), isObject(prop) ? prop : {}, required.has(name)));
}

function fieldOf(name: string, p: Record<string, unknown>, required: boolean): Field {
  const f: Field = { name, kind: kindOf(p), required };
  if (typeof p['description'] === 'string') f.description = p['description'].slice(0, 1000);
  for (const k of ['minimum', 'maximum', 'minLength', 'maxLength'] as const) if (typeof p[k] === 'number' && Number.isFinite(p[k])) f[k] = p[k];
  if (f.kind === 'enum') f.options = (p['enum'] as unknown[]).filter(isScalar).slice(0, MAX_OPTIONS);
  if ('default' in p) f.default = p['default'];
  return f;
}

function kindOf(p: Record<string, unknown>): FieldKind {
  if (Array.isArray(p['enum']) && p['enum'].length > 0 && p['enum'].every(isScalar)) return 'enum';
  const t = p['type'];
  if (t === 'string' || t === 'number' || t === 'integer' || t === 'boolean') return t;
  return 'json';
}

/** The text an input starts with: the schema's default, else empty. */
export function initialValue(f: Field): string | boolean {
  if (f.kind === 'boolean') return f.default === true;
  if (f.default === undefined) return '';
  return f.kind === 'json' || f.kind === 'enum' ? JSON.stringify(f.default) : String(f.default);
}

export type Collected = { ok: true; args: Record<string, unknown> } | { ok: false; field: string; message: string };

/** Form values to tool arguments; empty optional fields are left out (so the device's defaults apply). */
export function collectArgs(fields: readonly Field[], values: Record<string, string | boolean>): Collected {
  const args: Record<string, unknown> = {};
  for (const f of fields) {
    const raw = values[f.name];
    if (f.kind === 'boolean') {
      args[f.name] = raw === true;
      continue;
    }
    const text = typeof raw === 'string' ? raw : '';
    if (text === '') {
      if (f.required) return { ok: false, field: f.name, message: `${f.name} is required` };
      continue;
    }
    if (f.kind === 'string') args[f.name] = text;
    else if (f.kind === 'number' || f.kind === 'integer') {
      const n = Number(text);
      if (!Number.isFinite(n) || (f.kind === 'integer' && !Number.isInteger(n)))
        return { ok: false, field: f.name, message: `${f.name} must be ${f.kind === 'integer' ? 'a whole number' : 'a number'}` };
      if (f.minimum !== undefined && n < f.minimum) return { ok: false, field: f.name, message: `${f.name} must be at least ${f.minimum}` };
      if (f.maximum !== undefined && n > f.maximum) return { ok: false, field: f.name, message: `${f.name} must be at most ${f.maximum}` };
      args[f.name] = n;
    } else {
      // enum options and JSON fields hold JSON text, so numbers and booleans keep their type.
      try {
        args[f.name] = JSON.parse(text) as unknown;
      } catch {
        return { ok: false, field: f.name, message: `${f.name} is not valid JSON` };
      }
    }
  }
  return { ok: true, args };
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
const isScalar = (v: unknown): v is string | number | boolean => typeof v === 'string' || typeof v === 'number' || typeof v === 'boolean';
