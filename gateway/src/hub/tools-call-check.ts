/**
 * `tools/call` checked by hand on the MCP SDK's 2025-11-25 wire codec, for the hub's client (each upstream
 * result) and the /mcp facade's server (each request and result). The SDK checks these with zod schemas whose
 * content-block union and loose objects were ~7 % of /mcp's CPU per call (issue 21). The check here is a fast
 * path, not a replacement: it answers only for the common shapes (text blocks, plain records, no tasks, no
 * annotations) and returns exactly the value the SDK's schema would (same keys in the same order, unknown keys
 * of strict objects dropped, records copied); anything else, valid or not, goes to the SDK's own schema, so
 * every refusal keeps its message. `test/hub/tools-call-check.test.ts` compares both on valid and hostile input.
 * It also remembers the codec's answer to the "is this method in the era" probe the SDK makes before each request.
 */

/** The part of the SDK's wire codec this wraps (its 2025-11-25 era object; the era codecs are module singletons). */
export interface ToolsCallCodec {
  era: string;
  validateRequest(method: string, raw: unknown): CodecOutcome;
  validateResult(method: string, raw: unknown): CodecOutcome;
}
type CodecOutcome = { ok: true; value: unknown } | { ok: false; reason: string; message?: string };

const ERA = '2025-11-25';
const RELATED_TASK = 'io.modelcontextprotocol/related-task';
const FAST = Symbol.for('voxgate.tools-call-fast-path');

type Obj = Record<string, unknown>;

/** A plain object as JSON.parse (or an object literal) makes it. */
function plain(v: unknown): v is Obj {
  if (typeof v !== 'object' || v === null) return false;
  return Object.getPrototypeOf(v) === Object.prototype;
}

/** `z.record(z.string(), z.unknown())`'s output: a shallow copy. Undefined for a `__proto__` key (zod drops it). */
function copyRecord(o: Obj): Obj | undefined {
  const out: Obj = {};
  for (const k of Object.keys(o)) {
    if (k === '__proto__') return undefined;
    out[k] = o[k];
  }
  return out;
}

/**
 * `_meta` of a request or result (`z.looseObject({ progressToken?: string | safe int, [RELATED_TASK]?: … })`):
 * the token first, then every other key in order. Undefined when the SDK's schema should decide.
 */
function copyMeta(m: unknown): Obj | undefined {
  if (!plain(m) || RELATED_TASK in m) return undefined;
  const out: Obj = {};
  if ('progressToken' in m) {
    const t = m['progressToken'];
    if (typeof t !== 'string' && !Number.isSafeInteger(t)) return undefined;
    out['progressToken'] = t;
  }
  for (const k of Object.keys(m)) {
    if (k === '__proto__') return undefined;
    if (k !== 'progressToken') out[k] = m[k];
  }
  return out;
}

/** A text block (`{ type: 'text', text, _meta? }`, no other key) as the content-block union's first branch outputs it. */
function textBlock(b: unknown): Obj | undefined {
  if (!plain(b) || b['type'] !== 'text' || typeof b['text'] !== 'string') return undefined;
  let meta: Obj | undefined;
  for (const k of Object.keys(b)) {
    if (k === 'type' || k === 'text') continue;
    if (k !== '_meta' || !plain(b['_meta'])) return undefined;
    meta = copyRecord(b['_meta']);
    if (!meta) return undefined;
  }
  return meta ? { type: 'text', text: b['text'], _meta: meta } : { type: 'text', text: b['text'] };
}

const RESULT_KEYS = new Set(['_meta', 'content', 'structuredContent', 'isError']);

/**
 * A `tools/call` result as the SDK's `CallToolResultWireSchema` outputs it (`_meta`, `content`,
 * `structuredContent`, `isError`, then any other key as sent), or undefined: let the schema decide.
 */
