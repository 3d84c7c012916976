import { useEffect, useState } from 'preact/hooks';
import { api } from './api.js';
import { capabilities, isMissingRoute } from './capabilities.js';
import { eventOf } from './event-list.js';
import { events } from './events.js';
import type { HistoryPage } from './fleet-types.js';
import type { GatewayEvent } from './types.js';

/**
 * Pages read at most per load: history is a start for the views, the live stream does the rest. Oldest
 * first (the contract), more pages to reach the recent end; newest first (a gateway that offers `order`),
 * a few pages back from now fill the 500 events the page keeps.
 */
const MAX_PAGES = { oldest: 5, newest: 3 } as const;
const PAGE = 200;

export type HistoryOutcome = { state: 'loaded'; count: number; since: string } | { state: 'unavailable' } | { state: 'failed'; detail: string };

/**
 * Read GET /v1/events/history from `since` (oldest first, following `next`) and add what it holds to the
 * page's events, where the live stream's are: the views then start with the past, not empty.
 */
export async function loadHistory(q: { since: string; device?: string }, signal?: AbortSignal): Promise<HistoryOutcome> {
  const caps = await capabilities();
  if (!caps.has('get', '/v1/events/history')) return { state: 'unavailable' };
  const order = caps.query('get', '/v1/events/history').has('order') ? 'newest' : 'oldest';
  const got: GatewayEvent[] = [];
  let cursor: string | undefined;
  try {
    for (let i = 0; i < MAX_PAGES[order]; i++) {
      const p = new URLSearchParams({ since: q.since, limit: String(PAGE) });
      if (order === 'newest') p.set('order', 'newest');
      if (q.device) p.set('device', q.device);
      if (cursor) p.set('cursor', cursor);
      const page = await api<HistoryPage>('GET', `/v1/events/history?${p}`, undefined, signal ? { signal } : {});
      for (const raw of Array.isArray(page.events) ? page.events : []) {
        const e = eventOf(raw);
        if (e) got.push(e);
      }
      if (!page.next || page.next === cursor) break;
      cursor = page.next;
    }
  } catch (e) {
    if (isMissingRoute(e)) return { state: 'unavailable' };
    if ((e as Error).name === 'AbortError') throw e;
    return { state: 'failed', detail: e instanceof Error ? e.message : String(e) };
  }
  events.addHistory(got);
  return { state: 'loaded', count: got.length, since: q.since };
}

export const hoursAgo = (h: number) => new Date(Date.now() - h * 3_600_000).toISOString();

/** Load the last `hours` of history once while mounted; undefined while it loads. */
export function useHistory(hours: number, device?: string): HistoryOutcome | undefined {
  const [outcome, setOutcome] = useState<HistoryOutcome>();
  useEffect(() => {
    const abort = new AbortController();
    setOutcome(undefined);
    loadHistory({ since: hoursAgo(hours), ...(device ? { device } : {}) }, abort.signal).then(
      (o) => !abort.signal.aborted && setOutcome(o),
      () => undefined,
    );
    return () => abort.abort();
  }, [hours, device]);
  return outcome;
}
