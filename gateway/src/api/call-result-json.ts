import type { CallOutcome } from '../devices/device-handle.js';

/**
 * The usual call result, text items only, as the JSON the route's response schema would serialise it to (same
 * keys, same order, same bytes), written here in one pass. Any other shape (other content, structuredContent,
 * other keys) is undefined, and the route sends the object through the schema's serialiser as before.
 */
export function plainCallResultJson(out: CallOutcome): string | undefined {
  for (const k in out) if (k !== 'content' && k !== 'isError' && k !== 'durationMs') return undefined;
  const { content, isError, durationMs } = out;
  if (!Array.isArray(content) || (isError !== undefined && typeof isError !== 'boolean')) return undefined;
  if (typeof durationMs !== 'number' || !Number.isFinite(durationMs)) return undefined;
  for (const item of content as unknown[]) {
    if (typeof item !== 'object' || item === null) return undefined;
    const { type, text } = item as { type?: unknown; text?: unknown };
    if (type !== 'text' || typeof text !== 'string') return undefined;
    for (const k in item) if (k !== 'type' && k !== 'text') return undefined;
  }
  // The usual single item in four joins (each join is a string of its own until the answer is written): 8 before.
  if (content.length === 1)
    return ONE_ITEM + JSON.stringify((content[0] as unknown as { text: string }).text) + (isError === true ? ONE_ITEM_ERROR : ONE_ITEM_OK) + durationMs + '}';
  let items = '';
  for (const item of content as unknown as Array<{ text: string }>) items += `${items === '' ? '' : ','}{"type":"text","text":${JSON.stringify(item.text)}}`;
  return `{"content":[${items}],"isError":${isError === true},"durationMs":${durationMs}}`;
}

const ONE_ITEM = '{"content":[{"type":"text","text":';
const ONE_ITEM_OK = '}],"isError":false,"durationMs":';
const ONE_ITEM_ERROR = '}],"isError":true,"durationMs":';
