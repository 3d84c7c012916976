import type { CallToolResult, Tool } from '@modelcontextprotocol/client';
import { z } from 'zod';
import { cleanPart } from './names.js';
import { guardedRequest, SsrfError } from './ssrf.js';

/**
 * An OpenAPI 3.0/3.1 JSON document as tools: one per operation. Name: `operationId`, else `{method}_{path}`
 * cleaned. One input schema merging path, query and header parameters and the JSON body's properties, with
 * their `required`. Only local `#/components/...` refs are followed (no network, no files), with a depth cap.
 */
const METHODS = ['get', 'put', 'post', 'delete', 'patch', 'head', 'options'] as const;
type Method = (typeof METHODS)[number];

const Param = z
  .object({
    name: z.string().min(1).max(256),
    in: z.enum(['path', 'query', 'header', 'cookie']),
    required: z.boolean().optional(),
    description: z.string().optional(),
    schema: z.record(z.string(), z.unknown()).optional(),
  })
  .loose();
const Operation = z
  .object({
    operationId: z.string().max(256).optional(),
    summary: z.string().optional(),
    description: z.string().optional(),
    parameters: z.array(z.unknown()).optional(),
    requestBody: z.unknown().optional(),
  })
  .loose();
const Spec = z
  .object({
    openapi: z.string().regex(/^3\.[01]\./, 'only OpenAPI 3.0 and 3.1 are supported'),
    paths: z.record(z.string(), z.record(z.string(), z.unknown())),
    components: z.record(z.string(), z.unknown()).optional(),
  })
  .loose();

interface OpTarget {
  method: Method;
  path: string;
  pathParams: string[];
  queryParams: string[];
  headerParams: string[];
  /** Body: properties spread into the arguments (object body), or one `body` argument. */
  body: 'none' | 'spread' | 'whole';
  bodyProps: string[];
}

export interface OpenApiTool {
  tool: Tool;
  op: OpTarget;
}

const MAX_REF_DEPTH = 32;
const MAX_OPERATIONS = 1024;

export function toolsFromOpenApi(doc: Record<string, unknown>): OpenApiTool[] {
  const parsed = Spec.safeParse(doc);
  if (!parsed.success) throw new Error(`not an OpenAPI 3.0/3.1 document: ${parsed.error.issues[0]?.path.join('.')} ${parsed.error.issues[0]?.message}`);
  const spec = parsed.data;
  const deref = (v: unknown, depth = 0): unknown => {
    if (depth > MAX_REF_DEPTH) throw new Error('$ref nesting too deep');
    if (Array.isArray(v)) return v.map((x) => deref(x, depth + 1));
    if (typeof v !== 'object' || v === null) return v;
    const o = v as Record<string, unknown>;
    if (typeof o['$ref'] === 'string') {
      const ref = o['$ref'];
      if (!ref.startsWith('#/')) throw new Error(`only local $refs are supported (got ${ref.slice(0, 100)})`);
      let node: unknown = spec;
      for (const part of ref.slice(2).split('/')) {
        const key = part.replace(/~1/g, '/').replace(/~0/g, '~');
        node = typeof node === 'object' && node !== null ? (node as Record<string, unknown>)[key] : undefined;
      }
      if (node === undefined) throw new Error(`unresolved $ref ${ref}`);
      return deref(node, depth + 1);
    }
    const out: Record<string, unknown> = {};
    for (const [k, x] of Object.entries(o)) out[k] = deref(x, depth + 1);
    return out;
  };

  const tools: OpenApiTool[] = [];
  for (const [path, item] of Object.entries(spec.paths)) {
    const shared = Array.isArray(item['parameters']) ? item['parameters'] : [];
    for (const method of METHODS) {
      if (!(method in item)) continue;
      if (tools.length >= MAX_OPERATIONS) throw new Error(`more than ${MAX_OPERATIONS} operations`);
      const op = Operation.parse(deref(item[method]));
      const properties: Record<string, unknown> = {};
      const required = new Set<string>();
      const target: OpTarget = { method, path, pathParams: [], queryParams: [], headerParams: [], body: 'none', bodyProps: [] };
      const params = new Map<string, z.infer<typeof Param>>();
      for (const raw of [...shared, ...(op.parameters ?? [])]) {
        const p = Param.parse(deref(raw));
        params.set(`${p.in}:${p.name}`, p);
      }
      for (const p of params.values()) {
        if (p.in === 'cookie') continue;
        properties[p.name] = { ...(p.schema ?? { type: 'string' }), ...(p.description ? { description: p.description } : {}) };
        if (p.required || p.in === 'path') required.add(p.name);
        (p.in === 'path' ? target.pathParams : p.in === 'query' ? target.queryParams : target.headerParams).push(p.name);
      }
      const body = op.requestBody as { required?: boolean; content?: Record<string, { schema?: Record<string, unknown> }> } | undefined;
      const json = body?.content?.['application/json'] ?? Object.entries(body?.content ?? {}).find(([t]) => /json/.test(t))?.[1];
      if (json?.schema) {
        const s = json.schema;
        const props = s['type'] === 'object' || s['properties'] ? ((s['properties'] as Record<string, unknown> | undefined) ?? {}) : undefined;
        if (props && !Object.keys(props).some((k) => k in properties)) {
          target.body = 'spread';
          target.bodyProps = Object.keys(props);
          Object.assign(properties, props);
          if (body?.required !== false) for (const r of (s['required'] as string[] | undefined) ?? []) required.add(r);
        } else {
          target.body = 'whole';
          properties['body'] = s;
          if (body?.required) required.add('body');
        }
      }
      const name = cleanPart(op.operationId ?? `${method}_${path.replace(/^\//, '').replace(/[{}]/g, '')}`).slice(0, 128) || `${method}_root`;
      const description = [op.summary, op.description].filter(Boolean).join('\n\n') || `${method.toUpperCase()} ${path}`;
      const inputSchema = { type: 'object', properties } as Tool['inputSchema'];
      if (required.size) inputSchema.required = [...required];
      tools.push({ tool: { name, description, inputSchema, annotations: { readOnlyHint: method === 'get' || method === 'head' } }, op: target });
    }
  }
  const names = new Set<string>();
  for (const t of tools) {
    if (names.has(t.tool.name)) throw new Error(`two operations are both named "${t.tool.name}"; give them distinct operationIds`);
    names.add(t.tool.name);
  }
  return tools;
}

