/** JSON values as they come off the wire. */
export type JsonPrimitive = string | number | boolean | null;
export type JsonValue = JsonPrimitive | JsonValue[] | { [key: string]: JsonValue };
export type JsonObject = { [key: string]: JsonValue };

export function isJsonObject(v: unknown): v is JsonObject {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** JSON.parse that reports failure instead of throwing. */
export function tryParseJson(text: string): { ok: true; value: unknown } | { ok: false; error: string } {
  try {
    return { ok: true, value: JSON.parse(text) as unknown };
  } catch (e) {
    return { ok: false, error: e instanceof Error ? e.message : String(e) };
  }
}

/** Bounds checked on a JSON text before it is parsed (untrusted input). */
export interface JsonLimits {
  /** Deepest nesting of objects and arrays accepted. */
  maxDepth: number;
  /** Largest text accepted, in UTF-8 bytes. */
  maxBytes: number;
}

/** The gateway's defaults for device frames (config `frames.*` overrides them). */
export const DEFAULT_JSON_LIMITS: Readonly<JsonLimits> = { maxDepth: 64, maxBytes: 64 * 1024 };

export type JsonBoundsProblem = { ok: false; reason: 'too_deep' | 'too_large'; detail: string };

/**
 * One O(n) pass over the text, before JSON.parse: nesting depth outside strings and the UTF-8 size.
 * It does not check that the text is JSON (JSON.parse does); it only guarantees that whatever parses
 * from it is no deeper than `maxDepth`, so later recursion over it (stringify, validators) is safe.
 */
export function checkJsonBounds(text: string, limits: JsonLimits): { ok: true } | JsonBoundsProblem {
  // Every UTF-16 unit is at least one UTF-8 byte: a text this long is too large without counting.
  if (text.length > limits.maxBytes) return tooLarge(limits);
  // The usual frame: short enough that it fits whatever it holds (a UTF-16 unit is at most 3 UTF-8 bytes), with no
  // more brackets in all than the depth allows (nesting counts only some of them). Counted by the engine's own
  // search rather than a loop over every character (~0.8 µs per device reply); anything else is scanned in full.
  if (text.length * 3 <= limits.maxBytes && fewBrackets(text, limits.maxDepth)) return OK;
  let depth = 0;
  let bytes = 0;
  let inString = false;
  let escaped = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    // UTF-8 size: a surrogate pair is 4 bytes, i.e. 2 per UTF-16 unit.
    bytes += c < 0x80 ? 1 : c < 0x800 || (c >= 0xd800 && c <= 0xdfff) ? 2 : 3;
    if (inString) {
      if (escaped) escaped = false;
      else if (c === 0x5c /* \ */) escaped = true;
      else if (c === 0x22 /* " */) inString = false;
    } else if (c === 0x22) inString = true;
    else if (c === 0x7b /* { */ || c === 0x5b /* [ */) {
      if (++depth > limits.maxDepth) return { ok: false, reason: 'too_deep', detail: `nested deeper than ${limits.maxDepth} levels` };
    } else if (c === 0x7d /* } */ || c === 0x5d /* ] */) depth--;
  }
  return bytes > limits.maxBytes ? tooLarge(limits) : OK;
}

const OK = { ok: true } as const;

/** At most `max` opening brackets (`{` and `[`, in strings or not) in `text`. */
function fewBrackets(text: string, max: number): boolean {
  let n = 0;
  for (let i = text.indexOf('{'); i >= 0; i = text.indexOf('{', i + 1)) if (++n > max) return false;
  for (let i = text.indexOf('['); i >= 0; i = text.indexOf('[', i + 1)) if (++n > max) return false;
  return true;
}

function tooLarge(limits: JsonLimits): JsonBoundsProblem {
  return { ok: false, reason: 'too_large', detail: `larger than ${limits.maxBytes} bytes (UTF-8)` };
}

/** JSON.stringify that never throws (cycles, BigInt, exotic depth): `fallback` instead. */
export function safeJsonText(value: unknown, fallback = '[unserializable]'): string {
  try {
    return JSON.stringify(value) ?? fallback;
  } catch {
    return fallback;
  }
}
