import type { EventId, EventStore, StreamId } from '@modelcontextprotocol/server';

/**
 * Resumability for `/mcp` sessions: the SSE events each session sent, so a client whose stream dropped
 * can reconnect with `Last-Event-ID` and get what it missed (an answer sent while it was away).
 *
 * Bounded three ways: events and bytes per session (oldest dropped first) and bytes over all sessions
 * (the oldest event of the session holding the most dropped first). An event id is only looked up in its own session's
 * store, so one session can never replay another's events.
 */
export interface EventStoreLimits {
  maxEventsPerSession: number;
  maxBytesPerSession: number;
  maxBytesTotal: number;
}

export const DEFAULT_EVENT_STORE_LIMITS: EventStoreLimits = {
  maxEventsPerSession: 256,
  maxBytesPerSession: 4 * 1024 * 1024,
  maxBytesTotal: 32 * 1024 * 1024,
};

type Message = Parameters<EventStore['storeEvent']>[1];

interface Stored {
  id: EventId;
  streamId: StreamId;
  /**
   * The message as JSON text, not the object: the text is what the bounds count (so they bound the memory
   * really held), and a kept object graph costs several times its JSON. Parsed again only on a replay.
   */
  text: string;
  /** Priming events (`{}`) only carry an id for the client: nothing to replay. */
  replayable: boolean;
  bytes: number;
  /** Order over all sessions: the total byte bound drops the globally oldest event. */
  order: number;
}

export interface SessionEventStore extends EventStore {
  /** Frees the session's events (the session is closed). */
  dispose(): void;
  /**
   * `storeEvent` for a message its sender has serialized already (the same text goes on the wire: one
   * JSON.stringify per event, not two), answered at once. `replayable`: a JSON-RPC message, not a priming event.
   */
  storeText(streamId: StreamId, text: string, replayable: boolean): EventId;
}

export class BoundedEventStores {
  private readonly sessions = new Set<SessionStore>();
  private totalBytes = 0;
  private order = 0;

  constructor(private readonly limits: EventStoreLimits = DEFAULT_EVENT_STORE_LIMITS) {}

  /** A store for one session's transport. */
  forSession(): SessionEventStore {
    const store = new SessionStore(this);
    this.sessions.add(store);
    return store;
  }

  bytes(): number {
    return this.totalBytes;
  }

  /** Stores of sessions not yet disposed. */
  sessionCount(): number {
    return this.sessions.size;
  }

  /** @internal */ nextOrder(): number {
    return ++this.order;
  }
  /** @internal */ get bounds(): EventStoreLimits {
    return this.limits;
  }
  /** @internal */ account(by: number): void {
    this.totalBytes += by;
    // Past the total, the session holding the most gives up its oldest event (of equals, the one holding the older):
    // dropping the globally oldest let one key's many busy sessions push every other session's replay out.
    while (this.totalBytes > this.limits.maxBytesTotal) {
      let largest: SessionStore | undefined;
      for (const s of this.sessions) {
        if (s.oldestOrder() === undefined) continue;
        if (!largest || s.held() > largest.held() || (s.held() === largest.held() && s.oldestOrder()! < largest.oldestOrder()!)) largest = s;
      }
      if (!largest) break;
      largest.dropOldest();
    }
  }
  /** @internal */ remove(store: SessionStore): void {
    this.sessions.delete(store);
  }
}

class SessionStore implements SessionEventStore {
  private readonly events: Stored[] = [];
  private readonly byId = new Map<EventId, Stored>();
  private bytes = 0;
  private seq = 0;
  private disposed = false;

  constructor(private readonly owner: BoundedEventStores) {}

  storeEvent(streamId: StreamId, message: Message): Promise<EventId> {
    return Promise.resolve(this.storeText(streamId, JSON.stringify(message), 'jsonrpc' in message));
  }

  storeText(streamId: StreamId, text: string, replayable: boolean): EventId {
    const id = `${streamId}_${++this.seq}`;
    if (this.disposed) return id;
    const bytes = Buffer.byteLength(text) + streamId.length + id.length;
    const { maxEventsPerSession, maxBytesPerSession } = this.owner.bounds;
    // An event larger than the whole per-session budget is sent live but cannot be replayed.
    if (bytes > maxBytesPerSession) return id;
    while (this.events.length > 0 && (this.events.length >= maxEventsPerSession || this.bytes + bytes > maxBytesPerSession)) this.dropOldest();
    const e: Stored = { id, streamId, text, replayable, bytes, order: this.owner.nextOrder() };
    this.events.push(e);
    this.byId.set(id, e);
    this.bytes += bytes;
    this.owner.account(bytes);
    return id;
  }

  getStreamIdForEventId(eventId: EventId): Promise<StreamId | undefined> {
    return Promise.resolve(this.byId.get(eventId)?.streamId);
  }

  async replayEventsAfter(lastEventId: EventId, { send }: { send: (eventId: EventId, message: Message) => Promise<void> }): Promise<StreamId> {
    const last = this.byId.get(lastEventId);
    // The SDK answers a thrown error with an HTTP error: the client learns the events are gone.
    if (!last) throw new Error('unknown or expired Last-Event-ID: the events after it are no longer kept');
    for (const e of this.events) {
      if (e.order <= last.order || e.streamId !== last.streamId || !e.replayable) continue;
      await send(e.id, JSON.parse(e.text) as Message);
    }
    return last.streamId;
  }

  dispose(): void {
    this.disposed = true;
    while (this.events.length > 0) this.dropOldest();
    this.owner.remove(this);
  }

  /** @internal */ held(): number {
    return this.bytes;
  }
  /** @internal */ oldestOrder(): number | undefined {
    return this.events[0]?.order;
  }
  /** @internal */ dropOldest(): void {
    const e = this.events.shift();
    if (!e) return;
    this.byId.delete(e.id);
    this.bytes -= e.bytes;
    this.owner.account(-e.bytes);
  }
}