export interface OpenApiCallOptions {
  baseUrl: string;
  headers: Record<string, string>;
  timeoutMs: number;
  maxResponseBytes: number;
  allowPrivateNetwork: boolean;
  signal?: AbortSignal;
}

/** Run one operation. Any non-2xx answer is a tool result with `isError: true` and the status. */
export async function callOpenApi(t: OpenApiTool, args: Record<string, unknown>, o: OpenApiCallOptions): Promise<CallToolResult> {
  const { op } = t;
  let path = op.path;
  for (const p of op.pathParams) {
    const v = args[p];
    if (v === undefined || v === null) return errorResult(`missing path parameter "${p}"`);
    path = path.replaceAll(`{${p}}`, encodeURIComponent(String(v)));
  }
  const url = new URL(o.baseUrl.replace(/\/+$/, '') + path);
  for (const q of op.queryParams) {
    const v = args[q];
    if (v === undefined || v === null) continue;
    if (Array.isArray(v)) for (const x of v) url.searchParams.append(q, String(x));
    else url.searchParams.set(q, typeof v === 'object' ? JSON.stringify(v) : String(v));
  }
  const headers: Record<string, string> = { accept: 'application/json', ...o.headers };
  for (const h of op.headerParams) if (args[h] !== undefined) headers[h.toLowerCase()] = String(args[h]).replace(/[\r\n]/g, ' ');
  let body: string | undefined;
  if (op.body === 'spread') {
    const b: Record<string, unknown> = {};
    for (const k of op.bodyProps) if (args[k] !== undefined) b[k] = args[k];
    body = JSON.stringify(b);
  } else if (op.body === 'whole' && args['body'] !== undefined) body = JSON.stringify(args['body']);
  if (body !== undefined) headers['content-type'] = 'application/json';
  try {
    const res = await guardedRequest(url, {
      method: op.method.toUpperCase(),
      headers,
      ...(body !== undefined ? { body } : {}),
      timeoutMs: o.timeoutMs,
      maxResponseBytes: o.maxResponseBytes,
      allowPrivateNetwork: o.allowPrivateNetwork,
      ...(o.signal ? { signal: o.signal } : {}),
    });
    const text = res.body.toString('utf8') + (res.truncated ? `\n[truncated at ${o.maxResponseBytes} bytes]` : '');
    const ok = res.status >= 200 && res.status < 300;
    const result: CallToolResult = {
      content: [{ type: 'text', text: ok ? text || `${res.status}` : `HTTP ${res.status}${statusHint(res.status)}${text ? `: ${text.slice(0, 2000)}` : ''}` }],
    };
    if (!ok) result.isError = true;
    if (ok && /json/.test(res.headers['content-type'] ?? '') && !res.truncated) {
      try {
        const v = JSON.parse(text) as unknown;
        if (typeof v === 'object' && v !== null && !Array.isArray(v)) result.structuredContent = v as CallToolResult['structuredContent'];
      } catch {
        /* text stays text */
      }
    }
    result._meta = { 'voxgate/httpStatus': res.status };
    return result;
  } catch (e) {
    if (e instanceof SsrfError) return errorResult(e.message);
    return errorResult(`the API at ${url.origin} could not be reached: ${(e as Error).message}`);
  }
}

function statusHint(status: number): string {
  if (status === 401) return ' (unauthorized: the token is missing, invalid or expired)';
  if (status === 403) return ' (forbidden: the token lacks permission)';
  if (status === 404) return ' (not found)';
  if (status === 429) return ' (rate limited: try again later)';
  if (status >= 500) return ' (the API failed)';
  return '';
}

function errorResult(message: string): CallToolResult {
  return { content: [{ type: 'text', text: message }], isError: true };
}
