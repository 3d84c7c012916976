import { createParser } from 'eventsource-parser';
import { ApiError, authHeaders, problemOfResponse, session } from './api.js';
import { turnEventOf, type TurnEvent } from './turn-events.js';

export type { TurnEvent };

/**
 * One assistant turn over the public API: POST /v1/assistant/chat with `stream: true`, read with fetch
 * (the API key goes in the Authorization header) and parsed with eventsource-parser; each event is
 * checked (turn-events.ts) before a view sees it.
 */
export interface ChatRequest {
  message: string;
  conversationId?: string | undefined;
  deviceId?: string | undefined;
  model?: string | undefined;
}

export interface AssistantModel {
  name: string;
  provider: string;
  toolMode: string;
  default: boolean;
}

/** A frame larger than this is not an event the page shows (tool results are cut by the gateway long before). */
const MAX_FRAME_CHARS = 1024 * 1024;

/** Run one turn; `onEvent` sees each event in order. Resolves when the stream ends; aborting `signal` ends it (and the gateway cancels the turn). */
export async function streamTurn(req: ChatRequest, onEvent: (e: TurnEvent) => void, signal: AbortSignal): Promise<void> {
  let res: Response;
  try {
    res = await fetch('/v1/assistant/chat', {
      method: 'POST',
      headers: { accept: 'text/event-stream', 'content-type': 'application/json', ...authHeaders() },
      body: JSON.stringify({ ...req, stream: true }),
      signal,
      cache: 'no-store',
    });
  } catch (e) {
    if ((e as Error).name === 'AbortError') throw e;
    throw new ApiError({ type: 'about:blank', title: 'Network error', status: 0, detail: 'the gateway did not answer; is it running?', code: 'NETWORK' });
  }
  // Checks that fail before the turn starts (no such model, a busy conversation) are plain problem+json.
  if (!res.ok || !res.body) {
    if (res.status === 401) session.signOut();
    throw new ApiError(await problemOfResponse(res));
  }
  const parser = createParser({
    onEvent: (m) => {
      if (m.data.length > MAX_FRAME_CHARS) return;
      const e = turnEventOf(m.event, m.data);
      if (e) onEvent(e);
    },
  });
  const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    parser.feed(value);
  }
}