export function fastCallToolResult(raw: unknown): Obj | undefined {
  if (!plain(raw) || !Array.isArray(raw['content'])) return undefined;
  const out: Obj = {};
  if ('_meta' in raw) {
    const meta = copyMeta(raw['_meta']);
    if (!meta) return undefined;
    out['_meta'] = meta;
  }
  const src = raw['content'] as unknown[];
  const content = new Array<Obj>(src.length);
  for (let i = 0; i < src.length; i++) {
    const block = textBlock(src[i]);
    if (!block) return undefined;
    content[i] = block;
  }
  out['content'] = content;
  if ('structuredContent' in raw) {
    const sc = raw['structuredContent'];
    const copy = plain(sc) ? copyRecord(sc) : undefined;
    if (!copy) return undefined;
    out['structuredContent'] = copy;
  }
  if ('isError' in raw) {
    if (typeof raw['isError'] !== 'boolean') return undefined;
    out['isError'] = raw['isError'];
  }
  for (const k of Object.keys(raw)) {
    if (k === '__proto__') return undefined;
    if (!RESULT_KEYS.has(k)) out[k] = raw[k];
  }
  return out;
}

/**
 * A `tools/call` request as the SDK's `CallToolRequestSchema` outputs it (`{ method, params: { _meta?, name,
 * arguments? } }`: the envelope's other keys and unknown params are dropped, as its strict objects do), or
 * undefined: let the schema decide (a task, an odd `_meta`, a bad name or arguments).
 */
export function fastCallToolRequest(raw: unknown): Obj | undefined {
  if (!plain(raw) || raw['method'] !== 'tools/call') return undefined;
  const p = raw['params'];
  if (!plain(p) || typeof p['name'] !== 'string' || 'task' in p) return undefined;
  const params: Obj = {};
  if ('_meta' in p) {
    const meta = copyMeta(p['_meta']);
    if (!meta) return undefined;
    params['_meta'] = meta;
  }
  params['name'] = p['name'];
  if ('arguments' in p) {
    const a = p['arguments'];
    const copy = plain(a) ? copyRecord(a) : undefined;
    if (!copy) return undefined;
    params['arguments'] = copy;
  }
  return { method: 'tools/call', params };
}

/**
 * Puts the fast path in front of a 2025-11-25 codec's `tools/call` checks (once per codec object; another era's
 * codec, or a codec without these functions, is left as it is). Every other method goes straight to the codec.
 */
export function speedUpToolsCall(codec: unknown): boolean {
  const c = codec as (ToolsCallCodec & { [FAST]?: true }) | undefined;
  if (!c || c.era !== ERA || typeof c.validateRequest !== 'function' || typeof c.validateResult !== 'function') return false;
  if (c[FAST]) return true;
  const { validateRequest, validateResult } = c;
  c.validateRequest = (method, raw) => {
    const value = method === 'tools/call' ? fastCallToolRequest(raw) : undefined;
    return value ? { ok: true, value } : validateRequest(method, raw);
  };
  // The SDK asks `validateResult(method, undefined)` before every request it sends, only to learn whether the
  // method is in the era (its Standard Schema adapter): a zod parse that fails with issue objects each time. The
  // answer depends on the method alone, so it is kept (for the few methods this gateway sends).
  const probes = new Map<string, CodecOutcome>();
  c.validateResult = (method, raw) => {
    if (raw === undefined) {
      let probe = probes.get(method);
      if (!probe) {
        probe = validateResult(method, raw);
        if (probes.size < 64) probes.set(method, probe);
      }
      return probe;
    }
    const value = method === 'tools/call' ? fastCallToolResult(raw) : undefined;
    return value ? { ok: true, value } : validateResult(method, raw);
  };
  c[FAST] = true;
  return true;
}

/** The wire codec of an SDK `Client` or `Server` (its protected `_wireCodec()`), if this SDK version has one. */
export function wireCodecOf(protocol: object): unknown {
  const get = (protocol as { _wireCodec?: () => unknown })._wireCodec;
  return typeof get === 'function' ? get.call(protocol) : undefined;
}
