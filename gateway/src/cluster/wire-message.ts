import type { Msg } from '@nats-io/transport-node';

const decoder = new TextDecoder();

/** The message's JSON, parsed with the schema; undefined when too large or malformed. */
export function parseMessage<T>(msg: Msg, schema: { safeParse(v: unknown): { success: true; data: T } | { success: false } }, maxBytes: number): T | undefined {
  if (msg.data.length > maxBytes) return undefined;
  try {
    const r = schema.safeParse(JSON.parse(decoder.decode(msg.data)));
    return r.success ? r.data : undefined;
  } catch {
    return undefined;
  }
}

/** The message's bytes as text (small control messages such as the ping). */
export function messageText(msg: Msg): string {
  return decoder.decode(msg.data);
}
