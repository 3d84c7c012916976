import type { ServerResponse } from 'node:http';
import type { SessionEventStore } from './event-store.js';
import { sseHeaders, SseStream } from './sse-stream.js';

/**
 * A /mcp session's SSE events as its event store keeps them: the event a message leaves as, the priming event a client
 * resumes from, and the replay of what a client missed (Last-Event-ID). Apart from node-transport.ts, which decides
 * which stream carries what and when a stream ends: these only write the events and read them back.
 */

/** One SSE event carrying a message (its JSON text). */
export const messageEvent = (text: string, eventId: string) => `event: message\nid: ${eventId}\ndata: ${text}\n\n`;

/**
 * The priming event (an id to resume from, and the retry hint) for clients that accept empty data, made when a
 * POST's stream starts as SSE (`SseStream.primeWith`); its id is stored then, before the stream's first event.
 */
export function primingEvent(store: SessionEventStore, streamId: string, retryInterval: number): string {
  const id = store.storeText(streamId, '{}', false);
  return `id: ${id}\nretry: ${retryInterval}\ndata: \n\n`;
}

/** A replay written: the stream it resumes, the SSE stream carrying it, the ids of the events it sent. */
export interface Replay {
  streamId: string;
  sse: SseStream;
  replayed: Set<string>;
}

/**
 * The events after `lastEventId` on its stream, written (kept, not yet flushed) on a new SSE stream answering `res`;
 * undefined when the store knows no such event. Throws what the store throws (the events are gone).
 */
export async function replayAfter(
  store: SessionEventStore,
  lastEventId: string,
  res: ServerResponse,
  sessionId: string | undefined,
  onUnreadCut: (() => void) | undefined,
): Promise<Replay | undefined> {
  const streamId = await store.getStreamIdForEventId?.(lastEventId);
  if (!streamId) return undefined;
  const sse = new SseStream(res, sseHeaders(sessionId), undefined);
  sse.oncut = onUnreadCut;
  const replayed = new Set<string>();
  const replayedId = await store.replayEventsAfter(lastEventId, {
    send: (eventId, message) => {
      replayed.add(eventId);
      if (!sse.write(messageEvent(JSON.stringify(message), eventId), true)) sse.end();
      return Promise.resolve();
    },
  });
  return { streamId: replayedId, sse, replayed };
}
