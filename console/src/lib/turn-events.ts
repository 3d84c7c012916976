/**
 * The assistant's stream events as the console reads them. They mirror gateway/src/assistant/turn.ts
 * (TurnEvent); the console talks to the gateway only over HTTP, so each is checked here, field by field.
 * No DOM: the unit tests run it in Node.
 */
export type TurnEvent =
  | { type: 'turn.started'; turnId: string; conversationId: string; model: string }
  | { type: 'tool.call'; callId: string; name: string; arguments: Record<string, unknown>; round: number }
  | { type: 'tool.result'; callId: string; name: string; isError: boolean; durationMs: number; text: string }
  | { type: 'confirmation.required'; callId: string; name: string; arguments: Record<string, unknown>; timeoutMs: number }
  | { type: 'text.delta'; text: string }
  | { type: 'turn.completed'; turnId: string; conversationId: string; text: string }
  | { type: 'turn.failed'; turnId: string; code: string; detail: string };

/** The events the panel uses, checked field by field; anything else (or malformed) is skipped. */
export function turnEventOf(event: string | undefined, data: string): TurnEvent | undefined {
  let v: Record<string, unknown>;
  try {
    const parsed = JSON.parse(data) as unknown;
    if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) return undefined;
    v = parsed as Record<string, unknown>;
  } catch {
    return undefined;
  }
  const str = (k: string) => (typeof v[k] === 'string' ? (v[k] as string) : undefined);
  const num = (k: string) => (typeof v[k] === 'number' ? (v[k] as number) : 0);
  const args = () =>
    typeof v['arguments'] === 'object' && v['arguments'] !== null && !Array.isArray(v['arguments']) ? (v['arguments'] as Record<string, unknown>) : {};
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
