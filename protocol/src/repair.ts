/**
 * The reference firmware pastes error messages into its JSON without escaping them
 * (`{"error":{"message":"Unknown tool: "x""}}`), so such frames are not JSON. This repairs the one shape
 * it produces: an error object whose `message` is its last member, closing the frame. Best effort: it
 * returns undefined when the text does not have that shape, and never throws.
 */
const MESSAGE_KEY = /"error"\s*:\s*\{\s*"message"\s*:\s*"/;
const TAIL = /"\s*\}\s*\}\s*(?:\}\s*)?$/;

export function repairUnescapedErrorMessage(text: string): string | undefined {
  const key = MESSAGE_KEY.exec(text);
  if (!key) return undefined;
  const start = key.index + key[0].length;
  const rest = text.slice(start);
  const tail = TAIL.exec(rest);
  if (!tail) return undefined;
  const raw = rest.slice(0, tail.index);
  return text.slice(0, start) + escapeLoose(raw) + rest.slice(tail.index);
}

/** Escape quotes and control characters that are not already part of a valid escape sequence. */
function escapeLoose(raw: string): string {
  let out = '';
  for (let i = 0; i < raw.length; i++) {
    const c = raw[i]!;
    if (c === '\\') {
      const next = raw[i + 1];
      if (next !== undefined && '"\\/bfnrtu'.includes(next)) {
        out += c + next;
        i++;
      } else {
        out += '\\\\';
      }
    } else if (c === '"') {
      out += '\\"';
    } else if (c.charCodeAt(0) < 0x20) {
      out += JSON.stringify(c).slice(1, -1);
    } else {
      out += c;
    }
  }
  return out;
}
