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
      // `\u` is an escape only with four hex digits after it (firmware text like `\uZZ` is literal).
      const valid = next === 'u' ? /^[0-9a-fA-F]{4}$/.test(raw.slice(i + 2, i + 6)) : next !== undefined && '"\\/bfnrt'.includes(next);
      if (valid) {
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

/** A reply in the reference layout: `"jsonrpc":"2.0","id":<n>,"error"|"result":`. Linear: it starts only at the literal. */
const REPLY_ID = /"jsonrpc"\s*:\s*"2\.0"\s*,\s*"id"\s*:\s*(\d{1,15})\s*,\s*"(?:error|result)"\s*:/;

/**
 * The id of the request a frame answers, read from text that is not JSON even after repair, so that the
 * request it answers can be settled (with an error carrying the raw text) instead of waiting for its
 * timeout. Undefined when the text does not look like a reply.
 */
export function unparsableReplyId(text: string): number | undefined {
  const m = REPLY_ID.exec(text);
  return m ? Number(m[1]) : undefined;
}
