import { createParser } from 'eventsource-parser';
import { ApiError, authHeaders, session } from './api.js';
import { mergeEvents, parseEvent } from './event-list.js';
import type { GatewayEvent } from './types.js';

export type StreamStatus = 'connecting' | 'live' | 'paused' | 'retrying' | 'stopped';

/** The newest events kept for the views; older ones fall off (the page never grows without bound). */
const KEEP = 500;
const MAX_FRAME_CHARS = 256 * 1024;

/**
 * The one event stream of the page: GET /v1/events, read with fetch so the API key goes in the
 * Authorization header (EventSource cannot send headers, and a key in a URL ends up in logs).
 * Pausing closes the stream; resuming reopens it with Last-Event-ID, so the gateway replays what was
 * missed (or says `resync` when it no longer has it, and the views reload).
 */
export class EventStream {
  status: StreamStatus = 'stopped';
  lastId: string | undefined;
  error: string | undefined;
  private events: GatewayEvent[] = [];
  /** Set once the stream has been live: from then on, any other status means what the page shows may be stale. */
  private everLive = false;
  private abort: AbortController | undefined;
  private readonly listeners = new Set<(e: GatewayEvent | 'resync' | 'status') => void>();

  /** Newest first. */
  recent(): readonly GatewayEvent[] {
    return this.events;
  }

  /**
   * Whether device states on the page may be out of date: the stream is paused, failing, or not live
   * after having been live (before the first connection, what the page just loaded is current).
   */
  get stale(): boolean {
    return this.status === 'retrying' || this.status === 'paused' || (this.everLive && this.status !== 'live');
  }

  /** Add events read from the history route (older ones, or ones missed); duplicates of what the stream brought are skipped. */
  addHistory(older: readonly GatewayEvent[]): void {
    const merged = mergeEvents(this.events, older, KEEP);
    if (merged === this.events) return;
    this.events = merged;
    this.emit('status');
  }

  subscribe(f: (e: GatewayEvent | 'resync' | 'status') => void): () => void {
    this.listeners.add(f);
    return () => this.listeners.delete(f);
  }

  start(): void {
    if (this.abort) return;
    const abort = new AbortController();
    this.abort = abort;
    void this.run(abort.signal);
  }

  pause(): void {
    this.stop('paused');
  }

  resume(): void {
    this.start();
  }

  stop(status: StreamStatus = 'stopped'): void {
    this.abort?.abort();
    this.abort = undefined;
    // Stopped (signed out): the next start begins afresh, not "stale".
    if (status === 'stopped') this.everLive = false;
    this.setStatus(status);
  }

  private async run(signal: AbortSignal): Promise<void> {
    let backoffMs = 1000;
    while (!signal.aborted) {
      this.setStatus('connecting');
      try {
        await this.readOnce(signal);
        backoffMs = 1000;
      } catch (e) {
        if (signal.aborted) return;
        if (e instanceof ApiError && e.problem.status === 401) {
          session.signOut();
          return;
        }
        this.error = e instanceof ApiError ? `${e.problem.code}: ${e.problem.detail}` : 'the event stream was interrupted';
      }
      if (signal.aborted) return;
      this.setStatus('retrying');
      await new Promise<void>((resolve) => {
        const t = setTimeout(resolve, backoffMs);
        signal.addEventListener('abort', () => (clearTimeout(t), resolve()), { once: true });
      });
      backoffMs = Math.min(backoffMs * 2, 30_000);
    }
  }

  private async readOnce(signal: AbortSignal): Promise<void> {
    const res = await fetch('/v1/events', {
      headers: { accept: 'text/event-stream', ...authHeaders(), ...(this.lastId ? { 'last-event-id': this.lastId } : {}) },
      signal,
      cache: 'no-store',
    });
    if (!res.ok || !res.body) {
      const body = (await res.json().catch(() => ({}))) as { code?: string; detail?: string; title?: string };
      throw new ApiError({
        type: 'about:blank',
        title: body.title ?? res.statusText,
        status: res.status,
        code: body.code ?? `HTTP_${res.status}`,
        detail: body.detail ?? '',
      });
    }
    this.error = undefined;
    this.setStatus('live');
    const parser = createParser({
      onEvent: (m) => {
        if (m.id) this.lastId = m.id;
        if (m.event === 'resync') return this.emit('resync');
        if (m.data.length > MAX_FRAME_CHARS) return;
        const e = parseEvent(m.data);
        if (!e) return;
        this.events = [e, ...this.events.slice(0, KEEP - 1)];
        this.emit(e);
      },
    });
    const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      parser.feed(value);
    }
  }

  private setStatus(s: StreamStatus): void {
    if (this.status === s) return;
    this.status = s;
    if (s === 'live') this.everLive = true;
    this.emit('status');
  }

  private emit(e: GatewayEvent | 'resync' | 'status'): void {
    for (const f of this.listeners) f(e);
  }
}

export const events = new EventStream();
