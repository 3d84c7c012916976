/**
 * A small re-implementation of how the reference firmware *reads* JSON: cJSON_Parse plus
 * cJSON_GetObjectItem. It exists so the simulator sees a frame the way the device does, quirks included:
 *
 * - `cJSON_Parse` accepts trailing garbage after the first value (`{"a":1}xyz` parses).
 * - Whitespace is any byte <= 0x20, not just the four JSON whitespace characters.
 * - Raw control characters inside strings are accepted.
 * - Strings are C strings: a NUL (raw, `\u0000`, or an invalid `\uZZZZ`, which cJSON decodes as 0) ends them.
 *   A raw NUL anywhere in the frame ends the whole input.
 * - Numbers: `-` or a digit starts one; the run of `[0-9+-eE.]` is handed to strtod, so `1.`, `-.5` and `007`
 *   are numbers. `valueint` saturates to the C int range and truncates toward zero.
 * - Objects keep duplicate keys; `getItem` returns the FIRST match, compared ASCII-case-insensitively
 *   (cJSON_GetObjectItem is the case-insensitive variant).
 * - Nesting deeper than 1000 fails.
 *
 * It is deliberately independent of the gateway's JSON handling.
 */

export type CJson =
  | { kind: 'null' }
  | { kind: 'bool'; value: boolean }
  | { kind: 'number'; value: number; valueint: number }
  | { kind: 'string'; value: string }
  | { kind: 'array'; items: CJson[] }
  | { kind: 'object'; entries: Array<[string, CJson]> };

const NESTING_LIMIT = 1000;
const INT_MAX = 2147483647;
const INT_MIN = -2147483648;

/** The C `int` cJSON stores in `valueint` for a parsed double. */
export function toCInt(n: number): number {
  if (Number.isNaN(n)) return 0;
  if (n >= INT_MAX) return INT_MAX;
  if (n <= INT_MIN) return INT_MIN;
  return Math.trunc(n) | 0;
}

class ParseError extends Error {}

class Parser {
  pos = 0;
  constructor(readonly text: string) {}

  fail(): never {
    throw new ParseError(`cJSON parse error at ${this.pos}`);
  }

  skipWs(): void {
    while (this.pos < this.text.length && this.text.charCodeAt(this.pos) <= 32) this.pos++;
  }

  value(depth: number): CJson {
    const t = this.text;
    const c = t[this.pos];
    if (t.startsWith('null', this.pos)) {
      this.pos += 4;
      return { kind: 'null' };
    }
    if (t.startsWith('false', this.pos)) {
      this.pos += 5;
      return { kind: 'bool', value: false };
    }
    if (t.startsWith('true', this.pos)) {
      this.pos += 4;
      return { kind: 'bool', value: true };
    }
    if (c === '"') return { kind: 'string', value: this.string() };
    if (c === '-' || (c !== undefined && c >= '0' && c <= '9')) return this.number();
    if (c === '[') return this.array(depth);
    if (c === '{') return this.object(depth);
    return this.fail();
  }

