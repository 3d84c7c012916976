import { createParser } from 'eventsource-parser';
import { ApiError, authHeaders, problemOfResponse, session } from './api.js';

/**
 * One assistant turn over the public API: POST /v1/assistant/chat with `stream: true`, read with fetch
 * (the API key goes in the Authorization header) and parsed with eventsource-parser. The events mirror
 * gateway/src/assistant/turn.ts (TurnEvent); each is checked before a view sees it.
 */
export type TurnEvent =
  | { type: 'turn.started'; turnId: string; conversationId: string; model: string }
  | { type: 'tool.call'; callId: string; name: string; arguments: Record<string, unknown>; round: number }
  | { type: 'tool.result'; callId: string; name: string; isError: boolean; durationMs: number; text: string }
  | { type: 'confirmation.required'; callId: string; name: string; arguments: Record<string, unknown>; timeoutMs: number }
  | { type: 'text.delta'; text: string }
  | { type: 'turn.completed'; turnId: string; conversationId: string; text: string }
  | { type: 'turn.failed'; turnId: string; code: string; detail: string };

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

/** The events the panel uses, checked field by field; anything else (or malformed) is skipped. */
export function turnEventOf(event: string | undefined, data: string): TurnEvent | undefined {
  let v: Record<string, unknown>;
  try {
    const parsed = JSON.parse(data) as unknown;
    if (typeof parsed !== 'object' || parsed === null) return undefined;
    v = parsed as Record<string, unknown>;
  } catch {
    return undefined;
  }
  const str = (k: string) => (typeof v[k] === 'string' ? (v[k] as string) : undefined);
  const num = (k: string) => (typeof v[k] === 'number' ? (v[k] as number) : 0);
  const args = () => (typeof v['arguments'] === 'object' && v['arguments'] !== null ? (v['arguments'] as Record<string, unknown>) : {});
  const turnId = str('turnId');
  const callId = str('callId');
  const name = str('name');
  switch (event) {
    case 'turn.started': {
      const conversationId = str('conversationId');
      return turnId && conversationId ? { type: event, turnId, conversationId, model: str('model') ?? '' } : undefined;
    }
    case 'tool.call':
      return callId && name ? { type: event, callId, name, arguments: args(), round: num('round') } : undefined;
    case 'tool.result':
      return callId && name ? { type: event, callId, name, isError: v['isError'] === true, durationMs: num('durationMs'), text: str('text') ?? '' } : undefined;
    case 'confirmation.required':
      return callId && name ? { type: event, callId, name, arguments: args(), timeoutMs: num('timeoutMs') } : undefined;
    case 'text.delta': {
      const text = str('text');
      return text !== undefined ? { type: event, text } : undefined;
    }
    case 'turn.completed': {
      const conversationId = str('conversationId');
      return turnId && conversationId ? { type: event, turnId, conversationId, text: str('text') ?? '' } : undefined;
    }
    case 'turn.failed':
      return { type: event, turnId: turnId ?? '', code: str('code') ?? 'INTERNAL', detail: str('detail') ?? '' };
    default:
      return undefined;
  }
}
