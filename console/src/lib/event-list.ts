import type { GatewayEvent } from './types.js';

/* Events as the page keeps them: checked, and merged from the stream and the history route. No DOM: unit-tested in Node. */

/** `recent` (newest first) with `more` added: each id once, newest first by time, at most `keep`; `recent` itself when nothing is new. */
export function mergeEvents(recent: readonly GatewayEvent[], more: readonly GatewayEvent[], keep: number): GatewayEvent[] {
  const seen = new Set(recent.map((e) => e.id));
  const added = more.filter((e) => !seen.has(e.id) && (seen.add(e.id), true));
  if (added.length === 0) return recent as GatewayEvent[];
  // ISO times of one clock sort as strings; equal times keep the stream's order (a stable sort).
  return [...recent, ...added].sort((a, b) => (a.at < b.at ? 1 : a.at > b.at ? -1 : 0)).slice(0, keep);
}

/** An event as the stream or the history route gives it, checked; undefined when it is not one. */
export function parseEvent(data: string): GatewayEvent | undefined {
  try {
    return eventOf(JSON.parse(data) as unknown);
  } catch {
    return undefined;
  }
}

export function eventOf(raw: unknown): GatewayEvent | undefined {
  if (typeof raw !== 'object' || raw === null) return undefined;
  const v = raw as Partial<GatewayEvent>;
  if (typeof v.id !== 'string' || typeof v.type !== 'string' || typeof v.deviceId !== 'string' || typeof v.at !== 'string') return undefined;
  const data = typeof v.data === 'object' && v.data !== null && !Array.isArray(v.data) ? v.data : {};
  return { id: v.id.slice(0, 128), type: v.type, deviceId: v.deviceId.slice(0, 128), at: v.at, data };
}