  number(): CJson {
    let end = this.pos;
    while (end < this.text.length && '0123456789+-eE.'.includes(this.text[end]!)) end++;
    const run = this.text.slice(this.pos, end);
    // what strtod consumes from that run
    const m = /^[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?/.exec(run);
    if (!m) return this.fail();
    this.pos += m[0].length;
    const value = Number(m[0]);
    return { kind: 'number', value, valueint: toCInt(value) };
  }

  string(): string {
    const t = this.text;
    if (t[this.pos] !== '"') return this.fail();
    // find the closing quote, skipping escaped characters
    let end = this.pos + 1;
    while (end < t.length && t[end] !== '"') {
      if (t[end] === '\\') {
        if (end + 1 >= t.length) this.fail();
        end++;
      }
      end++;
    }
    if (end >= t.length) this.fail();
    let out = '';
    let i = this.pos + 1;
    while (i < end) {
      const ch = t[i]!;
      if (ch !== '\\') {
        out += ch;
        i++;
        continue;
      }
      const esc = t[i + 1];
      switch (esc) {
        case 'b':
          out += '\b';
          i += 2;
          break;
        case 'f':
          out += '\f';
          i += 2;
          break;
        case 'n':
          out += '\n';
          i += 2;
          break;
        case 'r':
          out += '\r';
          i += 2;
          break;
        case 't':
          out += '\t';
          i += 2;
          break;
        case '"':
        case '\\':
        case '/':
          out += esc;
          i += 2;
          break;
        case 'u': {
          if (end - i < 6) this.fail();
          const first = hex4(t, i + 2);
          if (first >= 0xdc00 && first <= 0xdfff) this.fail();
          if (first >= 0xd800 && first <= 0xdbff) {
            if (end - i < 12) this.fail();
            if (t[i + 6] !== '\\' || t[i + 7] !== 'u') this.fail();
            const second = hex4(t, i + 8);
            if (second < 0xdc00 || second > 0xdfff) this.fail();
            out += String.fromCodePoint(0x10000 + (((first & 0x3ff) << 10) | (second & 0x3ff)));
            i += 12;
          } else {
            out += String.fromCharCode(first);
            i += 6;
          }
          break;
        }
        default:
          this.fail();
      }
    }
    this.pos = end + 1;
    return cString(out);
  }

  array(depth: number): CJson {
    if (depth >= NESTING_LIMIT) this.fail();
    this.pos++; // '['
    this.skipWs();
    const items: CJson[] = [];
    if (this.text[this.pos] === ']') {
      this.pos++;
      return { kind: 'array', items };
    }
    this.pos--;
    do {
      this.pos++; // '[' or ','
      this.skipWs();
      items.push(this.value(depth + 1));
      this.skipWs();
    } while (this.text[this.pos] === ',');
    if (this.text[this.pos] !== ']') this.fail();
    this.pos++;
    return { kind: 'array', items };
  }

  object(depth: number): CJson {
    if (depth >= NESTING_LIMIT) this.fail();
    this.pos++; // '{'
    this.skipWs();
    const entries: Array<[string, CJson]> = [];
    if (this.text[this.pos] === '}') {
      this.pos++;
      return { kind: 'object', entries };
    }
    this.pos--;
    do {
      this.pos++; // '{' or ','
      this.skipWs();
      const key = this.string();
      this.skipWs();
      if (this.text[this.pos] !== ':') this.fail();
      this.pos++;
      this.skipWs();
      const v = this.value(depth + 1);
      entries.push([key, v]);
      this.skipWs();
    } while (this.text[this.pos] === ',');
    if (this.text[this.pos] !== '}') this.fail();
    this.pos++;
    return { kind: 'object', entries };
  }
}

/** parse_hex4: an invalid digit makes the whole value 0 (which then ends the C string). */
function hex4(t: string, at: number): number {
  let h = 0;
  for (let k = 0; k < 4; k++) {
    const c = t[at + k] ?? '';
    if (!/^[0-9a-fA-F]$/.test(c)) return 0;
    h = (h << 4) | parseInt(c, 16);
  }
  return h;
}

function cString(s: string): string {
  const nul = s.indexOf('\0');
  return nul === -1 ? s : s.slice(0, nul);
}

/** cJSON_Parse. Returns undefined where cJSON returns NULL. */
export function cjsonParse(input: string): CJson | undefined {
  const text = cString(input.startsWith('\ufeff') ? input.slice(1) : input);
  const p = new Parser(text);
  try {
    p.skipWs();
    return p.value(0);
  } catch (e) {
    if (e instanceof ParseError || e instanceof RangeError) return undefined;
    throw e;
  }
}

function asciiLower(s: string): string {
  return s.replace(/[A-Z]/g, (c) => c.toLowerCase());
}

/** cJSON_GetObjectItem: first entry whose key matches case-insensitively (ASCII); undefined for non-objects. */
export function getItem(node: CJson | undefined, key: string): CJson | undefined {
  if (node?.kind !== 'object') return undefined;
  const k = asciiLower(key);
  for (const [name, v] of node.entries) if (asciiLower(name) === k) return v;
  return undefined;
}

/** A plain JS value for recording what the device saw (objects keep the first of duplicate keys). */
export function toPlain(node: CJson): unknown {
  switch (node.kind) {
    case 'null':
      return null;
    case 'bool':
    case 'number':
    case 'string':
      return node.value;
    case 'array':
      return node.items.map(toPlain);
    case 'object': {
      const o: Record<string, unknown> = {};
      for (const [k, v] of node.entries) {
        if (Object.prototype.hasOwnProperty.call(o, k)) continue;
        Object.defineProperty(o, k, { value: toPlain(v), enumerable: true, writable: true, configurable: true });
      }
      return o;
    }
  }
}
